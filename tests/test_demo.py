"""`forkflow demo`: the README's main-job command, run as a user runs it."""
from __future__ import annotations

import time
from pathlib import Path

from forkflow.git.run import run_git
from tests.conftest import run_forkflow


def test_demo_runs_the_main_job_and_keeps_the_result(tmp_path: Path) -> None:
    keep = tmp_path / "demo"
    start = time.monotonic()
    r = run_forkflow("demo", "--keep", str(keep), cwd=tmp_path, env={"COLUMNS": "160"})
    took = time.monotonic() - start
    assert r.rc == 0, r.err
    assert took < 60
    for step in ("forkflow init", "forkflow status", "forkflow plan", "forkflow ingest --land",
                 "forkflow conflicts", "what happened"):
        assert step in r.out
    assert "landed" in r.out and "failed" in r.out and "conflict" in r.out
    fork = keep / "sample" / "fork"
    point = run_git("merge-base", "main", "upstream/main", cwd=fork).strip()
    theirs = run_git("rev-list", "--count", f"{point}..upstream/main", cwd=fork).strip()
    ours = run_git("rev-list", "--count", "--invert-grep", "--grep=^Upstream-Commit: ", "main", "^upstream/main",
                   cwd=fork).strip()  # the fork's own patches, not what ingest landed
    assert f"the fork carries {ours} patches of its own; upstream has {theirs} new commits since" in r.out
    assert "added an [ingest] section" in r.out  # not swallowed as Rich markup
    log = run_git("log", "--format=%s", "main", cwd=fork)
    assert log.startswith("[build] bump LLVM to 5e6f7a8b (#108)")
    # #104 waits for #103, which conflicts: the bundle after #103 lands without it
    assert "Cherry-pick 2 upstream (#101 #102)" in log and "Cherry-pick 3 upstream (#110 #111 #112)" in log
    assert run_git("rev-parse", "refs/forkflow/ingestion-point/main", cwd=fork).strip()
    again = run_forkflow("demo", "--keep", str(keep), cwd=tmp_path)
    assert again.rc == 1 and "not empty" in again.err
    refs = run_git("for-each-ref", cwd=fork)
    look = run_forkflow("demo", "--repo", str(fork), cwd=tmp_path)
    assert look.rc == 0, look.err
    assert "forkflow ingest --dry-run" in look.out
    assert run_git("for-each-ref", cwd=fork) == refs  # a look at an existing fork writes nothing to git


def test_demo_without_keep_cleans_up(tmp_path: Path) -> None:
    r = run_forkflow("demo", cwd=tmp_path, env={"TMPDIR": str(tmp_path)})
    assert r.rc == 0, r.err
    assert "forkflow demo --keep DIR" in r.out
    assert not list(tmp_path.glob("forkflow-demo-*"))


def test_demo_keep_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    taken = tmp_path / "notes.txt"
    taken.write_text("mine\n")
    for args in (("--keep", str(taken)), ("--serve", "--keep", str(taken))):
        r = run_forkflow("demo", *args, cwd=tmp_path)
        assert r.rc == 1 and len(r.err.strip().splitlines()) == 1, r.err
        assert "is a file, not a folder; pass a new folder to --keep" in r.err
    assert taken.read_text() == "mine\n"
