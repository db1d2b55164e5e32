"""The one way forkflow runs a command that is not git: in a process group of its own.

`run` starts the command with the git location variables cleared (`no_git_env`: a hook's
GIT_DIR must not send the command's git calls to another repository), gives it `input` on stdin,
reads its stdout and stderr within `timeout` in all, and kills the whole group (children,
grandchildren) on a timeout, on an interrupt or SIGTERM, and after a normal exit for whatever it
left running in the background.  `kill_group` is the kill itself, for runners that start the
process in their own way (output to a log file, a guard shell).

A process can leave the group (`setsid sleep 1000 &`), so a run can also be *marked*: the command
gets `FORKFLOW_L1_RUN=<mark>` in its environment, which every process it starts inherits, and
`kill_marked` kills each process of this user whose environment holds that very entry (Linux
`/proc/<pid>/environ`; elsewhere it finds nothing and the group kill is all there is).  A command
that rewrites its own environment (`env -i setsid ...`) escapes both; L1 trees kill what still
runs inside them as well (`forkflow.landing.gate`).

`keep` bounds what is kept of stdout: its first and last `keep / 2` bytes, with one line in
between that says how much was cut, so a command that prints gigabytes costs a few MiB.
"""

from __future__ import annotations

import os
import secrets
import selectors
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from forkflow.git.run import no_git_env

KILL_GRACE_S = 3.0
ERR_KEEP = 65536  # stderr: its last 64 KiB
RUN_MARK = "FORKFLOW_L1_RUN"  # the variable that marks every process of one run
ENVIRON_MAX = 1 << 20  # what is read of a process's environment when looking for the mark


@dataclass(frozen=True, slots=True)
class Finished:
    """What a command did: `rc` is None when it was killed for its time or its output size."""

    rc: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    too_large: bool = False  # stdout went past `max_stdout`
    cut: int = 0  # bytes of stdout left out between its head and its tail (`keep`)

    @property
    def output(self) -> bytes:
        return self.stdout + self.stderr

    def text(self) -> tuple[str, str]:
        return self.stdout.decode("utf-8", "replace"), self.stderr.decode("utf-8", "replace")


def run(argv: Sequence[str], *, timeout: float, cwd: Path | str | None = None,
        env: Mapping[str, str] | None = None, input: bytes = b"",
        max_stdout: int | None = None, keep: int | None = None, mark: str | None = None) -> Finished:
    """Run `argv` as a process group of its own (see the module docstring).

    `env` is the whole environment (default: this process's), less the git location variables.
    `keep`: keep stdout's head and tail only; `mark`: mark every process of the run, and kill
    the marked ones that are left at the end, in the group or not.
    OSError when the command cannot start."""
    environ = no_git_env(None if env is None else dict(env))
    if mark is not None:
        environ[RUN_MARK] = mark
    proc = subprocess.Popen(list(argv), cwd=cwd, env=environ,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    restore = terminate_as_exit()

    def leftovers() -> None:  # what a marked run left once its shell exited: it would hold the pipes open
        kill_group(proc.pid, grace_s=0.0, reap=proc.poll, first=signal.SIGKILL)
        kill_marked(mark or "")

    try:
        return _exchange(proc, input, timeout, max_stdout, keep, leftovers if mark is not None else None)
    finally:
        kill_group(proc.pid, grace_s=0.0, reap=proc.poll, first=signal.SIGKILL)  # leftovers, or all of it on an interrupt
        if mark is not None:
            kill_marked(mark)
        if proc.poll() is None:
            proc.wait()
        restore()


def run_shell(command: str, *, timeout: float, cwd: Path | str | None = None,
              env: Mapping[str, str] | None = None, keep: int | None = None,
              mark: str | None = None) -> Finished:
    """`run` of `sh -c command`."""
    return run(["sh", "-c", command], timeout=timeout, cwd=cwd, env=env, keep=keep, mark=mark)


L1_KEEP = 4 << 20  # an L1 command's output kept: its first and its last 2 MiB


def run_in_group(command: str, cwd: Path, env: dict[str, str], timeout: float,
                 mark: str | None = None) -> tuple[int | None, bytes]:
    """`sh -c command` in `cwd`: (exit code or None on timeout, stdout then stderr), stdout cut
    to its head and tail (`L1_KEEP`), the run marked with `mark` (default: a fresh one)."""
    done = run_shell(command, timeout=timeout, cwd=cwd, env=env, keep=L1_KEEP, mark=mark or new_mark())
    return done.rc, done.output


def new_mark() -> str:
    """A mark for one run's processes, unique on this machine."""
    return f"{os.getpid()}-{secrets.token_hex(8)}"


def marked_pids(mark: str) -> Iterator[int]:
    """The processes of this user (this one aside) whose environment holds `RUN_MARK=mark`."""
    needle = f"{RUN_MARK}={mark}".encode()
    for pid, folder in own_processes():
        try:
            with open(os.path.join(folder, "environ"), "rb") as f:
                environ = f.read(ENVIRON_MAX)
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            yield pid


def own_processes() -> Iterator[tuple[int, str]]:
    """Each process of this user but this one: its pid and its /proc folder (none without /proc)."""
    uid, me = os.getuid(), os.getpid()
    try:
        entries = list(os.scandir("/proc"))
    except OSError:
        return  # no /proc: nothing to find (the group kill is all there is)
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
        except OSError:
            continue
        yield int(entry.name), entry.path


def kill_marked(mark: str, rounds: int = 20) -> int:
    """SIGKILL every process marked `mark` (see `marked_pids`), again while new ones appear (a
    process may fork between two scans); how many were killed."""
    killed = 0
    for _ in range(rounds):
        pids = list(marked_pids(mark))
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)
    return killed


class _HeadTail:
    """A stream's first `keep / 2` bytes and its last `keep / 2`, and how many fell between."""

    def __init__(self, keep: int | None) -> None:
        self.half = None if keep is None else max(keep // 2, 1)
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.cut = 0

    def add(self, chunk: bytes) -> None:
        if self.half is None or len(self.head) < self.half:
            room = len(chunk) if self.half is None else self.half - len(self.head)
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        assert self.half is not None
        self.tail.append(chunk)
        self.tail_size += len(chunk)
        while self.tail_size > self.half:
            over = self.tail_size - self.half
            first = self.tail[0]
            if len(first) <= over:
                self.tail.popleft()
                self.tail_size -= len(first)
                self.cut += len(first)
            else:
                self.tail[0] = first[over:]
                self.tail_size -= over
                self.cut += over

    @property
    def size(self) -> int:
        return len(self.head) + self.tail_size

    def value(self) -> bytes:
        note = f"\n[forkflow] {self.cut} bytes of output cut here\n".encode() if self.cut else b""
        return bytes(self.head) + note + b"".join(self.tail)


def _exchange(proc: subprocess.Popen[bytes], data: bytes, timeout: float,
              max_stdout: int | None, keep: int | None = None,
              on_exit: Callable[[], None] | None = None) -> Finished:
    """Write `data` to the command, read its stdout and stderr, wait for it: all within `timeout`.

    `on_exit` is called once the command itself has exited while its output is still open (what
    it left in the background holds it): it kills those, so the reading ends."""
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
    out, err = _HeadTail(keep), bytearray()
    pos = 0
    deadline = time.monotonic() + timeout
    try:
        while sel.get_map():
            if on_exit is not None and proc.poll() is not None:
                on_exit()
                on_exit = None
            left = deadline - time.monotonic()
            if left <= 0:
                return Finished(None, out.value(), bytes(err), timed_out=True, cut=out.cut)
            for key, _ in sel.select(min(left, 1.0 if on_exit is None else 0.1)):
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
                    out.add(chunk)
                    if max_stdout is not None and out.size > max_stdout:
                        return Finished(None, out.value(), bytes(err), too_large=True, cut=out.cut)
                else:
                    err = (err + chunk)[-ERR_KEEP:]
        try:
            rc = proc.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            return Finished(None, out.value(), bytes(err), timed_out=True, cut=out.cut)
        return Finished(rc, out.value(), bytes(err), cut=out.cut)
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
