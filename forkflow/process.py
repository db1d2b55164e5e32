"""The one way forkflow runs a command that is not git: in a process group of its own.

`run` starts the command with the git location variables cleared (`no_git_env`: a hook's
GIT_DIR must not send the command's git calls to another repository), gives it `input` on stdin,
reads its stdout and stderr within `timeout` in all, and kills the whole group (children,
grandchildren) on a timeout, on an interrupt or SIGTERM, and after a normal exit for whatever it
left running in the background.  `kill_group` is the kill itself, for runners that start the
process in their own way (output to a log file, a guard shell).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from forkflow.git.run import no_git_env

KILL_GRACE_S = 3.0
ERR_KEEP = 65536  # stderr: its last 64 KiB


@dataclass(frozen=True, slots=True)
class Finished:
    """What a command did: `rc` is None when it was killed for its time or its output size."""

    rc: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    too_large: bool = False  # stdout went past `max_stdout`

    @property
    def output(self) -> bytes:
        return self.stdout + self.stderr

    def text(self) -> tuple[str, str]:
        return self.stdout.decode("utf-8", "replace"), self.stderr.decode("utf-8", "replace")


def run(argv: Sequence[str], *, timeout: float, cwd: Path | str | None = None,
        env: Mapping[str, str] | None = None, input: bytes = b"",
        max_stdout: int | None = None) -> Finished:
    """Run `argv` as a process group of its own (see the module docstring).

    `env` is the whole environment (default: this process's), less the git location variables.
    OSError when the command cannot start."""
    proc = subprocess.Popen(list(argv), cwd=cwd, env=no_git_env(None if env is None else dict(env)),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    restore = terminate_as_exit()
    try:
        return _exchange(proc, input, timeout, max_stdout)
    finally:
        kill_group(proc.pid, grace_s=0.0, reap=proc.poll, first=signal.SIGKILL)  # leftovers, or all of it on an interrupt
        if proc.poll() is None:
            proc.wait()
        restore()


def run_shell(command: str, *, timeout: float, cwd: Path | str | None = None,
              env: Mapping[str, str] | None = None) -> Finished:
    """`run` of `sh -c command`."""
    return run(["sh", "-c", command], timeout=timeout, cwd=cwd, env=env)


def run_in_group(command: str, cwd: Path, env: dict[str, str], timeout: float) -> tuple[int | None, bytes]:
    """`sh -c command` in `cwd`: (exit code or None on timeout, stdout then stderr)."""
    done = run_shell(command, timeout=timeout, cwd=cwd, env=env)
    return done.rc, done.output


def _exchange(proc: subprocess.Popen[bytes], data: bytes, timeout: float,
              max_stdout: int | None) -> Finished:
    """Write `data` to the command, read its stdout and stderr, wait for it: all within `timeout`."""
    assert proc.stdin and proc.stdout and proc.stderr
    sel = selectors.DefaultSelector()
    for f in (proc.stdin, proc.stdout, proc.stderr):
        os.set_blocking(f.fileno(), False)
    if data:
        sel.register(proc.stdin, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    sel.register(proc.stdout, selectors.EVENT_READ)
    sel.register(proc.stderr, selectors.EVENT_READ)
    out, err = bytearray(), bytearray()
    pos = 0
    deadline = time.monotonic() + timeout
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return Finished(None, bytes(out), bytes(err), timed_out=True)
            for key, _ in sel.select(min(left, 1.0)):
                if key.fileobj is proc.stdin:
                    try:
                        pos += os.write(proc.stdin.fileno(), data[pos:pos + 65536])
                    except BrokenPipeError:
                        pos = len(data)
                    if pos >= len(data):
                        sel.unregister(proc.stdin)
                        proc.stdin.close()
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                elif key.fileobj is proc.stdout:
                    out += chunk
                    if max_stdout is not None and len(out) > max_stdout:
                        return Finished(None, bytes(out), bytes(err), too_large=True)
                else:
                    err = (err + chunk)[-ERR_KEEP:]
        try:
            rc = proc.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            return Finished(None, bytes(out), bytes(err), timed_out=True)
        return Finished(rc, bytes(out), bytes(err))
    finally:
        sel.close()


def terminate_as_exit() -> Callable[[], None]:
    """Make SIGTERM unwind (finally blocks run: the group is killed, work trees removed)
    instead of ending the process on the spot; returns how to put the old handler back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGTERM)

    def exit_on_term(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    signal.signal(signal.SIGTERM, exit_on_term)
    return restore


def group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process is left in the group; orphaned zombies may never be
    reaped in a container whose PID 1 does not reap, so they must not count."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for pid in entries:
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(stat) > 2 and int(stat[2]) == pgid and stat[0] not in (b"Z", b"X"):
            return True
    return False


def kill_group(pgid: int, grace_s: float = KILL_GRACE_S,
               reap: Callable[[], object] | None = None, first: int = signal.SIGTERM) -> None:
    """Signal the whole process group with `first`, then SIGKILL whatever is left after `grace_s`.

    `reap` (the leader's `Popen.poll`) collects the leader so its zombie does not keep the
    group looking alive.
    """
    steps = ((first, grace_s), (signal.SIGKILL, 1.0)) if first != signal.SIGKILL else ((first, 1.0),)
    for sig, wait in steps:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait
        pause = 0.001
        while time.monotonic() < deadline:
            if reap is not None:
                reap()
            if not group_alive(pgid):
                return
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
