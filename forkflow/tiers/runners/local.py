"""`LocalRunner`: jobs in a pool of threads, each job one process group on this machine.

Resources: a job's `cpus` take that many of the pool's CPU slots (the pool never oversubscribes
them; a pool smaller than the machine, `[validation] jobs`, runs a bigger job alone); `cpus`,
`gpus` and custom labels must exist here: CPUs default to `os.cpu_count()`, gpus to the CUDA
devices visible, and `FORKFLOW_LOCAL_RESOURCES` ("cpus=8,gpus=2,h200=2") declares or overrides
them.  A job asking for more than the machine has is refused by `check` before anything starts,
as the Ray runner refuses what no node has.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from forkflow.errors import UserError
from forkflow.tiers.runners.base import Job, JobResult, Progress, run_process


def _gpu_count() -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    return _smi_gpu_count()


@functools.cache
def _smi_gpu_count() -> int:
    """The GPUs nvidia-smi lists, asked once per process (a gate runs validate twice per unit)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def local_resources() -> dict[str, float]:
    """What this machine offers: CPUs, GPUs, and labels from FORKFLOW_LOCAL_RESOURCES."""
    have: dict[str, float] = {"cpus": float(os.cpu_count() or 1), "gpus": float(_gpu_count())}
    for item in os.environ.get("FORKFLOW_LOCAL_RESOURCES", "").split(","):
        if not item.strip():
            continue
        name, _, amount = item.partition("=")
        try:
            have[name.strip()] = float(amount)
        except ValueError:
            raise UserError(f"FORKFLOW_LOCAL_RESOURCES has a bad item {item!r}; write it as "
                            "'name=amount,...', e.g. 'gpus=2,h200=2'") from None
    return have


class LocalRunner:
    """A process pool on this machine (the default runner)."""

    name = "local"

    def __init__(self, max_workers: int = 0) -> None:
        self.resources = local_resources()
        self.max_workers = max_workers or int(self.resources["cpus"])
        self._slots = threading.Condition()
        self._free = float(max(self.max_workers, 1))

    def check(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            for name, amount in job.resources:
                have = self.resources.get(name, 0.0)
                if amount > have:
                    raise UserError(
                        f"job '{job.name}' asks for {name}={amount:g} but this machine has "
                        f"{have:g}; lower the suite's resources, run it where it fits (--runner ray) "
                        f"or declare the resource with FORKFLOW_LOCAL_RESOURCES='{name}=amount'")

    def _cpus(self, job: Job) -> float:
        want = dict(job.resources).get("cpus", 1.0)
        return min(max(want, 0.0), float(max(self.max_workers, 1)))

    def _run_one(self, job: Job, on_done: Progress | None) -> JobResult:
        need = self._cpus(job)
        with self._slots:
            self._slots.wait_for(lambda: self._free >= need)
            self._free -= need
        try:
            result = run_process(job)
        finally:
            with self._slots:
                self._free += need
                self._slots.notify_all()
        if on_done is not None:
            on_done(result)
        return result

    def run(self, jobs: Sequence[Job], on_done: Progress | None = None) -> list[JobResult]:
        self.check(jobs)
        if len(jobs) == 1:
            return [self._run_one(jobs[0], on_done)]
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_workers, len(jobs)))) as pool:
            futures = [pool.submit(self._run_one, j, on_done) for j in jobs]
            return [f.result() for f in futures]

    def close(self) -> None:
        pass
