"""Picks and resolutions made ahead by a child process while the landing runs (issue 11: speed).

The landing is one unit after another: pick, resolve, L1, land.  A thread picking the next units
while a unit's L1 ran shared the interpreter with the landing, and could only guess while L1 ran.
This child works on the other core the whole time: it picks the plan's commits in landing order
onto the tree each will come onto if every unit lands (`pick_sequence` with its waits and held
commits), asks the resolvers that read nothing but the case (`engine.PURE`: trivial, structural,
lag, layout) about each conflict as `Ingestor._resolve` would, goes on with what they settle, and
sends each pick with the objects it wrote and each answer.  The landing steers it with the tree
where the landing is at each L1 (and where it missed a pick), and tells it where it is at each
unit: the child stays LEAD commits ahead at most, goes on where the landing comes its way, and
starts again from where it is where not (a conflict only the fork's own past resolutions settle,
a unit that did not land).  A pick is a function of the tree and the commit, an answer one of the
case, so what the landing takes from the child is what it would have made itself (the child
learns first what shapes the landing's picks: `MemoryPicker.knowledge`); a pick the child has not
made the landing makes itself, and it waits only for a pick or an answer the child is at work on.

The child is a fork of the landing's process where the system has fork() and no other thread
runs (it has the modules and the picker's caches already, and ends by os._exit), else a fresh
interpreter importing only the picker and those resolvers; it reads the repository and writes
nothing to it (its objects stay in memory until the landing takes them).
Whatever goes wrong with it (it cannot start, it dies, it answers late), the landing picks and
resolves as it would without it.
"""
from __future__ import annotations

import atexit
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from forkflow.children import PICKS_CHILD, python_child
from forkflow.conflicts.bare import bare_case
from forkflow.conflicts.engine import CaseResolution, pure_resolvers, resolve_case
from forkflow.git.pick import MemoryPicker, PickStep
from forkflow.git.repo import Repo
from forkflow.models import Sha
from forkflow.planning.lines import Dependency

LEAD = 48  # commits the child picks beyond the landing's place: a guess is wasted work where the landing turns
WAIT_S = 30.0  # the longest wait for one answer the child is at work on (its resolvers take milliseconds)
WAIT_PICK_S = 2.0  # ... and for one pick it is making (a pick takes milliseconds)
MEMORY = 256 << 20  # bytes of picks the child keeps before it forgets them (and makes them again if asked)


class AheadPicks:
    """The landing's side: starts the child, steers it, and hands its picks to the landing's picker."""

    def __init__(self, picker: MemoryPicker, proc: subprocess.Popen[bytes] | _Forked) -> None:
        self.picker = picker
        self.proc = proc
        self._in: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._steered: tuple[str, int] | None = None
        self._told = -1
        self._resolving: set[tuple[str, str]] = set()  # (tree, commit) whose conflicts the child is resolving
        self._outcomes: dict[tuple[str, str], dict[str, CaseResolution]] = {}  # ... and what it made of them
        self._picking: tuple[str, str] | None = None  # (tree, commit) the child said it is picking now
        self._alive = True
        self._reader = threading.Thread(target=self._read, name="forkflow-ahead-reader", daemon=True)
        self._reader.start()
        picker._inbox = self._take
        atexit.register(self.close)

    @classmethod
    def start(cls, picker: MemoryPicker, path: Path | str, coming: Sequence[Sha],
              depends: Mapping[Sha, Sequence[Dependency]], tree: str, resolving: tuple[str, ...] = (),
              fork_point: Sha | None = None) -> AheadPicks | None:
        """A child picking `coming` (the plan's commits in landing order) in the repository at
        `path`, as `picker` would, and trying the resolvers named in `resolving` (each in
        `engine.PURE`) on the conflicts it meets, as `Ingestor._resolve` would (the cases' origin
        at `fork_point`); None where it cannot start."""
        forked = _fork(picker, path, coming, depends, resolving, fork_point)
        if forked is not None:
            return cls(picker, forked)
        proc = python_child(PICKS_CHILD, stdin=subprocess.PIPE)
        if proc is None or proc.stdin is None:
            return None
        try:
            _write(proc.stdin, (str(path), list(coming), dict(depends), picker.knowledge(tree), resolving, fork_point))
        except (OSError, ValueError, pickle.PicklingError):
            proc.kill()
            proc.wait()
            return None
        return cls(picker, proc)

    def steer(self, tree: str, at: int, held: Collection[Sha]) -> None:
        """The landing is at `coming[at]`, onto `tree`, with `held` held back."""
        if self._steered == (tree, at) or self.proc.stdin is None:
            return
        self._steered = (tree, at)
        self._send(("go", tree, at, frozenset(held)))

    def tell(self, at: int) -> None:
        """The landing has come to `coming[at]` (the child waits where it is LEAD commits ahead)."""
        if at <= self._told or self.proc.stdin is None:
            return
        self._told = at
        self._send(("at", at))

    def _send(self, msg: tuple[Any, ...]) -> None:
        assert self.proc.stdin is not None
        try:
            _write(self.proc.stdin, msg)
        except (OSError, ValueError):  # the child is gone: the landing picks by itself
            pass

    def _read(self) -> None:
        """The child's picks, as they come (on this thread: the landing takes them in `_take`)."""
        out = self.proc.stdout
        assert out is not None
        while True:
            try:
                msg = pickle.load(out)  # our own child's answer, not a stranger's
            except (EOFError, OSError, ValueError, pickle.UnpicklingError):
                self._in.put(("gone",))
                return
            self._in.put(msg)

    def _take(self, tree: str | None = None, sha: Sha | None = None) -> None:
        """Hand what came to the landing (on its thread): picks to its picker, the rest kept here.
        Given the pick the landing is about to make, wait for it while the child is making it: the
        child had come that far, and the landing making it too was the same work on both cores
        (2026-04-01: 240 of the landing's 250 own picks were made by the child too)."""
        while True:
            try:
                msg = self._in.get_nowait()
            except queue.Empty:
                break
            self._handle(msg)
        while tree is not None and self._alive and self._picking == (tree, sha):
            try:
                self._handle(self._in.get(timeout=WAIT_PICK_S))
            except queue.Empty:  # stuck: the landing picks by itself
                return

    def _handle(self, msg: tuple[Any, ...]) -> None:
        if msg[0] == "picking":  # (None, None): the pick it was making came to nothing kept
            self._picking = None if msg[1] is None else (msg[1], msg[2])
        elif msg[0] == "pick":
            if self._picking == (msg[1], msg[2]):
                self._picking = None
            self.picker.adopt(*msg[1:])
        elif msg[0] == "names":
            self.picker.know_names(msg[1])
        elif msg[0] == "resolving":
            self._resolving.add((msg[1], msg[2]))
        elif msg[0] == "resolved":
            self._resolving.discard((msg[1], msg[2]))
            self._outcomes[(msg[1], msg[2])] = msg[3]
        else:
            self._alive = False

    def outcomes(self, tree: str, sha: Sha) -> dict[str, CaseResolution]:
        """What the child's resolvers made of the conflicts of `sha` picked onto `tree`, by path: at
        once when it has answered, after it has when it is at work on them, else nothing."""
        key = (tree, sha)
        self._take()
        while key in self._resolving and key not in self._outcomes and self._alive:
            try:
                self._handle(self._in.get(timeout=WAIT_S))
            except queue.Empty:  # stuck: the landing resolves by itself
                break
        return self._outcomes.pop(key, {})

    def close(self) -> None:
        atexit.unregister(self.close)
        if self.picker._inbox == self._take:
            self.picker._inbox = None
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


class _Forked:
    """A child made by fork(), as much of `subprocess.Popen` as AheadPicks uses."""

    def __init__(self, pid: int, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.pid, self.stdin, self.stdout = pid, stdin, stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def wait(self) -> int:
        if self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _fork(picker: MemoryPicker, path: Path | str, coming: Sequence[Sha], depends: Mapping[Sha, Sequence[Dependency]],
          resolving: tuple[str, ...], fork_point: Sha | None) -> _Forked | None:
    """The child as a fork of this process where there is fork() and no other thread runs: it has
    the modules and the picker's caches already (a fresh interpreter took 0.35 s of CPU to import
    them, while the landing picked alone), and it never returns into this program (os._exit)."""
    if not hasattr(os, "fork") or threading.active_count() > 1 or not os.path.isdir(_OWN_FDS):
        return None
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for fd in (down_r, down_w, up_r, up_w):
            os.close(fd)
        return None
    if pid == 0:  # the child
        code = 0
        try:
            os.close(down_w)
            os.close(up_r)
            _let_go(keep={down_r, up_w})
            picker.on_kept = picker.on_picking = picker._inbox = None  # the landing's hooks are not the child's
            with os.fdopen(down_r, "rb") as stdin, os.fdopen(up_w, "wb") as stdout:
                _pick_ahead(stdin, stdout, picker, str(path), coming, depends, resolving, fork_point)
        except BaseException:  # noqa: BLE001 - whatever happens here ends this process only
            code = 1
        finally:
            os._exit(code)
    os.close(down_r)
    os.close(up_w)
    return _Forked(pid, os.fdopen(down_w, "wb"), os.fdopen(up_r, "rb"))


_OWN_FDS = "/proc/self/fd"  # where a process sees its descriptors (Linux): the fork needs it (_let_go)


def _let_go(keep: set[int]) -> None:
    """In the forked child: close what would make it hold what the landing holds (a flock on
    forkflow's lock files, a connection to the store's server).  A flock lasts while any copy of
    its descriptor is open, so a landing killed with SIGKILL would leave the ingest lock held until
    the child noticed; closed here, the OS frees it with the landing, as before the child was a
    fork.  Pipes, the repository's files (libgit2 reads its packs through them) and 0-2 stay."""
    for name in os.listdir(_OWN_FDS):
        fd = int(name)
        if fd < 3 or fd in keep:
            continue
        try:
            target = os.readlink(f"{_OWN_FDS}/{fd}")
        except OSError:  # the listing's own descriptor, closed by now
            continue
        if target.endswith(".lock") or target.startswith("socket:"):
            try:
                os.close(fd)
            except OSError:
                pass


def _child_main() -> None:
    """The child as a fresh interpreter: picks along the landing's way until its standard input closes."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    path, coming, depends, knowledge, resolving, fork_point = pickle.load(stdin)
    picker = MemoryPicker(path, batch_writes=True)
    picker.learn(knowledge)
    _pick_ahead(stdin, stdout, picker, path, coming, depends, resolving, fork_point)


def _pick_ahead(stdin: IO[bytes], stdout: IO[bytes], picker: MemoryPicker, path: str, coming: Sequence[Sha],
                depends: Mapping[Sha, Sequence[Dependency]], resolving: tuple[str, ...],
                fork_point: Sha | None) -> None:
    """The child's work: picks along the landing's way until `stdin` closes."""
    repo = Repo(Path(path))
    resolvers = pure_resolvers(resolving)
    memory = picker._memory
    assert memory is not None
    memory.log = []
    lock = threading.Condition()
    way: dict[tuple[str, int], None] = {}  # (tree, i) the current sequence came through
    landing = [0]  # where the landing is in `coming`
    latest: list[tuple[str, int, frozenset[Sha]] | None] = [None]
    moved = threading.Event()  # a steer off the current way: stop the sequence
    wake = threading.Event()

    picker.names_read = []

    def send(tree: str, sha: Sha, step: PickStep, by_path: Any) -> None:
        objects = [(oid.raw, *memory.objects[oid]) for oid in memory.log or () if oid in memory.objects]
        memory.log = []
        if picker.names_read:  # the names it looked for in blobs (the waits of the commits so far)
            _write(stdout, ("names", picker.names_read))
            picker.names_read = []
        _write(stdout, ("pick", tree, sha, step, by_path, objects))

    def resolve(step: PickStep, tree: str) -> dict[str, bytes | None] | None:
        """`Ingestor._resolve` by the resolvers named in `resolving` alone (the landing asks the rest)."""
        _write(stdout, ("resolving", tree, step.sha))
        outcomes: dict[str, CaseResolution] = {}
        try:
            for conflict in step.conflicts:
                case = bare_case(repo, picker, step.sha, conflict, fork_point)
                outcomes[conflict.path] = resolve_case(case, resolvers)
        except Exception:  # noqa: BLE001 - a blob missing, say: the landing asks these itself
            pass
        _write(stdout, ("resolved", tree, step.sha, outcomes))
        if len(outcomes) < len(step.conflicts) or not all(o.resolved for o in outcomes.values()):
            return None
        return {path: o.content for path, o in outcomes.items()}

    picker.on_kept = send
    picker.on_picking = lambda tree, sha: _write(stdout, ("picking", tree, sha))

    def listen() -> None:
        while True:
            try:
                msg = pickle.load(stdin)
            except (EOFError, OSError, ValueError, pickle.UnpicklingError):
                msg = None
            with lock:
                if msg is not None:
                    landing[0] = max(landing[0], msg[-1] if msg[0] == "at" else msg[2])
                    lock.notify_all()
                if msg is not None and (msg[0] == "at" or (msg[1], msg[2]) in way):
                    continue  # where this child's way goes already
                latest[0] = None if msg is None else (msg[1], msg[2], msg[3])
                moved.set()
                wake.set()
                lock.notify_all()
            if msg is None:
                return

    threading.Thread(target=listen, daemon=True).start()
    while True:
        wake.wait()
        with lock:
            go = latest[0]
            wake.clear()
            moved.clear()
            if go is None:
                return
            way.clear()
        tree, at, held = go
        if memory.size > MEMORY:
            picker.forget_writes()

        def visit(i: int, t: str, at: int = at) -> None:
            way[(t, at + i)] = None
            with lock:  # no further than LEAD ahead of the landing, until it moves or turns
                while at + i > landing[0] + LEAD and not moved.is_set():
                    lock.wait(0.5)
        try:
            picker.pick_sequence(tree, coming[at:], resolve=resolve if resolvers else None, depends=depends,
                                 held_before=held, ahead=moved, visit=visit)
        except BrokenPipeError:
            return
        except Exception:  # noqa: BLE001 - a guess: the landing's own pick says what is wrong
            pass


def _write(out: IO[bytes], msg: tuple[Any, ...]) -> None:
    pickle.dump(msg, out, protocol=pickle.HIGHEST_PROTOCOL)
    out.flush()

