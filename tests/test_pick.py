"""In-memory picking on real repositories: the same trees as `git cherry-pick`, and every odd case."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from forkflow.conflicts.classify import ConflictKind, classify
from forkflow.git.run import run_git
from forkflow.landing.message import Member, bundle_message, single_message
from forkflow.git.pick import MemoryPicker, PickStatus, PickStep, merge_trees
from forkflow.models import Sha
from forkflow.testing.gitrepo import ForkBuilder


def cherry_pick_tree(fork: Path, onto: str, sha: str, tmp: Path) -> str:
    """What plain `git cherry-pick` in a work tree gives."""
    wt = tmp / "wt"
    run_git("worktree", "add", "--detach", "-q", str(wt), onto, cwd=fork)
    try:
        run_git("cherry-pick", "--allow-empty", "-m", "1", sha, cwd=wt) if _is_merge(fork, sha) else \
            run_git("cherry-pick", "--allow-empty", sha, cwd=wt)
        return run_git("rev-parse", "HEAD^{tree}", cwd=wt).strip()
    finally:
        run_git("worktree", "remove", "--force", str(wt), cwd=fork)


def _is_merge(repo: Path, sha: str) -> bool:
    return len(run_git("show", "-s", "--format=%P", sha, cwd=repo).split()) > 1


@pytest.fixture
def fork(builder: ForkBuilder) -> ForkBuilder:
    builder.upstream_commit({"k.py": "def f():\n    return 1\n\n\ndef g():\n    return 2\n",
                             "doc.txt": "a\nb\nc\n", "blob.bin": b"\0\1\2\3"}, "Initial")
    builder.branch_fork()
    builder.fork_commit({"k.py": "def f():\n    return 10  # fork\n\n\ndef g():\n    return 2\n"}, "[fork] f")
    return builder


def _tip(b: ForkBuilder) -> Sha:
    return Sha(b.f.git("rev-parse", "main").strip())


def test_pick_clean_matches_git_cherry_pick(fork: ForkBuilder, tmp_path: Path) -> None:
    u = fork.upstream_commit({"k.py": "def f():\n    return 1\n\n\ndef g():\n    return 3\n",
                              "new/a.py": "A = 1\n"}, "Change g (#5)")
    fork.fetch()
    p = MemoryPicker(fork.f.path)
    step = p.pick(p.commit_tree(_tip(fork)), u)
    assert step.status is PickStatus.APPLIED
    assert step.tree == cherry_pick_tree(fork.f.path, _tip(fork), u, tmp_path)


def test_pick_empty_when_already_applied(fork: ForkBuilder) -> None:
    u = fork.upstream_commit({"doc.txt": "a\nB\nc\n"}, "Fix b (#6)")
    fork.fork_commit({"doc.txt": "a\nB\nc\n"}, "[fork] the same fix, by hand")
    fork.fetch()
    p = MemoryPicker(fork.f.path)
    step = p.pick(p.commit_tree(_tip(fork)), u)
    assert step.status is PickStatus.EMPTY
    assert step.tree == p.commit_tree(_tip(fork))


def test_pick_content_conflict_reports_three_sides(fork: ForkBuilder) -> None:
    u = fork.upstream_commit({"k.py": "def f():\n    return 100\n\n\ndef g():\n    return 2\n"}, "f 100 (#7)")
    fork.fetch()
    p = MemoryPicker(fork.f.path)
    step = p.pick(p.commit_tree(_tip(fork)), u)
    assert step.status is PickStatus.CONFLICT
    (c,) = step.conflicts
    assert c.path == "k.py" and c.base and c.ours and c.theirs
    assert b"100" in p.blob(c.theirs.oid) and b"fork" in p.blob(c.ours.oid)
    kind = classify((c.base.mode, c.base.path), (c.ours.mode, c.ours.path), (c.theirs.mode, c.theirs.path),
                    is_binary=False)
    assert kind is ConflictKind.CONTENT
    resolved = p.resolve(p.commit_tree(_tip(fork)), u, {"k.py": b"def f():\n    return 110\n"})
    assert p.repo.get(resolved)["k.py"].data == b"def f():\n    return 110\n"  # type: ignore[index]


def test_pick_delete_modify_conflict(fork: ForkBuilder) -> None:
    u = fork.upstream_commit({"k.py": None}, "Remove k (#8)")
    fork.fetch()
    p = MemoryPicker(fork.f.path)
    step = p.pick(p.commit_tree(_tip(fork)), u)
    assert step.status is PickStatus.CONFLICT
    c = step.conflicts[0]
    assert c.theirs is None and c.ours is not None
    assert classify((c.base.mode, c.path) if c.base else None, (c.ours.mode, c.path), None,
                    False) is ConflictKind.DELETE_MODIFY
    tree = p.resolve(p.commit_tree(_tip(fork)), u, {"k.py": None})  # a person may take the deletion
    assert "k.py" not in p.repo.get(tree)  # type: ignore[operator]


def test_pick_binary_changes_apply_and_conflict(fork: ForkBuilder, tmp_path: Path) -> None:
    u = fork.upstream_commit({"blob.bin": b"\0\1\2\3\4"}, "Grow blob (#9)")
    fork.fetch()
    p = MemoryPicker(fork.f.path)
    step = p.pick(p.commit_tree(_tip(fork)), u)
    assert step.status is PickStatus.APPLIED
    assert step.tree == cherry_pick_tree(fork.f.path, _tip(fork), u, tmp_path)
    fork.fork_commit({"blob.bin": b"\0\x09\x09"}, "[fork] our blob")
    step = p.pick(p.commit_tree(_tip(fork)), u)
    assert step.status is PickStatus.CONFLICT
    assert step.conflicts[0].path == "blob.bin"


def test_pick_mode_change_and_rename_follow_the_fork_edit(fork: ForkBuilder, tmp_path: Path) -> None:
    fork.upstream.git("update-index", "--chmod=+x", "doc.txt")
    mode = fork.upstream.commit({}, "Make doc executable (#10)")
    fork.upstream.git("mv", "k.py", "kern.py")
    ren = fork.upstream.commit({}, "Rename k to kern (#11)")
    fork.fetch()
    p = MemoryPicker(fork.f.path)
    tree = p.commit_tree(_tip(fork))
    s1 = p.pick(tree, mode)
    assert s1.status is PickStatus.APPLIED
    assert p.repo.get(s1.tree)["doc.txt"].filemode == 0o100755  # type: ignore[index]
    s2 = p.pick(s1.tree, ren)
    assert s2.status is PickStatus.APPLIED
    t = p.repo.get(s2.tree)
    assert "k.py" not in t and b"fork" in t["kern.py"].data  # type: ignore[operator,index]


def test_pick_change_to_a_file_an_unpicked_commit_renamed_follows_the_old_name(
        fork: ForkBuilder, tmp_path: Path) -> None:
    body = "".join(f"line {i}\n" for i in range(40))
    fork.upstream_commit({"lib/ProxFence.cpp": body}, "Add fence pass (#20)")
    fork.fetch()
    fork.f.git("merge", "-q", "--no-edit", "upstream/main", env=fork.f.env())
    fork.upstream.git("mv", "lib/ProxFence.cpp", "lib/ProxyFence.cpp")
    fork.upstream.commit({}, "Correct the file name (#21)")  # not picked: the fork keeps the old name
    change = fork.upstream_commit({"lib/ProxyFence.cpp": body.replace("line 30\n", "line thirty\n")}, "Fix (#22)")
    fork.fetch()
    p = MemoryPicker(fork.f.path)
    p.know_fork_point(fork.f.git("merge-base", "main", "upstream/main").strip())
    step = p.pick(p.commit_tree(_tip(fork)), change)
    assert step.status is PickStatus.APPLIED
    assert step.tree == cherry_pick_tree(fork.f.path, _tip(fork), change, tmp_path)
    assert b"line thirty" in p.repo.get(step.tree)["lib/ProxFence.cpp"].data  # type: ignore[index]


def test_pick_submodule_pointer_changes(fork: ForkBuilder) -> None:
    a, b_, c = "1" * 40, "2" * 40, "3" * 40
    fork.upstream.git("update-index", "--add", "--cacheinfo", f"160000,{a},third_party/sub")
    fork.upstream.commit({}, "Add submodule (#12)")
    fork.fetch()
    fork.f.git("merge", "-q", "--no-edit", "upstream/main", env=fork.f.env())
    fork.upstream.git("update-index", "--cacheinfo", f"160000,{b_},third_party/sub")
    bump = fork.upstream.commit({}, "Bump submodule (#13)")
    fork.fetch()
    p = MemoryPicker(fork.f.path)
    step = p.pick(p.commit_tree(_tip(fork)), bump)
    assert step.status is PickStatus.APPLIED
    assert str(p.repo.get(step.tree)["third_party/sub"].id) == b_  # type: ignore[index]
    fork.f.git("update-index", "--cacheinfo", f"160000,{c},third_party/sub")
    fork.f.commit({}, "[fork] our own submodule pointer")
    step = p.pick(p.commit_tree(_tip(fork)), bump)
    assert step.status is PickStatus.CONFLICT
    sides = step.conflicts[0]
    assert sides.ours and sides.ours.is_submodule
    base, ours, theirs = ((s.mode, s.path) if s else None for s in (sides.base, sides.ours, sides.theirs))
    assert classify(base, ours, theirs, is_binary=False) is ConflictKind.SUBMODULE


def test_pick_upstream_merge_commit_against_its_mainline(fork: ForkBuilder, tmp_path: Path) -> None:
    up = fork.upstream
    up.git("checkout", "-q", "-b", "topic")
    up.commit({"topic.py": "T = 1\n"}, "Topic work")
    up.git("checkout", "-q", "main")
    up.commit({"doc.txt": "a\nb\nc\nd\n"}, "Mainline work (#14)")
    up.git("merge", "-q", "--no-ff", "-m", "Merge pull request #15 from topic", "topic", env=up.env())
    merge = up.head()
    fork.fetch()
    p = MemoryPicker(fork.f.path)
    step = p.pick(p.commit_tree(_tip(fork)), merge)
    assert step.status is PickStatus.APPLIED
    tree = p.repo.get(step.tree)
    assert "topic.py" in tree and p.repo.get(step.tree)["doc.txt"].data == b"a\nb\nc\n"  # type: ignore[operator,index]
    assert step.tree == cherry_pick_tree(fork.f.path, _tip(fork), merge, tmp_path)


def _raw_commit(tree_dir: Path, message: bytes) -> str:
    """A commit whose message bytes are not UTF-8 and carry no encoding header (legacy history)."""
    tree = run_git("write-tree", cwd=tree_dir).strip()
    parent = run_git("rev-parse", "HEAD", cwd=tree_dir).strip()
    who = b"Ada Upstream <ada@example.com> 1700000000 +0000"
    body = b"tree %s\nparent %s\nauthor %s\ncommitter %s\n\n" % (tree.encode(), parent.encode(), who, who)
    from forkflow.git.run import run_git_bytes

    _, out, _ = run_git_bytes("hash-object", "-t", "commit", "-w", "--stdin", cwd=tree_dir, input=body + message)
    sha = out.decode().strip()
    run_git("update-ref", "refs/heads/main", sha, cwd=tree_dir)
    return sha


def test_pick_non_utf8_message_and_path(fork: ForkBuilder, tmp_path: Path) -> None:
    up = fork.upstream
    name = os.fsdecode(b"caf\xe9.txt")
    (up.path / name).write_bytes(b"latin-1 name\n")
    up.git("add", "--", name)
    u = Sha(_raw_commit(up.path, b"Caf\xe9 fix (#16)\n\nd\xe9tails\n"))
    fork.fetch()
    p = MemoryPicker(fork.f.path)
    step = p.pick(p.commit_tree(_tip(fork)), u)
    assert step.status is PickStatus.APPLIED
    assert step.tree == cherry_pick_tree(fork.f.path, _tip(fork), u, tmp_path)
    raw, enc = p.raw_message(u)
    new = p.write_commit(step.tree, _tip(fork), single_message(u, raw), p.author(u), enc)
    written = run_git("cat-file", "commit", new, cwd=fork.f.path)
    assert f"Upstream-Commit: {u}" in written
    assert p.repo.get(new).raw_message.startswith(b"Caf\xe9 fix (#16)\n\n> d\xe9tails")  # type: ignore[union-attr]  # upstream's body, quoted


def test_pick_messages_quote_evidence_lines_and_list_bundles() -> None:
    raw = b"Fix (#1)\n\nUpstream-Commit: " + b"a" * 40 + b"\n(cherry picked from commit " + b"b" * 40 + b")\n"
    msg = single_message(Sha("c" * 40), raw).decode()
    assert msg.endswith(f"\n\nUpstream-Commit: {'c' * 40}\n")
    assert f"> Upstream-Commit: {'a' * 40}" in msg and "> (cherry picked" in msg
    text = bundle_message([Member(Sha("1" * 40), "One (#10)", 10), Member(Sha("2" * 40), "Two", None)])
    assert text.startswith("Cherry-pick 2 upstream (#10)\n")
    assert f"Upstream-Commit: {'1' * 40}\nUpstream-Commit: {'2' * 40}" in text
    assert "- 111111111111 One (#10)" in text


def _loose(repo: Path) -> set[Path]:
    return {f for d in (repo / ".git/objects").glob("[0-9a-f][0-9a-f]") for f in d.iterdir()}


def test_pick_batch_writes_reach_git_only_on_flush_as_one_pack(fork: ForkBuilder) -> None:
    ups = [fork.upstream_commit({f"m{i}/a.py": f"A = {i}\n"}, f"Add m{i} (#{30 + i})") for i in range(3)]
    conflict = fork.upstream_commit({"k.py": "def f():\n    return 11\n\n\ndef g():\n    return 2\n"}, "f (#40)")
    fork.fetch()
    repo = fork.f.path
    packs = set((repo / ".git/objects/pack").glob("*.pack"))
    loose = _loose(repo)
    p = MemoryPicker(repo, batch_writes=True)
    unit = p.pick_sequence(p.commit_tree(_tip(fork)), ups)
    resolved = p.resolve(p.commit_tree(_tip(fork)), conflict, {"k.py": b"def f():\n    return 12\n"})
    commit = p.write_commit(unit.tree, _tip(fork), b"Cherry-pick 3 upstream\n")
    assert p.pending_writes > 3 and p.repo.get(commit) is not None  # this process reads its own writes
    missing = run_git("cat-file", "--batch-check", cwd=repo, input=f"{commit}\n{resolved}\n")
    assert missing.split() == [commit, "missing", resolved, "missing"]  # git does not see them yet
    p.flush()
    assert p.pending_writes == 0
    assert run_git("rev-parse", f"{commit}^{{tree}}", cwd=repo).strip() == unit.tree
    assert run_git("show", f"{commit}:m2/a.py", cwd=repo) == "A = 2\n"
    assert run_git("show", f"{resolved}:k.py", cwd=repo) == "def f():\n    return 12\n"
    assert len(set((repo / ".git/objects/pack").glob("*.pack")) - packs) == 1 and _loose(repo) == loose
    p.flush()  # nothing left: no empty pack
    assert len(set((repo / ".git/objects/pack").glob("*.pack")) - packs) == 1


def test_pick_sequence_resolution_that_changes_nothing_is_empty(fork: ForkBuilder) -> None:
    u = fork.upstream_commit({"k.py": "def f():\n    return 100\n\n\ndef g():\n    return 2\n"}, "Tune f (#7)")
    fork.fetch()
    p = MemoryPicker(fork.f.path)
    tree = p.commit_tree(_tip(fork))

    def keep_ours(step: PickStep, onto: str) -> dict[str, bytes | None]:
        return {c.path: p.blob(c.ours.oid) for c in step.conflicts if c.ours is not None}

    picked = p.pick_sequence(tree, [u], resolve=keep_ours)
    assert picked.applied == () and picked.empty == (u,) and picked.tree == tree  # never an empty commit
    assert picked.resolved == {}


def test_pick_resolved_path_keeps_the_mode_the_merge_gives(fork: ForkBuilder) -> None:
    fork.upstream.write({"k.py": "def f():\n    return 100\n\n\ndef g():\n    return 2\n"})
    fork.upstream.git("update-index", "--chmod=+x", "k.py")  # upstream: the fork's line changed, and executable
    up = fork.upstream.commit({}, "Tune f (#8)")
    fork.f.write({"doc.txt": "a\nB fork\nc\n"})
    fork.f.git("update-index", "--chmod=+x", "doc.txt")  # the fork: a line changed, and executable
    fork.fork_commit({}, "[fork] doc")
    doc = fork.upstream.commit({"doc.txt": "a\nB upstream\nc\n"}, "Doc (#9)")
    fork.fetch()
    p = MemoryPicker(fork.f.path)
    tree = p.commit_tree(_tip(fork))
    for sha, path, mode in ((up, "k.py", 0o100755), (doc, "doc.txt", 0o100755)):
        assert p.pick(tree, sha).status is PickStatus.CONFLICT
        resolved = p.repo.get(p.resolve(tree, sha, {path: b"resolved\n"}))
        assert resolved[path].filemode == mode, path  # type: ignore[index]


def test_pick_flush_over_the_memory_cap_writes_what_it_would_forget(fork: ForkBuilder,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A flush with roots leaves other objects in memory up to a cap; past it they are written, never
    dropped: a later conflict may name a blob of a tree still in use."""
    import forkflow.git.pick as pick_module

    monkeypatch.setattr(pick_module, "KEEP_BYTES", 0)
    fork.fetch()
    p = MemoryPicker(fork.f.path, batch_writes=True)
    tree = p.commit_tree(_tip(fork))
    aside = str(p.repo.create_blob(b"a blob no root reaches\n"))
    commit = p.write_commit(tree, _tip(fork), b"candidate\n")
    p.flush([commit])
    assert p.pending_writes == 0
    assert p.blob(aside) == b"a blob no root reaches\n"
    assert run_git("cat-file", "-p", aside, cwd=fork.f.path) == "a blob no root reaches\n"


def test_pick_blob_the_clone_lacks_is_named(fork: ForkBuilder) -> None:
    from forkflow.git.pick import MissingBlob

    p = MemoryPicker(fork.f.path, batch_writes=True)
    with pytest.raises(MissingBlob, match="blob c4e2397c148d is not in this clone"):
        p.blob("c4e2397c148d302b20d80e960dabe41d6cc99379")


def test_pick_blob_held_in_memory_is_read_before_any_flush(fork: ForkBuilder) -> None:
    """pygit2 loads a blob's data by a prefix lookup; the in-memory objects answered none, so a
    conflict naming a blob merged in memory read as missing (a replay of a real fork stopped)."""
    p = MemoryPicker(fork.f.path, batch_writes=True)
    oid = str(p.repo.create_blob(b"merged in memory\n"))
    assert p.pending_writes == 1
    assert p.blob(oid) == b"merged in memory\n"
    assert p.repo.odb.read(oid)[1] == b"merged in memory\n"
    assert p.repo.revparse_single(oid[:12]).id == p.repo.get(oid).id  # type: ignore[union-attr]


def test_pick_flush_with_roots_writes_loose_objects_git_reads(fork: ForkBuilder) -> None:
    """A unit's few objects go to loose files: git reads each, they are read-only, and a temporary
    file a killed run of the same process id left in the way is replaced."""
    import pygit2

    ups = [fork.upstream_commit({f"n{i}/deep/a.py": f"A = {i}\n"}, f"Add n{i} (#{50 + i})") for i in range(2)]
    fork.fetch()
    repo = fork.f.path
    p = MemoryPicker(repo, batch_writes=True)
    unit = p.pick_sequence(p.commit_tree(_tip(fork)), ups)
    blob = str(p.repo.create_blob(b"resolved by hand\n"))
    tree = p._apply(p.tree(unit.tree), {"n9/deep/r.py": (blob, 0o100644)})
    assert tree is not None
    commit = p.write_commit(tree, _tip(fork), b"Cherry-pick 2 upstream\n")
    folder = repo / ".git/objects" / commit[:2]
    folder.mkdir(exist_ok=True)
    stale = folder / f"tmp_obj_forkflow_{os.getpid()}_{commit[:8]}"
    stale.write_bytes(b"half written")
    stale.chmod(0o444)
    before = _loose(repo)
    p.flush([commit])
    written = _loose(repo) - before
    assert {f.parent.name + f.name for f in written} >= {commit, tree, blob}
    assert not stale.exists()
    assert all(f.stat().st_mode & 0o777 == 0o444 for f in written)
    assert run_git("cat-file", "-p", f"{commit}:n9/deep/r.py", cwd=repo) == "resolved by hand\n"
    assert run_git("show", f"{commit}:n1/deep/a.py", cwd=repo) == "A = 1\n"
    run_git("fsck", "--connectivity-only", "--no-dangling", cwd=repo)
    assert {o for o in (commit, tree, blob) if pygit2.Oid(hex=o) in p._memory.objects} == set()  # type: ignore[union-attr]


def test_pick_trees_written_in_memory_are_gits_byte_for_byte(tmp_path: Path) -> None:
    """With batch writes the picker hashes trees itself: git's entry order (a folder sorts as if its
    name ended in "/"), modes, nested folders made and emptied, names that are not UTF-8."""
    import subprocess

    import pygit2

    repo = tmp_path / "r"
    run_git("init", "-q", str(repo), cwd=tmp_path)
    names = ["a.txt", "a/x", "a-b", "a0", "ab", "z/deep/er/f", "run.sh", b"caf\xe9".decode("utf-8", "surrogateescape")]
    for n in names:
        p = repo / os.fsencode(n).decode("utf-8", "surrogateescape")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(n.encode("utf-8", "surrogateescape") + b"\n")
    (repo / "run.sh").chmod(0o755)
    run_git("add", "-A", cwd=repo)
    base = run_git("write-tree", cwd=repo).strip()
    picker = MemoryPicker(repo, batch_writes=True)
    blob = str(picker.repo.create_blob(b"new\n"))
    updates = {"a/y": (blob, 0o100644), "a.b": (blob, 0o100755), "z/deep/er/f": None, "a-b": None,
               "n/new/file": (blob, 0o100644), "ab": (blob, 0o100644)}
    base_tree = picker.repo.get(base)
    assert isinstance(base_tree, pygit2.Tree)
    tree = picker.write_overlay(base_tree, dict(updates))
    picker.flush()
    # git's answer: the same changes through its index
    for path, entry in updates.items():
        if entry is None:
            run_git("rm", "-q", "--cached", path, cwd=repo)
        else:
            subprocess.run(["git", "-C", str(repo), "update-index", "--add", "--cacheinfo",
                            f"{entry[1]:o},{entry[0]},{path}"], check=True)
    assert tree == run_git("write-tree", cwd=repo).strip()
    assert run_git("cat-file", "-t", tree, cwd=repo).strip() == "tree"  # on disk after the flush


def test_a_waiting_pick_conflicts_where_it_takes_held_lines_and_merges_nothing_else(fork: ForkBuilder) -> None:
    """A commit that edits lines a held-back (conflicting) commit wrote conflicts in that file: it
    waits, told by merging that file alone; where that file merges, the whole pick decides."""
    from forkflow.planning.lines import Dependency, DepKind

    held = fork.upstream_commit({"k.py": "def f():\n    return 2\n\n\ndef g():\n    return 2\n"}, "f 2 (#8)")
    waits = fork.upstream_commit({"k.py": "def f():\n    return 3\n\n\ndef g():\n    return 2\n",
                                  "doc.txt": "a\nb\nC\n"}, "f 3, doc (#9)")
    clean = fork.upstream_commit({"doc.txt": "A\nb\nC\n"}, "doc again (#10)")
    fork.fetch()
    p = MemoryPicker(fork.f.path)
    tree = p.commit_tree(_tip(fork))
    assert p.pick(tree, held).status is PickStatus.CONFLICT
    merged: list[str] = []
    made = p._merge_contents

    def counted(path: str, *rest: object) -> object:
        merged.append(path)
        return made(path, *rest)  # type: ignore[arg-type]
    p._merge_contents = counted  # type: ignore[method-assign,assignment]
    on_lines = Dependency(held, DepKind.LINES, "k.py:2")
    assert p.conflicts_where(tree, waits, [on_lines])
    assert merged == ["k.py"]  # doc.txt never merged
    assert not p.conflicts_where(tree, waits, [Dependency(held, DepKind.SYMBOL, "f (k.py)")])  # lines only
    assert not p.conflicts_where(tree, clean, [Dependency(waits, DepKind.FILE, "doc.txt")])  # merges: the pick says
    run = p.pick_sequence(tree, [held, waits, clean], depends={waits: (on_lines,)})
    assert [s.sha for s in run.conflicted] == [held]
    assert run.held == {waits: on_lines}
    assert run.applied == (clean,)


def test_pick_follows_a_rename_among_more_files_than_libgit2_looks_at(builder: ForkBuilder, tmp_path: Path) -> None:
    """A fork far behind lacks hundreds of upstream files; upstream moved a file the fork has to a
    new folder, then changed it.  `git cherry-pick` follows the move (git's rename limit is 7000);
    the in-memory pick must too, not stop at libgit2's lower default with a modify/delete conflict."""
    import pygit2

    body = "".join(f"int step_{i}(int x) {{ return x + {i}; }}\n" for i in range(40))
    builder.upstream_commit({"lib/Plugins/Plugin.cpp": body}, "Initial")
    builder.branch_fork()
    builder.fork_commit({"lib/Plugins/Plugin.cpp": body.replace("x + 30;", "x + 30; /* fork */")}, "[fork] ours")
    data = builder.upstream.path / "examples" / "data"
    data.mkdir(parents=True)
    for i in range(1500):  # written and staged at once (a `git add` each would take seconds)
        (data / f"d{i:04}.txt").write_text(f"datum {i} " * 8 + "\n", encoding="utf-8")
    run_git("add", "examples/data", cwd=builder.upstream.path)
    builder.upstream_commit({"lib/Plugins/Plugin.cpp": None, "examples/plugins/Plugin.cpp": body},
                            "Move the plugin example")
    change = builder.upstream_commit({"examples/plugins/Plugin.cpp": body.replace("x + 7;", "x + 70;")},
                                     "Fix step 7")
    builder.fetch()
    fork = builder.f.path
    onto = run_git("rev-parse", "main^{tree}", cwd=fork).strip()
    repo = pygit2.Repository(str(fork))
    commit, tree = repo.get(change), repo.get(onto)
    assert isinstance(commit, pygit2.Commit) and isinstance(tree, pygit2.Tree)
    parent = commit.parents[0]
    plain = repo.merge_trees(parent.tree, tree, commit.tree)
    assert plain.conflicts is not None  # libgit2's own limit: the move is not seen
    step = MemoryPicker(fork).pick(onto, change)
    assert step.status is PickStatus.APPLIED, step.conflicts
    assert step.tree == cherry_pick_tree(fork, "main", change, tmp_path)
    # a limit the fork sets is kept: libgit2 then misses the move, and git's own merge of the pick
    # (which matches files by name before it counts) is asked, giving cherry-pick's tree again
    run_git("config", "merge.renameLimit", "100", cwd=fork)
    picker = MemoryPicker(fork, batch_writes=True)
    assert merge_trees(repo, parent.tree, tree, commit.tree, limit=100).conflicts is not None
    step = picker.pick(onto, change)
    assert step.status is PickStatus.APPLIED and step.tree == cherry_pick_tree(fork, "main", change, tmp_path)
