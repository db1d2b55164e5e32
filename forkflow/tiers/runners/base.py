"""The `Runner` protocol, its registry, and running one job's command as a process group.

A runner executes `Job`s (one shell command each, in a work tree, with a timeout and the
resources it needs) and returns one `JobResult` per job.  It never judges tests: `FINISHED`
means the command ran to its end (whatever its exit code); `TIMEOUT` means it was killed, with
its whole process group, after `timeout_s`; `INFRA` means the runner itself failed (the command
could not start, a node or the Ray head went away) and the job's result says nothing about the
code.  Output goes straight to `log_path`, never through memory.

Implementations are registered by name in `RUNNERS` ("local", "ray"); `make_runner(name, ...)`
builds one.  Only `runners/ray.py` imports Ray, and only when the "ray" runner is asked for.
"""
from __future__ import annotations

import enum
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from forkflow.errors import UserError
from forkflow.git.run import no_git_env
from forkflow.process import RUN_MARK, kill_group, kill_marked, new_mark


class JobState(str, enum.Enum):
    FINISHED = "FINISHED"
    TIMEOUT = "TIMEOUT"
    INFRA = "INFRA"


@dataclass(frozen=True, slots=True)
class Job:
    """One suite's command to run.  `env` is added to the runner's environment."""

    job_id: int
    name: str
    command: str
    cwd: str
    log_path: str
    timeout_s: float
    resources: tuple[tuple[str, float], ...] = (("cpus", 1.0),)
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class JobResult:
    job_id: int
    state: JobState
    returncode: int | None
    duration_s: float
    message: str = ""
    attempts: int = 1
    node: str = ""


Progress = Callable[[JobResult], None]


class Runner(Protocol):
    name: str

    def check(self, jobs: Sequence[Job]) -> None:
        """Raise UserError now if some job can never run here (a resource no node has)."""
        ...

    def run(self, jobs: Sequence[Job], on_done: Progress | None = None) -> list[JobResult]:
        """Run every job; one result per job, in the order given."""
        ...

    def close(self) -> None:
        ...


@dataclass(frozen=True, slots=True)
class RunnerOptions:
    jobs: int = 0            # local pool size, 0 = CPUs
    address: str = "auto"    # Ray: "auto", "host:port" or "ray://host:port"


def _local(opts: RunnerOptions) -> Runner:
    from forkflow.tiers.runners.local import LocalRunner

    return LocalRunner(max_workers=opts.jobs)


def _ray(opts: RunnerOptions) -> Runner:
    from forkflow.tiers.runners.ray import RayRunner

    return RayRunner(address=opts.address)


RUNNERS: dict[str, Callable[[RunnerOptions], Runner]] = {"local": _local, "ray": _ray}


def make_runner(name: str, opts: RunnerOptions | None = None) -> Runner:
    """The runner registered as `name`, or a UserError listing the known ones."""
    factory = RUNNERS.get(name)
    if factory is None:
        raise UserError(f"unknown runner '{name}'; use one of: {', '.join(sorted(RUNNERS))}")
    return factory(opts or RunnerOptions())


# The shell that leads the job's process group kills the whole group when it gets SIGTERM or
# SIGHUP: on a timeout, and when its parent (forkflow, or a Ray worker) dies, thanks to
# PR_SET_PDEATHSIG.  A watchdog in the group kills it too when that shell is SIGKILLed (Ray
# kills a dying worker's children, not its grandchildren).  Without both, a test process
# could outlive a dead node's worker forever.
GUARD = (
    "trap 'kill -KILL 0' TERM HUP\n"
    "( while kill -0 $$ 2>/dev/null; do sleep 1; done; kill -KILL 0 ) >/dev/null 2>&1 </dev/null &\n"
    "( {command}\n) &\n"
    "wait $!\n"
)


def _set_parent_death_signal() -> None:
    """In the child: SIGTERM when the parent dies (Linux); the guard then kills the group.

    The signal mask is cleared first: a Ray worker blocks signals, and a child inherits its mask.
    """
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run_process(job: Job) -> JobResult:
    """Run `job.command` with /bin/sh in its own process group, output to its log file.

    On timeout the whole group is killed (children, grandchildren); after a normal exit any
    process the command left running in its group is killed too, and so is any process that
    left the group (`setsid`) but still carries the job's mark (`forkflow.process.kill_marked`).
    """
    start = time.monotonic()
    env = no_git_env()  # a hook's GIT_DIR must not point the suite's git calls elsewhere
    env.update(dict(job.env))
    mark = env[RUN_MARK] = new_mark()
    try:
        os.makedirs(os.path.dirname(job.log_path) or ".", exist_ok=True)
        log = open(job.log_path, "ab")
    except OSError as e:
        return JobResult(job.job_id, JobState.INFRA, None, 0.0, f"cannot open the log {job.log_path}: {e}")
    with log:
        try:
            proc = subprocess.Popen(["/bin/sh", "-c", GUARD.format(command=job.command)], cwd=job.cwd, env=env,
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, preexec_fn=_set_parent_death_signal)
        except OSError as e:
            return JobResult(job.job_id, JobState.INFRA, None, time.monotonic() - start,
                             f"cannot start the command in {job.cwd}: {e}")
        try:
            rc = proc.wait(timeout=job.timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid, reap=proc.poll)
            kill_marked(mark)
            proc.wait()
            msg = f"timed out after {job.timeout_s:g}s; its process group was killed"
            log.write(f"\n[forkflow] {msg}\n".encode())
            return JobResult(job.job_id, JobState.TIMEOUT, proc.returncode, time.monotonic() - start, msg)
        # leftovers the command started in the background (and the guard's watchdog)
        kill_group(proc.pid, grace_s=0.0, reap=proc.poll, first=signal.SIGKILL)
        kill_marked(mark)
    msg = ""
    if rc in (126, 127):
        msg = f"exit code {rc}: the command was not found or is not executable (see the log)"
    return JobResult(job.job_id, JobState.FINISHED, rc, time.monotonic() - start, msg)
