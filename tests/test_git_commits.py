"""Commits and trees read and written in-process (forkflow/git/commits.py), on real repositories."""
from __future__ import annotations

from pathlib import Path

import pytest

from forkflow.git.commits import (changed_paths, committed_file, copy_commit, file_at, merge_fork_side,
                                  parents_of, same_entries)
from forkflow.git.pick import MemoryPicker
from forkflow.git.run import run_git
from forkflow.models import Sha


def _repo(tmp_path: Path) -> tuple[Path, dict[str, Sha]]:
    repo = tmp_path / "r"
    run_git("init", "-q", "-b", "main", str(repo), cwd=tmp_path)

    def commit(files: dict[str, str | None], message: str, parent: str) -> Sha:
        run_git("checkout", "-q", "--detach", parent, cwd=repo) if parent else None
        for name, text in files.items():
            if text is None:
                (repo / name).unlink()
            else:
                (repo / name).write_text(text)
        run_git("add", "-A", cwd=repo)
        run_git("commit", "-q", "--allow-empty", "-m", message, cwd=repo)
        return Sha(run_git("rev-parse", "HEAD", cwd=repo).strip())

    c: dict[str, Sha] = {}
    c["base"] = commit({"k.py": "x = 1\n", "f.py": "a = 1\n"}, "Base", "")
    c["tip"] = commit({"k.py": "x = 2\n", "f.py": "a = 2\n"}, "Tip", c["base"])
    c["clash"] = commit({"k.py": "x = 3\n"}, "Fork's x", c["base"])
    c["gone"] = commit({"f.py": None}, "Fork drops f", c["base"])
    c["apart"] = commit({"n.py": "n = 1\n"}, "Fork adds n", c["base"])
    return repo, c


def test_parents_and_files_of_commits(tmp_path: Path) -> None:
    repo, c = _repo(tmp_path)
    p = MemoryPicker(repo)
    assert parents_of(p, c["tip"]) == (c["base"],) and parents_of(p, c["base"]) == ()
    assert parents_of(p, "0" * 40) is None
    with pytest.raises(KeyError):
        parents_of(p, "0" * 40, strict=True)
    assert committed_file(p, c["clash"], "k.py") == b"x = 3\n"
    assert committed_file(p, c["gone"], "f.py") is None
    assert file_at(p, c["tip"], "f.py") == b"a = 2\n"
    assert file_at(p, c["gone"], "f.py") is None and file_at(p, "0" * 40, "f.py") is None


def test_changed_paths_and_same_entries(tmp_path: Path) -> None:
    repo, c = _repo(tmp_path)
    p = MemoryPicker(repo)
    base, tip, clash = (p.commit_tree(c[k]) for k in ("base", "tip", "clash"))
    assert changed_paths(p, base, tip) == {"k.py", "f.py"}
    assert same_entries(p, base, clash, ["f.py", "absent.py"])
    assert not same_entries(p, base, clash, ["k.py"])


def test_merge_fork_side_lets_the_fork_win(tmp_path: Path) -> None:
    repo, c = _repo(tmp_path)
    p = MemoryPicker(repo)
    tree, forced = merge_fork_side(p, c["tip"], c["apart"])
    assert not forced
    assert {run_git("show", f"{tree}:{f}", cwd=repo) for f in ("k.py", "n.py")} == {"x = 2\n", "n = 1\n"}
    tree, forced = merge_fork_side(p, c["tip"], c["clash"])
    assert forced and run_git("show", f"{tree}:k.py", cwd=repo) == "x = 3\n"
    tree, forced = merge_fork_side(p, c["tip"], c["gone"])  # modified on one side, deleted on the fork's
    assert forced and "f.py" not in run_git("ls-tree", "--name-only", tree, cwd=repo).split()


def test_copy_commit_keeps_author_and_message(tmp_path: Path) -> None:
    repo, c = _repo(tmp_path)
    p = MemoryPicker(repo)
    new = copy_commit(p, c["clash"], p.commit_tree(c["clash"]), [c["tip"]])
    assert parents_of(p, new) == (c["tip"],)
    fmt = "%an <%ae> %ad%n%B"
    assert run_git("show", "-s", f"--format={fmt}", new, cwd=repo) == \
        run_git("show", "-s", f"--format={fmt}", c["clash"], cwd=repo)
