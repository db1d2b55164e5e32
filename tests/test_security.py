"""Attacks on forkflow (docs/security.md), each re-run as a test that failed before its fix.

`benchmarks/attack_suite.py` runs this file (`-m security`) and counts the attacks that hold.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from forkflow.git.repo import Repo
from forkflow.testing.gitrepo import ForkBuilder

pytestmark = pytest.mark.security


@pytest.fixture
def fork(builder: ForkBuilder) -> Path:
    builder.upstream_commit({"a.py": "A = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"mine.py": "M = 1\n"}, "[fork] ours")
    builder.upstream_commit({"u.py": "U = 1\n"}, "Upstream (#10)")
    return builder.f.path


# -- git: environment and argument injection (issue 13, items 11 and 12) --------------------------

def test_git_ignores_a_hooks_git_dir(fork: Path, builder: ForkBuilder, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook exports GIT_DIR/GIT_INDEX_FILE; forkflow must still read the repository it opened."""
    want = builder.f.head()
    monkeypatch.setenv("GIT_DIR", str(builder.upstream.path / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(builder.upstream.path))
    monkeypatch.setenv("GIT_INDEX_FILE", str(builder.upstream.path / ".git" / "index"))
    assert Repo.open(fork).resolve("HEAD") == want


def test_init_refuses_an_upstream_that_is_a_git_option(fork: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    mark = tmp_path / "pwned"
    Repo.open(fork).git("remote", "rename", "upstream", "origin")
    # the `@` makes it look like a URL (user@host:path), so it reaches `git ls-remote`
    r = cli("init", "--upstream", f"--upload-pack=touch {mark};git-upload-pack #@x", repo=fork)
    assert r.rc == 1 and "starts with '-'" in r.err, r.err
    assert not mark.exists()


def test_fetch_refuses_a_configured_remote_that_is_a_git_option(fork: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    mark = tmp_path / "pwned"
    cfg = fork / "forkflow.toml"
    cfg.write_text(cfg.read_text().replace('remote = "upstream"',
                                           f'remote = "--upload-pack=touch {mark};git-upload-pack"'))
    r = cli("status", "--fetch", repo=fork)
    assert r.rc == 1 and "starts with '-'" in r.err, r.err
    assert not mark.exists()


def test_settle_advice_ends_options_before_a_path() -> None:
    from forkflow.conflicts.records import ConflictInfo
    from forkflow.conflicts.settle import by_hand

    fields = {f: "" for f in ConflictInfo.__dataclass_fields__}
    x = ConflictInfo(**{**fields, "path": "-A", "kind": "delete/modify", "upstream_sha": "a" * 40})  # type: ignore[arg-type]
    text = by_hand(x, "main")
    assert "git add -- -A" in text and "git rm -- -A" in text
