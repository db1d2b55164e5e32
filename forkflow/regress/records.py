"""Store reads and writes of alerts and bisections; they return dataclasses, never rows."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from forkflow.models import Better, Sha
from forkflow.regress.alerts import AlertDraft, Direction, SeriesChange
from forkflow.store.schema_regress import BisectionRow, RegressAlertMemberRow, RegressAlertRow

OPEN, BISECTED, NO_CULPRIT = "open", "bisected", "no-culprit"


@dataclass(frozen=True, slots=True)
class Alert:
    id: int
    good_rev: Sha
    bad_rev: Sha
    direction: Direction
    status: str
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
    result: dict[str, Any]


def save_alerts(s: Session, fid: int, drafts: Sequence[AlertDraft]) -> list[Alert]:
    """Open (or refresh) one alert per draft; the same range is updated, never duplicated."""
    now = datetime.now(timezone.utc)
    ids = []
    for d in drafts:
        row = s.scalar(select(RegressAlertRow).where(
            RegressAlertRow.fork_id == fid, RegressAlertRow.good_rev == d.good_rev,
            RegressAlertRow.bad_rev == d.bad_rev))
        if row is None:
            row = RegressAlertRow(fork_id=fid, good_rev=d.good_rev, bad_rev=d.bad_rev, status=OPEN,
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
    return [a for a in (alert(s, fid, i) for i in ids) if a is not None]


def alerts(s: Session, fid: int) -> list[Alert]:
    rows = s.scalars(select(RegressAlertRow).where(RegressAlertRow.fork_id == fid)
                     .order_by(RegressAlertRow.id)).all()
    return [_alert(s, r) for r in rows]


def alert(s: Session, fid: int, alert_id: int) -> Alert | None:
    row = s.get(RegressAlertRow, alert_id)
    return _alert(s, row) if row is not None and row.fork_id == fid else None


def _alert(s: Session, r: RegressAlertRow) -> Alert:
    members = tuple(
        SeriesChange(m.metric, m.unit, Better(m.better), Sha(m.good_rev), Sha(m.bad_rev), m.before,
                     m.after, m.magnitude, m.pvalue)
        for m in s.scalars(select(RegressAlertMemberRow).where(RegressAlertMemberRow.alert_id == r.id)
                           .order_by(RegressAlertMemberRow.metric)))
    last = s.scalar(select(BisectionRow.id).where(BisectionRow.alert_id == r.id)
                    .order_by(BisectionRow.id.desc()).limit(1))
    return Alert(r.id, Sha(r.good_rev), Sha(r.bad_rev), Direction(r.direction), r.status, members,
                 r.opened_at, last)


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
            arow.status = BISECTED if c else NO_CULPRIT
            arow.updated_at = datetime.now(timezone.utc)
    s.flush()
    return row.id


def bisection(s: Session, fid: int, bisection_id: int) -> BisectionRecord | None:
    r = s.get(BisectionRow, bisection_id)
    if r is None or r.fork_id != fid:
        return None
    return BisectionRecord(r.id, r.alert_id, r.metric, r.status,
                           Sha(r.culprit_fork_sha) if r.culprit_fork_sha else None,
                           Sha(r.culprit_upstream_sha) if r.culprit_upstream_sha else None,
                           r.culprit_pr, r.confidence, json.loads(r.result))
