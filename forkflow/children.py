"""Child interpreters that work on the other core, and those started before the imports.  [stdlib only]

A writing `forkflow ingest` on a fork far behind its upstream hands one job to a child process:
learning the fork's past resolutions (`forkflow.conflicts.learn`).  The child is a fresh interpreter
that imports only what its job needs.
The program's entry (`forkflow.cli.entry`) starts them before the command line's imports, which
take about a second on one core while the other idles; the command takes them when it needs them
(`take_early`), and the ones it never takes are killed at exit.  This module imports nothing of
forkflow's, so that the entry can start them first.
"""
from __future__ import annotations

import atexit
import os
import subprocess
import sys
from pathlib import Path

AHEAD_MIN = 200  # upstream commits behind from which the learning child does its job
LEARN_CHILD = "import sys; from forkflow.conflicts.learn import _child_main; _child_main(sys.argv[1])"

_early: dict[str, tuple[str, subprocess.Popen[bytes]]] = {}  # job -> (real path of the repository, child)


def python_child(code: str, *args: str, stdin: int = subprocess.DEVNULL) -> subprocess.Popen[bytes] | None:
    """A fresh interpreter running `code` with this forkflow importable, its standard output a pipe
    and its errors dropped; None where it cannot start."""
    package_root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [package_root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]))
    try:
        return subprocess.Popen([sys.executable, "-c", code, *args], stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env)
    except OSError:
        return None


def start_early(job: str, path: str, code: str, *args: str, stdin: int = subprocess.DEVNULL) -> bool:
    """Start `job`'s child for the repository whose top level is `path` (one a job)."""
    if job in _early:
        return False
    proc = python_child(code, *args, stdin=stdin)
    if proc is None:
        return False
    if not _early:
        atexit.register(_stop_early)
    _early[job] = (os.path.realpath(path), proc)
    return True


def early_started(job: str, path: Path | str) -> bool:
    """`job`'s child was started early for this repository, and not taken yet."""
    return job in _early and _early[job][0] == os.path.realpath(path)


def take_early(job: str, path: Path | str) -> subprocess.Popen[bytes] | None:
    """`job`'s child started early for this repository, now the caller's to wait for or stop."""
    return _early.pop(job)[1] if early_started(job, path) else None


def _stop_early() -> None:
    for _, proc in _early.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _early.clear()
