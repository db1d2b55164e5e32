"""Store reads and writes of metric points, alerts and bisections; they return dataclasses, never rows."""
from __future__ import annotations

import fnmatch
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from forkflow.models import Better, MetricPoint, Sha
from forkflow.regress.alerts import AlertDraft, AlertStatus, Direction, SeriesChange
from forkflow.store.schema import MetricPointRow
from forkflow.store.schema_regress import BisectionRow, RegressAlertMemberRow, RegressAlertRow

@dataclass(frozen=True, slots=True)
class Alert:
    id: int
    good_rev: Sha
    bad_rev: Sha
    direction: Direction
    status: AlertStatus
    members: tuple[SeriesChange, ...]
    opened_at: datetime
    bisection_id: int | None = None

    @property
    def worst(self) -> SeriesChange:
        return AlertDraft(self.good_rev, self.bad_rev, self.members).worst


@dataclass(frozen=True, slots=True)
class BisectionRecord:
    id: int
    alert_id: int | None
    metric: str
    status: str
    culprit_fork_sha: Sha | None
    culprit_upstream_sha: Sha | None
    culprit_pr: int | None
    confidence: float
    result: dict[str, Any]  # BisectReport.to_dict(), as stored
    message: str = ""
    rounds: int = 0
    measurements: int = 0

    @property
    def subject(self) -> str:
        """The culprit's subject: the upstream commit's when found inside a unit, else the unit's."""
        return str((self.result.get("culprit") or {}).get("subject", ""))


def save_alerts(s: Session, fid: int, drafts: Sequence[AlertDraft]) -> list[Alert]:
    """Open (or refresh) one alert per draft; the same range is updated, never duplicated."""
    now = datetime.now(timezone.utc)
    ids = []
    for d in drafts:
        row = s.scalar(select(RegressAlertRow).where(
            RegressAlertRow.fork_id == fid, RegressAlertRow.good_rev == d.good_rev,
            RegressAlertRow.bad_rev == d.bad_rev))
        if row is None:
            row = RegressAlertRow(fork_id=fid, good_rev=d.good_rev, bad_rev=d.bad_rev, status=AlertStatus.OPEN,
                                  opened_at=now)
            s.add(row)
        row.direction = d.direction.value
        row.updated_at = now
        s.flush()
        known = {m.metric: m for m in s.scalars(select(RegressAlertMemberRow).where(
            RegressAlertMemberRow.alert_id == row.id))}
        for m in d.members:
            mrow = known.get(m.metric) or RegressAlertMemberRow(alert_id=row.id, metric=m.metric)
            if m.metric not in known:
                s.add(mrow)
            mrow.unit, mrow.better = m.unit, m.better.value
            mrow.good_rev, mrow.bad_rev = m.good_rev, m.bad_rev
            mrow.before, mrow.after, mrow.magnitude, mrow.pvalue = m.before, m.after, m.magnitude, m.pvalue
            mrow.direction = m.direction.value
        ids.append(row.id)
    s.flush()
    rows = s.scalars(select(RegressAlertRow).where(RegressAlertRow.id.in_(ids))).all()
    by_id = {a.id: a for a in _alerts(s, rows)}
    return [by_id[i] for i in ids]


def alerts(s: Session, fid: int) -> list[Alert]:
    rows = s.scalars(select(RegressAlertRow).where(RegressAlertRow.fork_id == fid)
                     .order_by(RegressAlertRow.id)).all()
    return _alerts(s, rows)


def alert(s: Session, fid: int, alert_id: int) -> Alert | None:
    row = s.get(RegressAlertRow, alert_id)
    return _alerts(s, [row])[0] if row is not None and row.fork_id == fid else None


def _alerts(s: Session, rows: Sequence[RegressAlertRow]) -> list[Alert]:
    """The alerts of `rows`, in their order, with members and newest bisection: three queries in all."""
    ids = [r.id for r in rows]
    members: dict[int, list[SeriesChange]] = defaultdict(list)
    last: dict[int, int] = {}
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        for m in s.scalars(select(RegressAlertMemberRow).where(RegressAlertMemberRow.alert_id.in_(chunk))
                           .order_by(RegressAlertMemberRow.metric)):
            members[m.alert_id].append(SeriesChange(m.metric, m.unit, Better(m.better), Sha(m.good_rev),
                                                    Sha(m.bad_rev), m.before, m.after, m.magnitude, m.pvalue))
        q = (select(BisectionRow.alert_id, func.max(BisectionRow.id))
             .where(BisectionRow.alert_id.in_(chunk)).group_by(BisectionRow.alert_id))
        last.update({a: b for a, b in s.execute(q).all() if a is not None})
    return [Alert(r.id, Sha(r.good_rev), Sha(r.bad_rev), Direction(r.direction), AlertStatus(r.status),
                  tuple(members[r.id]), r.opened_at, last.get(r.id)) for r in rows]


def save_bisection(s: Session, fid: int, alert_id: int | None, result: dict[str, Any]) -> int:
    """Store a bisection's result (BisectReport.to_dict()) and attach it to its alert."""
    c = result.get("culprit") or {}
    row = BisectionRow(
        fork_id=fid, alert_id=alert_id, metric=result["metric"], mode=result["mode"],
        good_rev=result["good"], bad_rev=result["bad"], status=result["status"],
        culprit_fork_sha=c.get("fork_commit"), culprit_unit=c.get("landing_unit"),
        culprit_upstream_sha=c.get("upstream_commit"), culprit_pr=c.get("pr"),
        confidence=float(result["confidence"]), rounds=int(result["rounds"]),
        measurement_count=int(result["measurements"]), message=result["message"],
        result=json.dumps(result))
    s.add(row)
    if alert_id is not None:
        arow = s.get(RegressAlertRow, alert_id)
        if arow is not None:
            arow.status = AlertStatus.BISECTED if c else AlertStatus.NO_CULPRIT
            arow.updated_at = datetime.now(timezone.utc)
    s.flush()
    return row.id


def bisection(s: Session, fid: int, bisection_id: int) -> BisectionRecord | None:
    return bisections(s, fid, [bisection_id]).get(bisection_id)


def bisections(s: Session, fid: int, ids: Sequence[int]) -> dict[int, BisectionRecord]:
    """The fork's bisections among `ids`, by id, in one query per 500."""
    out: dict[int, BisectionRecord] = {}
    for i in range(0, len(ids), 500):
        for r in s.scalars(select(BisectionRow).where(BisectionRow.fork_id == fid,
                                                      BisectionRow.id.in_(list(ids[i:i + 500])))):
            out[r.id] = _record(r)
    return out


def latest_bisection(s: Session, fid: int, metric: str, good: str, bad: str,
                     mode: str = "pass-fail") -> BisectionRecord | None:
    """The newest bisection stored under `metric` for exactly this good..bad range."""
    r = s.scalar(select(BisectionRow).where(
        BisectionRow.fork_id == fid, BisectionRow.metric == metric, BisectionRow.mode == mode,
        BisectionRow.good_rev == good, BisectionRow.bad_rev == bad).order_by(BisectionRow.id.desc()).limit(1))
    return None if r is None else _record(r)


def _record(r: BisectionRow) -> BisectionRecord:
    return BisectionRecord(r.id, r.alert_id, r.metric, r.status,
                           Sha(r.culprit_fork_sha) if r.culprit_fork_sha else None,
                           Sha(r.culprit_upstream_sha) if r.culprit_upstream_sha else None,
                           r.culprit_pr, r.confidence, json.loads(r.result or "{}"), r.message, r.rounds,
                           r.measurement_count)


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
