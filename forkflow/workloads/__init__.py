"""The reference workload pack for Triton/PyTorch forks, registered as data.

Each workload is a module of this package that defines `WORKLOAD = Workload(...)` and a
`main(argv) -> int` that runs it alone (`python -m forkflow.workloads.<module> --report PATH`).
Module top levels import nothing heavy: torch, triton and helion are imported only when a
workload runs, so `forkflow workloads list` works without the `gpu` extra.
"""
from __future__ import annotations

import enum
import importlib
import importlib.util
from dataclasses import dataclass, field

from forkflow.errors import UserError


class Tier(str, enum.Enum):
    """The validation tier a workload belongs to (see DESIGN.md, Validation tiers)."""

    L1 = "L1"
    L2 = "L2"
    L3 = "L3"


class ReportFormat(str, enum.Enum):
    """What the workload writes at `{report}`: JUnit XML or the metrics JSON."""

    JUNIT = "junit"
    METRICS = "metrics"


@dataclass(frozen=True, slots=True)
class Workload:
    """One reference workload: how to run it and what it reports."""

    name: str
    tier: Tier
    module: str  # under forkflow.workloads
    report: ReportFormat
    description: str
    needs_gpu: bool = False
    resources: tuple[tuple[str, int], ...] = (("cpus", 1), ("gpus", 0))
    expect_tests: int | None = None  # JUnit cases (the same count on every machine)
    timeout: str = "20m"
    requires: tuple[str, ...] = ("torch", "triton")  # import names of the `gpu` extra it needs
    paths: tuple[str, ...] = field(default=("**",))

    @property
    def command(self) -> str:
        """The suite command, with `{report}` where the report goes."""
        return f"python -m forkflow.workloads.{self.module} --report {{report}}"

    @property
    def report_suffix(self) -> str:
        return ".xml" if self.report is ReportFormat.JUNIT else ".json"

    def missing_packages(self) -> tuple[str, ...]:
        """The packages this workload imports that are not installed here."""
        return tuple(p for p in self.requires if importlib.util.find_spec(p) is None)


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
