"""The reference workload pack for Triton/PyTorch forks, registered as data.

Each workload is a module of this package that defines `WORKLOAD = Workload(...)` and a
`main(argv) -> int` that runs it alone (`python -m forkflow.workloads.<module> --report PATH`).
Module top levels import nothing heavy: torch, triton and helion are imported only when a
workload runs, so `forkflow workloads list` works without the `gpu` extra.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from forkflow.errors import UserError
from forkflow.tiers.tiers import ReportFormat, Tier
from forkflow.workloads.device import cuda_available, missing_packages

GPU = "a CUDA GPU"  # what `missing_here` names when a GPU workload finds none

__all__ = ["ReportFormat", "Tier", "Workload", "all_workloads", "get_workload"]


@dataclass(frozen=True, slots=True)
class Workload:
    """One reference workload: how to run it and what it reports."""

    name: str
    tier: Tier
    module: str  # under forkflow.workloads
    report: ReportFormat
    description: str
    summary: str = ""  # a few words for `workloads list`
    needs_gpu: bool = False
    resources: tuple[tuple[str, int], ...] = (("cpus", 2), ("gpus", 0))
    expect_tests: int | None = None  # JUnit cases (the same count on every machine)
    timeout: str = "20m"
    requires: tuple[str, ...] = ("torch", "triton")  # import names of the `gpu` extra it needs
    paths: tuple[str, ...] = field(default=("**",))
    metrics: tuple[str, ...] = ()  # globs of the metrics it reports: bisect finds its suite by them
    per_sample: tuple[str, ...] = ()  # globs of those whose samples bisect judges one by one

    @property
    def command(self) -> str:
        """The suite command, with `{report}` where the report goes."""
        return f"python -m forkflow.workloads.{self.module} --report {{report}}"

    @property
    def report_suffix(self) -> str:
        return ".xml" if self.report is ReportFormat.JUNIT else ".json"

    def suite_entry(self, name: str | None = None, paths: tuple[str, ...] | None = None,
                    gpus: int | None = None, timeout: str | None = None) -> dict[str, object]:
        """The `[[suite]]` table that runs this workload (the suite format of forkflow.tiers)."""
        res = dict(self.resources)
        if gpus is not None:
            res["gpus"] = gpus
        entry: dict[str, object] = {"name": name or self.name, "tier": self.tier.value,
                                    "command": self.command, "report": self.report.value}
        if self.expect_tests is not None:
            entry["expect_tests"] = self.expect_tests
        entry["paths"] = list(paths if paths is not None else self.paths)
        if self.metrics:
            entry["metrics"] = list(self.metrics)
        if self.per_sample:
            entry["per_sample"] = list(self.per_sample)
        entry["resources"] = res
        entry["timeout"] = timeout or self.timeout
        return entry

    def missing_packages(self) -> tuple[str, ...]:
        """The packages this workload imports that are not installed here."""
        return missing_packages(self.requires)

    def missing_here(self) -> tuple[str, ...]:
        """What this machine lacks to run it: packages not installed, then "a CUDA GPU" when it
        needs one and torch (installed) sees none.  Imports torch only for a GPU workload."""
        missing = self.missing_packages()
        if self.needs_gpu and "torch" not in missing and not cuda_available():
            missing += (GPU,)
        return missing


# Modules of this package that define WORKLOAD, in the order `workloads list` shows them.
WORKLOAD_MODULES: tuple[str, ...] = (
    "kernels",
    "customer_kernels",
    "matmul_sweep",
    "compile_time",
    "fsdp2",
)


def all_workloads() -> dict[str, Workload]:
    """Every registered workload by name."""
    out: dict[str, Workload] = {}
    for mod in WORKLOAD_MODULES:
        w = importlib.import_module(f"forkflow.workloads.{mod}").WORKLOAD
        assert isinstance(w, Workload) and w.module == mod, mod
        out[w.name] = w
    return out


def get_workload(name: str) -> Workload:
    """The workload called `name`, or a UserError listing the known names."""
    known = all_workloads()
    if name not in known:
        raise UserError(f"no workload named {name!r}; known: {', '.join(known)} "
                        "(see: forkflow workloads list)")
    return known[name]
