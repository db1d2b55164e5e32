"""forkflow.process: one process group per command, killed whole; git location variables cleared."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from forkflow.process import run, run_in_group, run_shell


def _alive(pid: int) -> bool:
    """The process exists and is neither a zombie nor dead (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_output_exit_code_and_input(tmp_path: Path) -> None:
    done = run(["sh", "-c", "cat; echo err >&2; exit 4"], timeout=30, cwd=tmp_path, input=b"hello")
    assert (done.rc, done.stdout, done.stderr, done.timed_out) == (4, b"hello", b"err\n", False)


def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    start = time.monotonic()
    rc, _ = run_in_group(f"sleep 300 & echo $! > {pidfile}; sh -c 'sleep 301' & echo $! >> {pidfile}; wait",
                         tmp_path, dict(os.environ), timeout=1.0)
    assert rc is None and time.monotonic() - start < 6
    pids = [int(p) for p in pidfile.read_text().split()]
    assert pids and not any(_alive(p) for p in pids)


def test_background_leftovers_are_killed_after_exit(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    done = run_shell(f"sleep 300 >/dev/null 2>&1 & echo $! > {pidfile}; exit 0", timeout=30, cwd=tmp_path)
    assert done.rc == 0
    assert not _alive(int(pidfile.read_text()))


def test_git_location_variables_are_cleared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere.git"))
    done = run_shell('printf "%s|%s" "${GIT_DIR-unset}" "$KEEP"', timeout=30,
                     env={**os.environ, "GIT_WORK_TREE": "/x", "KEEP": "kept"})
    assert done.stdout == b"unset|kept"


def test_stdout_past_the_limit_stops_the_command() -> None:
    done = run(["sh", "-c", "yes"], timeout=30, max_stdout=100_000)
    assert done.too_large and done.rc is None and len(done.stdout) > 100_000
