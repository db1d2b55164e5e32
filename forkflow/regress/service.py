"""`detect`: read every matching L2 series, find change points, group them, store alerts."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from forkflow.models import MetricPoint, Sha
from forkflow.regress import records
from forkflow.regress.alerts import (
    AlertDraft,
    ConfigChange,
    SeriesChange,
    config_changes,
    group_changes,
    series_changes,
)
from forkflow.regress.detect import DetectConfig
from forkflow.regress.records import Alert, save_alerts
from forkflow.store.session import Store


class MetricJournal(Protocol):
    """What detection reads and records (issue 17): the series, then the alerts."""

    def series(self, pattern: str) -> dict[str, list[MetricPoint]]: ...
    def alerts_found(self, drafts: Sequence[AlertDraft]) -> list[Alert]: ...


class StoreMetricJournal:
    """The metric journal over forkflow's store, for one fork."""

    def __init__(self, store: Store, fork_id: int) -> None:
        self.store = store
        self.fork_id = fork_id

    def series(self, pattern: str) -> dict[str, list[MetricPoint]]:
        """Every stored series whose name matches `pattern`, by name in name order."""
        with self.store.session_scope() as s:
            names = records.metric_names(s, self.fork_id, pattern)
            by_name = records.metric_series_of(s, self.fork_id, names)
        return {n: by_name.get(n, []) for n in names}

    def alerts_found(self, drafts: Sequence[AlertDraft]) -> list[Alert]:
        with self.store.session_scope() as s:
            return save_alerts(s, self.fork_id, drafts)


def commit_order(series: list[list[MetricPoint]]) -> dict[Sha, int]:
    """A position per commit across all series: by commit date, then first appearance."""
    first: dict[Sha, tuple[int, int]] = {}
    seen = 0
    for points in series:
        for p in points:
            if p.rev not in first:
                first[p.rev] = (p.commit_date, seen)
                seen += 1
    return {rev: i for i, rev in enumerate(sorted(first, key=lambda r: first[r]))}


@dataclass(frozen=True, slots=True)
class Detection:
    metrics: tuple[str, ...]              # the metrics examined
    alerts: tuple[Alert, ...]             # alerts opened or refreshed
    config_changes: tuple[ConfigChange, ...]


def detect(journal: MetricJournal, pattern: str = "*", cfg: DetectConfig = DetectConfig()) -> Detection:
    """Alerts and kernel-config changes along the metrics matching `pattern` (the series read once)."""
    by_name = journal.series(pattern)
    all_series = list(by_name.values())
    changes: list[SeriesChange] = []
    for points in all_series:
        changes.extend(series_changes(points, cfg))
    drafts = group_changes(changes, commit_order(all_series))
    configs = tuple(c for points in all_series for c in config_changes(points))
    return Detection(tuple(by_name), tuple(journal.alerts_found(drafts)), configs)


class StoreAlertFeed:
    """The alerts, their bisections and the newest value of a metric, for tracking issues
    (`forkflow.triage.tracking.AlertFeed`), over forkflow's store for one fork."""

    def __init__(self, store: Store, fork_id: int) -> None:
        self.store = store
        self.fork_id = fork_id

    def alerts(self) -> list[Alert]:
        with self.store.session_scope() as s:
            return records.alerts(s, self.fork_id)

    def bisection(self, bisection_id: int) -> records.BisectionRecord | None:
        with self.store.session_scope() as s:
            return records.bisection(s, self.fork_id, bisection_id)

    def newest_value(self, metric: str) -> float | None:
        """The median of the newest measured commit's values of `metric`."""
        with self.store.session_scope() as s:
            points = records.metric_series(s, self.fork_id, metric)
        if not points:
            return None
        last = points[-1].rev
        values = sorted(p.value for p in points if p.rev == last)
        return values[len(values) // 2]


@dataclass(frozen=True, slots=True)
class MeasuredMetric:
    """One metric a run measured, beside its series: the median of the commits before it."""

    name: str
    value: float
    unit: str
    better: str
    before: float | None       # median of the previous commits' values (up to `window`)
    commits_before: int        # how many commits that median covers
    change: float | None       # relative to `before`, +0.2 = 20% higher

    def to_dict(self) -> dict[str, object]:
        return {"metric": self.name, "value": self.value, "unit": self.unit, "better": self.better,
                "recent_median": self.before, "recent_commits": self.commits_before, "change": self.change}


def measured_in_run(store: Store, fork_id: int, run_id: int, window: int = 10) -> list[MeasuredMetric]:
    """Each metric run `run_id` stored, with the median of its series over the `window` commits
    measured before this one (`forkflow nightly` prints them)."""
    from statistics import median

    from sqlalchemy import select

    from forkflow.store.schema import MetricPointRow

    with store.session_scope() as s:
        names = sorted(set(s.scalars(select(MetricPointRow.name).where(
            MetricPointRow.fork_id == fork_id, MetricPointRow.run_id == run_id))))
        series = records.metric_series_of(s, fork_id, names)
    out = []
    for name in names:
        points = series.get(name, [])
        mine = [p for p in points if p.run_id == run_id]
        rev = mine[-1].rev
        by_rev: dict[str, list[float]] = {}
        for p in points:
            if p.rev != rev and p.commit_date <= mine[-1].commit_date:
                by_rev.setdefault(p.rev, []).append(p.value)
        earlier = [median(v) for v in list(by_rev.values())[-window:]]
        value = median(p.value for p in mine)
        before = median(earlier) if earlier else None
        change = (value - before) / abs(before) if before else None
        out.append(MeasuredMetric(name, value, mine[-1].unit, mine[-1].better.value, before, len(earlier), change))
    return out
