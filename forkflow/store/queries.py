"""Store reads and writes of the foundation; everything returns forkflow.models values."""
from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from forkflow.models import Better, MetricPoint, Sha
from forkflow.store.schema import MetricPointRow


def add_metric_points(s: Session, fid: int, points: Iterable[MetricPoint]) -> int:
    """Store measurements; returns how many were written."""
    n = 0
    for p in points:
        s.add(MetricPointRow(fork_id=fid, name=p.name, rev=p.rev, value=p.value, unit=p.unit,
                             better=p.better.value, samples=json.dumps(list(p.samples)),
                             suite=p.suite, run_id=p.run_id, measured_at=p.measured_at,
                             commit_date=p.commit_date, context=json.dumps(dict(p.context))))
        n += 1
    return n


def metric_names(s: Session, fid: int, pattern: str = "*") -> list[str]:
    """Names of stored metrics matching a shell glob."""
    names = s.scalars(select(MetricPointRow.name).where(MetricPointRow.fork_id == fid).distinct()).all()
    return sorted(n for n in names if fnmatch.fnmatchcase(n, pattern))


def latest_metric_point(s: Session, fid: int, name: str) -> MetricPoint | None:
    """The newest point of one metric (the last of `metric_series`), in one row."""
    r = s.scalar(select(MetricPointRow).where(MetricPointRow.fork_id == fid, MetricPointRow.name == name)
                 .order_by(MetricPointRow.commit_date.desc(), MetricPointRow.id.desc()).limit(1))
    return None if r is None else _metric_point(r)


def metric_series(s: Session, fid: int, name: str) -> list[MetricPoint]:
    """The series of one metric, oldest commit first (several points per rev when re-measured)."""
    return metric_series_of(s, fid, [name]).get(name, [])


def metric_series_of(s: Session, fid: int, names: Sequence[str]) -> dict[str, list[MetricPoint]]:
    """The series of each of `names` (as `metric_series`), in one query per 500 names."""
    out: dict[str, list[MetricPoint]] = {}
    for i in range(0, len(names), 500):
        rows = s.scalars(select(MetricPointRow).where(MetricPointRow.fork_id == fid,
                                                      MetricPointRow.name.in_(list(names[i:i + 500])))
                         .order_by(MetricPointRow.name, MetricPointRow.commit_date, MetricPointRow.id))
        for r in rows:
            out.setdefault(r.name, []).append(_metric_point(r))
    return out


def _metric_point(r: MetricPointRow) -> MetricPoint:
    return MetricPoint(name=r.name, rev=Sha(r.rev), value=r.value, unit=r.unit, better=Better(r.better),
                       samples=tuple(json.loads(r.samples)), suite=r.suite, run_id=r.run_id,
                       measured_at=r.measured_at, commit_date=r.commit_date,
                       context=tuple(sorted(json.loads(r.context or "{}").items())))
