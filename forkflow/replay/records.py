"""Store access of replay: runs and the step cache.  Sessions stay here; callers get plain values."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from forkflow.store.schema import utcnow
from forkflow.store.schema_replay import ReplayCacheRow, ReplayRunRow
from forkflow.store.session import insert_new


@dataclass(frozen=True, slots=True)
class ReplayRun:
    id: int
    since: str
    until: str
    every_seconds: int
    gate: str
    status: str
    report: dict[str, Any] | None


def cached(s: Session, key: str) -> Any:
    row = s.get(ReplayCacheRow, key)
    return json.loads(row.payload) if row is not None else None


def save(s: Session, key: str, kind: str, payload: Any) -> None:
    text = json.dumps(payload, separators=(",", ":"))
    # shared by every fork of the store: an upsert, as two replays may compute one key at once
    insert_new(s, ReplayCacheRow.__table__, [{"key": key, "kind": kind, "payload": text,
                                              "created_at": utcnow()}], update=("payload",))


def start_run(s: Session, fid: int, since: str, until: str, every: int, gate: str) -> int:
    row = ReplayRunRow(fork_id=fid, since=since, until=until, every_seconds=every, gate=gate, status="running",
                       report="")
    s.add(row)
    s.flush()
    return row.id


def finish_run(s: Session, run_id: int, report: dict[str, Any]) -> None:
    row = s.get(ReplayRunRow, run_id)
    if row is not None:
        row.status, row.report, row.finished_at = "done", json.dumps(report), utcnow()


def interrupted(s: Session, fid: int, since: str, until: str, every: int, gate: str) -> int:
    """Runs of the same window that never finished (a re-run resumes them); they are closed."""
    rows = s.scalars(select(ReplayRunRow).where(
        ReplayRunRow.fork_id == fid, ReplayRunRow.status == "running", ReplayRunRow.since == since,
        ReplayRunRow.until == until, ReplayRunRow.every_seconds == every, ReplayRunRow.gate == gate)).all()
    for row in rows:
        row.status = "interrupted"
    return len(rows)


def latest(s: Session, fid: int, run_id: int | None = None) -> ReplayRun | None:
    """The newest finished replay of the fork (or the one asked for)."""
    q = select(ReplayRunRow).where(ReplayRunRow.fork_id == fid, ReplayRunRow.status == "done")
    if run_id is not None:
        q = q.where(ReplayRunRow.id == run_id)
    row = s.scalars(q.order_by(ReplayRunRow.id.desc()).limit(1)).first()
    if row is None:
        return None
    return ReplayRun(row.id, row.since, row.until, row.every_seconds, row.gate, row.status,
                     json.loads(row.report) if row.report else None)


def runs(s: Session, fid: int) -> list[ReplayRun]:
    rows = s.scalars(select(ReplayRunRow).where(ReplayRunRow.fork_id == fid, ReplayRunRow.status == "done")
                     .order_by(ReplayRunRow.id.desc()).limit(50)).all()
    return [ReplayRun(r.id, r.since, r.until, r.every_seconds, r.gate, r.status, None) for r in rows]
