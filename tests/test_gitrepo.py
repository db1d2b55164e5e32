"""The repository builder itself: deterministic SHAs, every evidence style."""
from __future__ import annotations

from pathlib import Path

from forkflow.models import Sha
from forkflow.testing.gitrepo import EVIDENCE_STYLES, ForkBuilder


def _build(root: Path) -> list[Sha]:
    b = ForkBuilder(root)
    shas = [b.upstream_commit({"a.py": "A = 1\n"}, "Initial (#1)")]
    b.branch_fork()
    shas.append(b.fork_commit({"f.py": "F = 1\n"}, "[fork] ours"))
    for i, style in enumerate(EVIDENCE_STYLES):
        u = b.upstream_commit({f"m{i}.py": f"M = {i}\n"}, f"Change {i} (#{10 + i})")
        extra = {f"m{i}.py": f"M = {i}  # tweak\n"} if style == "title-pr" else None
        shas += [u, b.pick(u, evidence=style, extra=extra)]
    u1 = b.upstream_commit({"x.py": "X\n"}, "X (#50)")
    u2 = b.upstream_commit({"y.py": "Y\n"}, "Y (#51)")
    shas += [u1, u2, b.bundle([u1, u2]), b.revert_upstream(u1)]
    shas.append(b.revert_in_fork(shas[-2]))
    return shas


def test_builder_shas_are_deterministic(tmp_path: Path) -> None:
    first = _build(tmp_path / "one")
    second = _build(tmp_path / "two")
    assert first == second
    assert len(set(first)) == len(first)


def test_builder_messages_carry_each_evidence(tmp_path: Path) -> None:
    b = ForkBuilder(tmp_path / "r")
    b.upstream_commit({"a": "1\n"}, "Initial")
    b.branch_fork()
    u = b.upstream_commit({"b": "2\n"}, "B (#2)")
    expected = {"trailer": f"Upstream-Commit: {u}", "cherry": f"(cherry picked from commit {u})",
                "reactor": f"Reactor Cherry-pick Revision: {u}",
                "backport": f"Reactor Backport Revision: {u}", "original": f"Original Commit: {u}",
                "upstream": f"Upstream commit: {u}", "quoted": f"> (cherry picked from commit {u})"}
    for style, needle in expected.items():
        f = b.pick(u, evidence=style)
        assert needle in b.f.show(f, "%B"), style


def test_repo_worktrees_name_each_path_and_its_branch(tmp_path: Path) -> None:
    import shutil

    from forkflow.git.repo import Repo

    b = ForkBuilder(tmp_path / "r")
    b.upstream_commit({"a": "1\n"}, "Initial")
    b.branch_fork()
    repo = Repo(b.f.path)
    detached, side = tmp_path.resolve() / "detached", tmp_path.resolve() / "side"
    repo.add_worktree(detached, "HEAD")
    b.f.git("worktree", "add", "-q", "-b", "side", str(side))
    assert repo.worktrees() == [(b.f.path.resolve(), "refs/heads/main"), (detached, None), (side, "refs/heads/side")]
    assert (detached / "a").read_text() == "1\n"
    repo.remove_worktree(detached)
    repo.remove_worktree(detached)  # gone already: no error
    shutil.rmtree(side)
    assert [p for p, _ in repo.worktrees()] == [b.f.path.resolve(), side]  # git still lists it ...
    repo.prune_worktrees()
    assert repo.worktrees() == [(b.f.path.resolve(), "refs/heads/main")]  # ... until pruned
