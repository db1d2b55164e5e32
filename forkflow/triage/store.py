"""Store reads and writes of triage; everything returns triage dataclasses, never rows."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import select
from sqlalchemy.orm import Session

from forkflow.store.schema_triage import (
    ClassificationRow,
    FailureGroupRow,
    FailureRow,
    TrackingIssueRow,
)
from forkflow.triage.models import Classification, Failure, FailureKind, Signature, Verdict


def _now() -> datetime:
    return datetime.now(timezone.utc)


def stored_failures(s: Session, run_id: int) -> list[Failure] | None:
    """The failures of a run as triage computed them, or None when it has not yet."""
    rows = s.execute(select(FailureRow, FailureGroupRow).join(
        FailureGroupRow, FailureGroupRow.id == FailureRow.group_id).where(
        FailureRow.run_id == run_id).order_by(FailureRow.id)).all()
    if not rows:  # not triaged yet, or green: recomputing a green run reads no log
        return None
    return [Failure(f.test_id, Signature(FailureKind(g.kind), g.signature, f.excerpt, f.line),
                    run_id, f.suite) for f, g in rows]


def save_failures(s: Session, fid: int, run_id: int, failures: Sequence[Failure]) -> None:
    """Record a run's failures and their groups (a group's last sighting moves forward)."""
    for f in failures:
        g = s.scalar(select(FailureGroupRow).where(FailureGroupRow.fork_id == fid,
                                                   FailureGroupRow.key == f.signature.key))
        if g is None:
            g = FailureGroupRow(fork_id=fid, key=f.signature.key, kind=f.signature.kind.value,
                                signature=f.signature.text, first_run_id=run_id, last_run_id=run_id)
            s.add(g)
            s.flush()
        elif run_id >= g.last_run_id:
            g.last_run_id, g.last_seen_at = run_id, _now()
        s.add(FailureRow(fork_id=fid, run_id=run_id, suite=f.job, test_id=f.test, group_id=g.id,
                         line=f.signature.line, excerpt=f.signature.excerpt))


def save_verdicts(s: Session, run_id: int, verdicts: Sequence[Verdict]) -> None:
    rows = {(r.suite, r.test_id): r for r in s.scalars(select(FailureRow).where(
        FailureRow.run_id == run_id))}
    for v in verdicts:
        f = rows[(v.failure.job, v.failure.test)]
        c = s.scalar(select(ClassificationRow).where(ClassificationRow.failure_id == f.id))
        if c is None:
            c = ClassificationRow(failure_id=f.id)
            s.add(c)
        c.classification, c.reason = v.classification.value, v.reason
        c.reruns, c.classified_at = json.dumps(list(v.reruns)), _now()


def stored_verdicts(s: Session, run_id: int) -> list[Verdict] | None:
    failures = stored_failures(s, run_id)
    if failures is None:
        return None
    rows = {(f.suite, f.test_id): c for f, c in s.execute(
        select(FailureRow, ClassificationRow).join(
            ClassificationRow, ClassificationRow.failure_id == FailureRow.id).where(
            FailureRow.run_id == run_id))}
    if len(rows) < len(failures):
        return None
    return [Verdict(f, Classification(rows[(f.job, f.test)].classification),
                    rows[(f.job, f.test)].reason, tuple(json.loads(rows[(f.job, f.test)].reruns)))
            for f in failures]


@dataclass(frozen=True, slots=True)
class Tracking:
    group_key: str
    sink: str
    issue_id: str
    url: str
    open: bool
    green_streak: int
    last_run_id: int


def tracking(s: Session, fid: int, sink: str) -> dict[str, Tracking]:
    rows = s.scalars(select(TrackingIssueRow).where(TrackingIssueRow.fork_id == fid,
                                                    TrackingIssueRow.sink == sink))
    return {r.group_key: Tracking(r.group_key, r.sink, r.issue_id, r.url, r.state == "open",
                                  r.green_streak, r.last_run_id) for r in rows}


def save_tracking(s: Session, fid: int, t: Tracking) -> None:
    r = s.scalar(select(TrackingIssueRow).where(
        TrackingIssueRow.fork_id == fid, TrackingIssueRow.sink == t.sink,
        TrackingIssueRow.group_key == t.group_key))
    if r is None:
        r = TrackingIssueRow(fork_id=fid, sink=t.sink, group_key=t.group_key)
        s.add(r)
    r.issue_id, r.url, r.state = t.issue_id, t.url, "open" if t.open else "closed"
    r.green_streak, r.last_run_id, r.updated_at = t.green_streak, t.last_run_id, _now()

