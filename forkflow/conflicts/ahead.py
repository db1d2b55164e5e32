"""The learning child: started as early as the program can know it will be wanted.  [stdlib only]

`forkflow ingest` on a real fork spends its first second importing its command line, on one core
while the other idles; the fork's past resolutions take a child process about two seconds of CPU
to learn (`forkflow.conflicts.learn`), and started after the imports the child competed with the
plan's `git diff-tree` for that core.  The program's entry (`forkflow.cli.entry`) starts the child
before the imports, through this module, which imports nothing of forkflow's; `learn_ahead` then
takes that child instead of starting one.
"""
from __future__ import annotations

import atexit
import os
import subprocess
import sys
from pathlib import Path

LEARN_AHEAD_MIN = 200  # upstream commits behind from which the fork's past resolutions are learnt in a child

_CHILD = "import sys; from forkflow.conflicts.learn import _child_main; _child_main(sys.argv[1])"
_early: list[tuple[str, subprocess.Popen[bytes]]] = []  # (real path of a repository, its child) started early


def spawn_learner(path: str) -> subprocess.Popen[bytes] | None:
    """A fresh interpreter learning the fork's past resolutions of the repository at `path`, its
    History pickled on its standard output; None where it cannot start."""
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [package_root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]))
    try:
        return subprocess.Popen([sys.executable, "-c", _CHILD, path], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    except OSError:
        return None


def start_early(path: str) -> bool:
    """Start the child for the repository whose top level is `path` (one a process); it is killed
    at exit unless `take_early` took it by then."""
    if _early:
        return False
    proc = spawn_learner(path)
    if proc is None:
        return False
    _early.append((os.path.realpath(path), proc))
    atexit.register(_stop_early)
    return True


def early_started(path: Path | str) -> bool:
    """A child was started early for this repository (and not taken yet)."""
    return bool(_early) and _early[0][0] == os.path.realpath(path)


def take_early(path: Path | str) -> subprocess.Popen[bytes] | None:
    """The child started early for this repository, now the caller's to wait for or stop."""
    if not early_started(path):
        return None
    atexit.unregister(_stop_early)
    return _early.pop()[1]


def _stop_early() -> None:
    for _, proc in _early:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
