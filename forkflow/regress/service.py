"""`detect`: read every matching L2 series, find change points, group them, store alerts."""
from __future__ import annotations

from sqlalchemy.orm import Session

from forkflow.models import MetricPoint, Sha
from forkflow.regress.alerts import ConfigChange, SeriesChange, config_changes, group_changes, series_changes
from forkflow.regress.detect import DetectConfig
from forkflow.regress.records import Alert, save_alerts
from forkflow.store import queries


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


def detect_alerts(s: Session, fid: int, pattern: str = "*", cfg: DetectConfig = DetectConfig()) -> tuple[list[str], list[Alert]]:
    """(metrics examined, alerts opened or refreshed) for the metrics matching `pattern`."""
    names = queries.metric_names(s, fid, pattern)
    by_name = queries.metric_series_of(s, fid, names)
    all_series = [by_name.get(n, []) for n in names]
    changes: list[SeriesChange] = []
    for points in all_series:
        changes.extend(series_changes(points, cfg))
    drafts = group_changes(changes, commit_order(all_series))
    return names, save_alerts(s, fid, drafts)


def detect_config_changes(s: Session, fid: int, pattern: str = "*") -> list[ConfigChange]:
    """Every change of kernel config along the metrics matching `pattern`."""
    names = queries.metric_names(s, fid, pattern)
    by_name = queries.metric_series_of(s, fid, names)
    return [c for n in names for c in config_changes(by_name.get(n, []))]
