"""Upstream changes the fork has not picked (the path at the fork point), and word-by-word merges of
edits of the same lines: each rule settles what it can and says why it declines the rest."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from forkflow.conflicts import guardrails
from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.resolvers.structural import StructuralResolver, origin_regions
from forkflow.conflicts.resolvers.tokens import Clash, fork_lags, merge_tokens
from tests.test_conflicts import make_case

HEAD = "#include <x>\n\nvoid f() {\n"
TAIL = "}\n\nvoid g() {}\n"


def _cpp(body: str) -> str:
    return HEAD + body + TAIL


def _propose(case: ConflictCase, by_tokens: bool = False) -> tuple[bytes | None, str]:
    r = StructuralResolver(by_tokens)
    p = r.propose(case)
    if p is not None:
        assert guardrails.check(case, p.content).ok
    return (p.content, p.note) if p is not None else (None, r.last_reason)


def test_structural_takes_upstreams_lines_where_the_fork_only_lags(tmp_path: Path) -> None:
    # at the fork point the call read f(a, 1); upstream then made it f(a, 2), which the fork never
    # picked; now upstream renames f to h on that line: the fork's "edit" is only its lag
    origin = _cpp("  x = f(a, 1);\n")
    base, ours, theirs = _cpp("  x = f(a, 2);\n"), origin, _cpp("  x = h(a, 2);\n")
    case = replace(make_case(tmp_path, base, ours, theirs, path="k.cpp"), origin=origin.encode())
    assert origin_regions(case) == ["  x = f(a, 1);\n"]
    content, note = _propose(case)
    assert content == theirs.encode() and "not picked" in note
    # without the fork point the same conflict stays with a person
    content, why = _propose(replace(case, origin=None))
    assert content is None and "same lines" in why


def test_structural_keeps_the_forks_own_edit_of_lines_upstream_changed(tmp_path: Path) -> None:
    # the fork's edit is its own (the fork point had the base's words): no lag, git's conflict stands
    base = _cpp("  x = f(a, 2);\n")
    case = replace(make_case(tmp_path, base, _cpp("  x = f(a, 3);\n"), _cpp("  x = h(a, 2);\n"), path="k.cpp"),
                   origin=base.encode())
    assert not fork_lags("  x = f(a, 2);\n", "  x = f(a, 3);\n", "  x = f(a, 2);\n")
    content, why = _propose(case)
    assert content is None and "same lines" in why


def test_tokens_merge_different_words_of_one_line(tmp_path: Path) -> None:
    # upstream moves to Op::create(builder, ...); the fork added an argument at the end
    base = _cpp("  auto op = builder.create<Op>(loc, a,\n                               b);\n")
    ours = _cpp("  auto op = builder.create<Op>(loc, a,\n                               b, fork);\n")
    theirs = _cpp("  auto op = Op::create(builder, loc, a,\n                        b);\n")
    case = make_case(tmp_path, base, ours, theirs, path="k.cpp")
    content, why = _propose(case)
    assert content is None and "same lines" in why  # the default chain leaves it to a person
    content, note = _propose(case, by_tokens=True)
    assert content is not None and "different words" in note
    assert content.split() == _cpp("  auto op = Op::create(builder, loc, a, b, fork);\n").encode().split()


def test_tokens_decline_words_both_sides_changed(tmp_path: Path) -> None:
    case = make_case(tmp_path, _cpp("  x = f(a, 2);\n"), _cpp("  x = f(a, 3);\n"), _cpp("  x = f(a, 4);\n"),
                     path="k.cpp")
    content, why = _propose(case, by_tokens=True)
    assert content is None and "the sides' edits touch the same words" in why


def test_tokens_decline_two_versions_of_one_change() -> None:
    # the fork picked an earlier form of upstream's change: both bring in `multicast`
    try:
        merge_tokens("load(desc, pred);\n", "load(multicast, desc, pred);\n", "load(desc, pred, multicast);\n")
    except Clash as c:
        assert "multicast" in str(c)
    else:
        raise AssertionError("merged two versions of one change")


def test_tokens_leave_out_the_forks_lag_and_keep_its_own_words() -> None:
    # the fork lags on `2` (the fork point had `1`) and added `fork`; upstream renamed f to h
    merged = merge_tokens("x = f(a, 2)\n", "x = f(fork, a, 1)\n", "x = h(a, 2)\n", origin="x = f(a, 1)\n")
    assert merged == "x = h(fork, a, 2)\n"


def test_build_case_carries_the_path_at_the_fork_point(tmp_path: Path) -> None:
    from forkflow.conflicts.engine import deterministic_resolvers, resolve_case
    from forkflow.git.repo import Repo
    from forkflow.conflicts.casework import build_case
    from forkflow.git.pick import MemoryPicker, PickStatus
    from forkflow.testing.gitrepo import ForkBuilder

    b = ForkBuilder(tmp_path)
    b.upstream_commit({"k.cpp": _cpp("  x = f(a, 1);\n")}, "Add (#1)")
    b.branch_fork()
    b.fork_commit({"fork.txt": "fork\n"}, "Fork: own file")
    b.upstream_commit({"k.cpp": _cpp("  x = f(a, 2);\n")}, "Two (#2)")  # not picked by the fork
    u3 = b.upstream_commit({"k.cpp": _cpp("  x = h(a, 2);\n")}, "Rename f to h (#3)")
    b.fetch()
    picker = MemoryPicker(b.f.path)
    step = picker.pick(picker.commit_tree(b.f.head()), u3)
    assert step.status is PickStatus.CONFLICT
    case = build_case(Repo(b.f.path), picker, u3, step.conflicts[0])
    assert case.origin == _cpp("  x = f(a, 1);\n").encode()
    out = resolve_case(case, deterministic_resolvers())
    assert out.resolved and out.resolver == "structural" and out.content == _cpp("  x = h(a, 2);\n").encode()


def test_tokens_merge_only_lines_edited_in_place(tmp_path: Path) -> None:
    # word alignment across lines of repetitive code goes wrong: a side that adds or drops lines
    # leaves the region to a person
    base = _cpp("  m(1, 2);\n  m(3, 4);\n")
    ours = _cpp("  m(1, 2);\n  m(3, 4);\n  m(5, 6);\n")
    theirs = _cpp("  n(1, 2);\n  n(3, 4);\n")
    content, why = _propose(make_case(tmp_path, base, ours, theirs, path="k.cpp"), by_tokens=True)
    assert content is None and "in place" in why
