"""The metrics JSON that forkflow's L2 reads: {"metrics": [{"name","value","unit","better","samples"}]}."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forkflow.models import Metric
from forkflow.workloads.junit import write_atomic


@dataclass(frozen=True, slots=True)
class MetricsReport:
    """A workload's metrics, plus what it could not measure (and why) or why it skipped."""

    metrics: tuple[Metric, ...]
    errors: tuple[str, ...] = ()
    skipped: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"metrics": [m.to_json() for m in self.metrics]}
        if self.errors:
            doc["errors"] = list(self.errors)
        if self.skipped:
            doc["skipped"] = self.skipped
        if self.info:
            doc["info"] = self.info
        return doc


def write_metrics(path: Path, report: MetricsReport) -> None:
    """Write the report atomically; a non-finite value is a bug, never written."""
    for m in report.metrics:
        if not math.isfinite(m.value):
            raise ValueError(f"metric {m.name} is {m.value}; refusing to write it")
    write_atomic(path, (json.dumps(report.to_json(), indent=2) + "\n").encode())


def with_context(metrics: tuple[Metric, ...] | list[Metric], context: dict[str, str]) -> tuple[Metric, ...]:
    """The metrics with `context` (device, driver, versions...) added under their own entries."""
    from dataclasses import replace

    return tuple(replace(m, context=tuple(sorted({**context, **dict(m.context)}.items()))) for m in metrics)
