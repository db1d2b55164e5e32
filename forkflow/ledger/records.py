"""Store reads and writes of the ledger: recorded decisions, commit facts, cached ledgers, snapshots."""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from sqlalchemy import Table, delete, select, update
from sqlalchemy.orm import Session

from forkflow.models import Decider, Decision, Disposition, RecordedDecision, Sha
from forkflow.store.schema import CommitFactRow, DispositionRow, LedgerCacheRow, SnapshotRow
from forkflow.store.session import Writer, connection_of, insert_new


def recorded_decisions(s: Session, fid: int) -> list[RecordedDecision]:
    rows = s.scalars(select(DispositionRow).where(DispositionRow.fork_id == fid)).all()
    return [
        RecordedDecision(Sha(r.upstream_sha), Disposition(r.disposition), r.reason,
                         tuple(Sha(x) for x in json.loads(r.fork_shas)),
                         source=Decider(r.source or "auto"), verdict=Decision(r.verdict) if r.verdict else None,
                         until=r.until, task=r.task or "", decided_by=r.decided_by or "",
                         decided_at=r.decided_at.isoformat() if r.decided_at else "", chain=r.chain or "")
        for r in rows
    ]


def record_decision(s: Session, fid: int, decision: RecordedDecision) -> None:
    """Insert or replace the decision on one upstream commit."""
    row = s.scalar(select(DispositionRow).where(
        DispositionRow.fork_id == fid, DispositionRow.upstream_sha == decision.sha))
    if row is None:
        row = DispositionRow(fork_id=fid, upstream_sha=decision.sha)
        s.add(row)
    row.disposition = decision.disposition.value
    row.reason = decision.reason
    row.fork_shas = json.dumps(list(decision.fork_shas))
    row.decided_at = datetime.now(timezone.utc)
    row.source = decision.source.value
    row.verdict = decision.verdict.value if decision.verdict else ""
    row.until = decision.until
    row.task = decision.task
    row.decided_by = decision.decided_by
    row.chain = decision.chain


def record_decisions(s: Writer, fid: int, decisions: Sequence[RecordedDecision]) -> None:
    """`record_decision` of many commits as one upsert (a run of a real fork records hundreds;
    a read and a write per commit cost 2.6 s of one)."""
    last = {d.sha: d for d in decisions}  # a later decision on the same commit wins
    if not last:
        return
    now = datetime.now(timezone.utc)
    rows = [{"fork_id": fid, "upstream_sha": sha, "disposition": d.disposition.value, "reason": d.reason,
             "fork_shas": json.dumps(list(d.fork_shas)), "decided_at": now, "source": d.source.value,
             "verdict": d.verdict.value if d.verdict else "", "until": d.until, "task": d.task,
             "decided_by": d.decided_by, "chain": d.chain} for sha, d in last.items()]
    conn = connection_of(s)
    dialect = conn.dialect.name
    if dialect not in ("sqlite", "postgresql"):
        with Session(bind=conn) as session:  # joins the connection's transaction
            for d in last.values():
                record_decision(session, fid, d)
            session.flush()
        return
    conn.execute(_upsert(dialect), rows)


@lru_cache(maxsize=None)
def _upsert(dialect: str) -> Any:
    """The decisions' upsert on the table, built once and run with many rows (executemany): a
    statement with the rows as values was compiled again at each call, 2 ms of each landed unit."""
    table: Table = DispositionRow.__table__  # type: ignore[assignment]  # a mapped class's table
    upsert: Any
    if dialect == "sqlite":  # only the dialect in use (PostgreSQL's imports its drivers' modules: 35 ms)
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert
        upsert = sqlite_insert(table)
    else:
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert
        upsert = postgresql_insert(table)
    kept = ("fork_id", "upstream_sha", "id")
    return upsert.on_conflict_do_update(index_elements=["fork_id", "upstream_sha"],
                                        set_={c.name: upsert.excluded[c.name] for c in table.columns if c.name not in kept})


def forget_decision(s: Session, fid: int, sha: Sha) -> bool:
    """Remove the decision on one upstream commit; False when there was none."""
    row = s.scalar(select(DispositionRow).where(
        DispositionRow.fork_id == fid, DispositionRow.upstream_sha == sha))
    if row is None:
        return False
    s.delete(row)
    return True


def commit_facts(s: Session, shas: Iterable[Sha]) -> dict[Sha, tuple[str | None, tuple[str, ...] | None]]:
    """Cached (patch_id, files) per sha; absent shas are not in the result."""
    out: dict[Sha, tuple[str | None, tuple[str, ...] | None]] = {}
    shas = list(shas)
    for i in range(0, len(shas), 500):
        chunk = shas[i:i + 500]
        for r in s.scalars(select(CommitFactRow).where(CommitFactRow.sha.in_(chunk))):
            files = tuple(json.loads(r.files)) if r.files is not None else None
            out[Sha(r.sha)] = (r.patch_id, files)
    return out


def save_commit_facts(s: Session, facts: dict[Sha, tuple[str | None, tuple[str, ...] | None]]) -> None:
    """Upsert (patch_id, files) per sha, keeping values already known.

    New rows go in as one multi-row insert (a `merge` per row cost 2.6 s for 1,200 commits of a
    real fork, issue 11)."""
    known = commit_facts(s, facts)
    fresh: list[dict[str, str | None]] = []
    for sha, (pid, files) in facts.items():
        old_pid, old_files = known.get(sha, (None, None))
        row = {"sha": sha, "patch_id": pid if pid is not None else old_pid,
               "files": json.dumps(list(files)) if files is not None else (
                   json.dumps(list(old_files)) if old_files is not None else None)}
        if sha not in known:
            fresh.append(row)
        elif (row["patch_id"], row["files"]) != (old_pid, json.dumps(list(old_files)) if old_files is not None else None):
            s.execute(update(CommitFactRow).where(CommitFactRow.sha == sha)
                      .values(patch_id=row["patch_id"], files=row["files"]))
    insert_new(s, CommitFactRow.__table__, fresh)  # shared by every fork: another may insert the same sha at once


def cached_ledger(s: Session, key: str) -> str | None:
    row = s.get(LedgerCacheRow, key)
    return row.payload if row else None


def save_ledger(s: Session, fid: int, key: str, payload: str) -> None:
    # keep only the newest few ledgers of a fork: the cache is for the warm path
    old = s.scalars(select(LedgerCacheRow.key).where(LedgerCacheRow.fork_id == fid)
                    .order_by(LedgerCacheRow.created_at.desc()).offset(7)).all()
    if old:
        s.execute(delete(LedgerCacheRow).where(LedgerCacheRow.key.in_(old)))
    insert_new(s, LedgerCacheRow.__table__, [{"key": key, "fork_id": fid, "payload": payload,  # two readers at once
                                              "created_at": datetime.now(timezone.utc)}],
               update=("fork_id", "payload", "created_at"))


@dataclass(frozen=True, slots=True)
class Snapshot:
    taken_at: datetime
    source: str
    fork_tip: Sha
    upstream_tip: Sha
    ingestion_point: Sha
    inferred: bool
    days_behind: float
    backlog: int
    counts: dict[str, int]


def delete_snapshots(s: Session, fid: int, source: str, since: datetime, until: datetime) -> None:
    """Remove the points of `source` taken in [since, until]."""
    s.execute(delete(SnapshotRow).where(SnapshotRow.fork_id == fid, SnapshotRow.source == source,
                                        SnapshotRow.taken_at >= since, SnapshotRow.taken_at <= until))


def save_snapshot(s: Session, fid: int, snap: Snapshot) -> None:
    """Store one point of the series; the same (source, time) is replaced, never duplicated."""
    row = s.scalar(select(SnapshotRow).where(
        SnapshotRow.fork_id == fid, SnapshotRow.source == snap.source,
        SnapshotRow.taken_at == snap.taken_at))
    if row is None:
        row = SnapshotRow(fork_id=fid, source=snap.source, taken_at=snap.taken_at)
        s.add(row)
    row.fork_tip = snap.fork_tip
    row.upstream_tip = snap.upstream_tip
    row.ingestion_point = snap.ingestion_point
    row.inferred = snap.inferred
    row.days_behind = snap.days_behind
    row.backlog = snap.backlog
    row.counts = json.dumps(snap.counts)


def snapshots(s: Session, fid: int) -> list[Snapshot]:
    rows = s.scalars(select(SnapshotRow).where(SnapshotRow.fork_id == fid)
                     .order_by(SnapshotRow.taken_at)).all()
    out = []
    for r in rows:
        out.append(Snapshot(r.taken_at, r.source, Sha(r.fork_tip), Sha(r.upstream_tip),
                            Sha(r.ingestion_point), r.inferred, r.days_behind, r.backlog,
                            json.loads(r.counts)))
    return out
