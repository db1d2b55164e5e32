"""Refs read and moved in-process (libgit2) keep git's compare-and-swap, locks, reflog and hooks."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.models import Sha


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "r"
    subprocess.run(["git", "init", "-q", "-b", "main", str(r)], check=True)
    for m in ("one", "two"):
        _git(r, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", m)
    return r


def test_compare_and_swap_moves_only_from_the_expected_value(repo: Path) -> None:
    r = Repo(repo)
    assert r.lib_refs() is not None  # the in-process path is the one under test
    two, one = Sha(_git(repo, "rev-parse", "main")), Sha(_git(repo, "rev-parse", "main~1"))
    assert r.update_ref("refs/heads/main", one, two, message="forkflow: land u1") is True
    assert _git(repo, "rev-parse", "main") == one
    assert r.update_ref("refs/heads/main", two, two) is False  # it is at `one` now: lost
    assert _git(repo, "rev-parse", "main") == one
    assert "forkflow: land u1" in _git(repo, "reflog", "-1", "main")
    assert r.update_ref("refs/forkflow/x", two, None) is True  # None: must not exist yet
    assert r.update_ref("refs/forkflow/x", one, None) is False
    assert r.update_ref("refs/forkflow/gone", one, two) is False  # expected a ref that is not there
    assert r.read_ref("refs/forkflow/x") == two and r.read_ref("refs/forkflow/gone") is None
    assert r.read_ref("main") == one  # a short name goes through git


def test_a_writer_between_read_and_swap_wins(repo: Path) -> None:
    r = Repo(repo)
    two, one = Sha(_git(repo, "rev-parse", "main")), Sha(_git(repo, "rev-parse", "main~1"))
    refs = r.lib_refs()
    assert refs is not None
    held = refs.lib.references["refs/heads/main"]  # read: at `two`
    _git(repo, "update-ref", "refs/heads/main", one)  # someone else moves it
    with pytest.raises(Exception, match="does not match"):
        held.set_target(one, "late")  # what `update` relies on: libgit2 checks the value it read
    assert r.update_ref("refs/heads/main", two, two) is False


def test_a_lock_file_in_the_way_says_which_and_what_to_do(repo: Path) -> None:
    r = Repo(repo)
    two, one = Sha(_git(repo, "rev-parse", "main")), Sha(_git(repo, "rev-parse", "main~1"))
    (repo / ".git/refs/heads/main.lock").write_text("")
    with pytest.raises(UserError, match=r"refs/heads/main is locked .*delete .*main\.lock"):
        r.update_ref("refs/heads/main", one, two)
    assert _git(repo, "rev-parse", "main") == two


def test_a_reference_transaction_hook_still_runs(repo: Path) -> None:
    hook = repo / ".git/hooks/reference-transaction"
    hook.write_text(f"#!/bin/sh\necho \"$1\" >> {repo / 'hook.log'}\n")
    hook.chmod(0o755)
    r = Repo(repo)
    assert r.lib_refs() is None  # git moves the refs, so its hook runs
    two, one = Sha(_git(repo, "rev-parse", "main")), Sha(_git(repo, "rev-parse", "main~1"))
    assert r.update_ref("refs/heads/main", one, two) is True
    assert "committed" in (repo / "hook.log").read_text()


def test_packed_refs_and_a_linked_work_tree(repo: Path, tmp_path: Path) -> None:
    two, one = Sha(_git(repo, "rev-parse", "main")), Sha(_git(repo, "rev-parse", "main~1"))
    _git(repo, "update-ref", "refs/forkflow/p", two)
    _git(repo, "pack-refs", "--all")
    assert not (repo / ".git/refs/forkflow/p").exists()
    linked = tmp_path / "linked"
    _git(repo, "worktree", "add", "-q", "--detach", str(linked), "main")
    r = Repo(linked)  # a linked work tree moves the shared refs
    assert r.read_ref("refs/forkflow/p") == two
    assert r.update_ref("refs/forkflow/p", one, one) is False
    assert r.update_ref("refs/forkflow/p", one, two) is True
    assert _git(repo, "rev-parse", "refs/forkflow/p") == one
    assert r.update_ref("refs/heads/main", one, two) is True  # packed too
    assert _git(repo, "rev-parse", "main") == one
