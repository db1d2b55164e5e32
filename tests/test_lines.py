"""The in-memory blame over the upstream range: dependencies and the fork's own lines, on literal diffs."""
from __future__ import annotations

from forkflow.models import Sha
from forkflow.planning.lines import CommitShape, DepKind, Dependency, FileChange, Hunk, closure, trace


def sha(n: int) -> Sha:
    return Sha(f"{n:040x}")


def change(path: str, *hunks: tuple[int, int, int, int], binary: bool = False) -> FileChange:
    return FileChange(path, None if binary else tuple(Hunk(*h) for h in hunks))


def test_lines_dependency_on_the_lines_an_earlier_commit_wrote() -> None:
    shapes = [
        CommitShape(sha(1), (change("a.py", (10, 0, 11, 3)),)),  # writes lines 11-13
        CommitShape(sha(2), (change("a.py", (40, 2, 40, 2)),)),  # far away: independent
        CommitShape(sha(3), (change("a.py", (12, 1, 12, 1)),)),  # rewrites line 12: depends on 1
        CommitShape(sha(4), (change("b.py", (1, 1, 1, 1)),)),
    ]
    found = trace(shapes, [s.sha for s in shapes])
    assert found.dependencies == {sha(3): (Dependency(sha(1), DepKind.LINES, "a.py:11-13"),)}


def test_lines_shift_with_earlier_hunks_and_adjacency_counts() -> None:
    shapes = [
        CommitShape(sha(1), (change("a.py", (50, 0, 51, 2)),)),  # writes 51-52
        CommitShape(sha(2), (change("a.py", (5, 3, 5, 0)),)),  # removes 5-7: 1's lines move to 48-49
        CommitShape(sha(3), (change("a.py", (50, 1, 50, 1)),)),  # line 50, next to 49: depends on 1
        CommitShape(sha(4), (change("a.py", (51, 1, 51, 1)),)),  # two lines below: independent of 1
    ]
    found = trace(shapes, [s.sha for s in shapes])
    assert [d.on for d in found.dependencies[sha(3)]] == [sha(1)]
    assert found.dependencies[sha(3)][0].where == "a.py:49"
    assert [d.on for d in found.dependencies.get(sha(4), ())] == [sha(3)]


def test_lines_untracked_commits_move_lines_but_are_no_dependency() -> None:
    shapes = [
        CommitShape(sha(1), (change("a.py", (0, 0, 1, 5)),)),  # picked already: untracked
        CommitShape(sha(2), (change("a.py", (2, 1, 2, 1)),)),
    ]
    assert trace(shapes, [sha(2)]).dependencies == {}


def test_lines_fork_overlap_is_line_level() -> None:
    fork = [change("k.py", (20, 2, 20, 4)), change("bin/tool", binary=True)]
    shapes = [
        CommitShape(sha(1), (change("k.py", (3, 1, 3, 1)),)),  # same file, far from the fork's lines
        CommitShape(sha(2), (change("k.py", (0, 0, 1, 2)),)),  # inserts 2 lines at the top: fork's move to 22-23
        CommitShape(sha(3), (change("k.py", (23, 1, 23, 1)),)),
        CommitShape(sha(4), (change("bin/tool", binary=True),)),
    ]
    found = trace(shapes, [s.sha for s in shapes], fork)
    assert found.fork_overlap == {sha(3): "k.py:22-23", sha(4): "bin/tool"}


def test_lines_binary_files_depend_by_file_and_symbols_by_name() -> None:
    shapes = [
        CommitShape(sha(1), (change("bin/x", binary=True),)),
        CommitShape(sha(2), (change("bin/x", binary=True),)),
        CommitShape(sha(3), (change("ops.py", (1, 0, 2, 3)),), defines=frozenset({"make_layout"}),
                    mentions=frozenset({"make_layout"})),
        CommitShape(sha(4), (change("use.py", (9, 1, 9, 1)),), uses=frozenset({"make_layout", "other_name"})),
    ]
    found = trace(shapes, [s.sha for s in shapes])
    assert found.dependencies[sha(2)] == (Dependency(sha(1), DepKind.FILE, "bin/x"),)
    assert found.dependencies[sha(4)] == (Dependency(sha(3), DepKind.SYMBOL, "make_layout (ops.py)"),)


def test_lines_a_name_mentioned_before_is_not_introduced() -> None:
    shapes = [
        CommitShape(sha(1), (change("a.py", (1, 1, 1, 1)),), mentions=frozenset({"matchAndRewrite"})),
        CommitShape(sha(2), (change("b.cpp", (1, 0, 2, 9)),), defines=frozenset({"matchAndRewrite"}),
                    mentions=frozenset({"matchAndRewrite"})),
        CommitShape(sha(3), (change("c.cpp", (1, 0, 2, 9)),), uses=frozenset({"matchAndRewrite"})),
    ]
    assert trace(shapes, [s.sha for s in shapes]).dependencies == {}


def test_lines_revert_of_a_revert_of_a_later_commit_is_no_cycle() -> None:
    shapes = [CommitShape(sha(n), (change(f"f{n}.py", (1, 1, 1, 1)),)) for n in (1, 2, 3)]
    # 1 "reverts" 3 (a later commit: would be a cycle), 3 reverts 2
    found = trace(shapes, [s.sha for s in shapes], reverts={sha(1): sha(3), sha(3): sha(2)})
    assert found.dependencies == {sha(3): (Dependency(sha(2), DepKind.REVERT, sha(2)[:12]),)}


def test_lines_closure_is_transitive_and_names_the_direct_dependency() -> None:
    d12 = Dependency(sha(1), DepKind.LINES, "a.py:1")
    d23 = Dependency(sha(2), DepKind.LINES, "a.py:2")
    held = closure({sha(2): (d12,), sha(3): (d23,)}, [sha(1), sha(2), sha(3), sha(4)], [sha(1)])
    assert held == {sha(2): d12, sha(3): d23}


def test_lines_deleting_a_file_depends_on_every_writer() -> None:
    shapes = [
        CommitShape(sha(1), (change("a.py", (0, 0, 1, 3)),)),
        CommitShape(sha(2), (FileChange("a.py", (Hunk(1, 3, 0, 0),), deleted=True),)),
        CommitShape(sha(3), (FileChange("a.py", (Hunk(0, 0, 1, 1),), added=True),)),
    ]
    found = trace(shapes, [s.sha for s in shapes])
    assert [d.on for d in found.dependencies[sha(2)]] == [sha(1)]
    assert sha(3) not in found.dependencies
