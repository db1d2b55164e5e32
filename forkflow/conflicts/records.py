"""Store reads and writes of conflicts, recorded resolutions and agent attempts."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from forkflow.conflicts.resolvers.agent import Attempt
from forkflow.models import Sha
from forkflow.store.schema_ingest import AgentAttemptRow, ConflictRow, ResolutionRow


@dataclass(frozen=True, slots=True)
class ConflictInfo:
    id: int
    upstream_sha: Sha
    subject: str
    path: str
    kind: str
    chain: str
    base_sha: Sha
    key: str
    marked: str
    tried: tuple[str, ...]
    status: str
    seen: int
    last_seen: datetime


@dataclass(frozen=True, slots=True)
class AttemptInfo:
    id: int
    path: str
    backend: str
    outcome: str
    reason: str
    duration_ms: int


def lookup_resolution(s: Session, key: str) -> tuple[list[str], str] | None:
    row = s.scalar(select(ResolutionRow).where(ResolutionRow.key == key))
    return (list(json.loads(row.regions)), row.source) if row else None


def save_resolution(s: Session, key: str, path: str, texts: Sequence[str], source: str) -> None:
    """Remember how a conflict was resolved; a person's resolution replaces an automatic one."""
    row = s.scalar(select(ResolutionRow).where(ResolutionRow.key == key))
    if row is None:
        s.add(ResolutionRow(key=key, path=path, regions=json.dumps(list(texts)), source=source))
    elif source == "person" or row.source != "person":
        row.regions = json.dumps(list(texts))
        row.source = source
        row.path = path


def upsert_conflict(s: Session, fid: int, *, upstream_sha: Sha, subject: str, path: str, kind: str,
                    chain: str, base_sha: Sha, key: str, marked: str, tried: Sequence[str]) -> int:
    """Keep one open record per (upstream commit, path); seeing it again updates it."""
    row = s.scalar(select(ConflictRow).where(ConflictRow.fork_id == fid,
                                             ConflictRow.upstream_sha == upstream_sha,
                                             ConflictRow.path == path))
    now = datetime.now(timezone.utc)
    if row is None:
        row = ConflictRow(fork_id=fid, upstream_sha=upstream_sha, path=path, seen=0, first_seen=now)
        s.add(row)
    row.subject, row.kind, row.chain, row.base_sha = subject, kind, chain, base_sha
    row.key, row.marked, row.tried = key, marked, json.dumps(list(tried))
    row.status = "open"
    row.seen = (row.seen or 0) + 1
    row.last_seen = now
    s.flush()
    return row.id


def close_conflicts(s: Session, fid: int, upstream_shas: Sequence[str]) -> None:
    """Conflicts of commits that landed are resolved."""
    if upstream_shas:
        s.execute(update(ConflictRow).where(ConflictRow.fork_id == fid,
                                            ConflictRow.upstream_sha.in_(list(upstream_shas)))
                  .values(status="resolved"))


def _info(r: ConflictRow) -> ConflictInfo:
    return ConflictInfo(r.id, Sha(r.upstream_sha), r.subject, r.path, r.kind, r.chain, Sha(r.base_sha),
                        r.key, r.marked, tuple(json.loads(r.tried or "[]")), r.status, r.seen, r.last_seen)


def conflicts(s: Session, fid: int, status: str | None = "open") -> list[ConflictInfo]:
    q = select(ConflictRow).where(ConflictRow.fork_id == fid)
    if status is not None:
        q = q.where(ConflictRow.status == status)
    return [_info(r) for r in s.scalars(q.order_by(ConflictRow.id)).all()]


def conflict(s: Session, fid: int, cid: int) -> ConflictInfo | None:
    r = s.scalar(select(ConflictRow).where(ConflictRow.fork_id == fid, ConflictRow.id == cid))
    return _info(r) if r else None


def set_conflict_status(s: Session, cid: int, status: str) -> None:
    s.execute(update(ConflictRow).where(ConflictRow.id == cid).values(status=status))


def add_attempt(s: Session, fid: int, a: Attempt) -> None:
    s.add(AgentAttemptRow(fork_id=fid, upstream_sha=a.upstream_sha, path=a.path, backend=a.backend,
                          request=a.request, response=a.response, outcome=a.outcome, reason=a.reason,
                          duration_ms=a.duration_ms))


def attempts(s: Session, fid: int, upstream_sha: str | None = None) -> list[AttemptInfo]:
    q = select(AgentAttemptRow).where(AgentAttemptRow.fork_id == fid)
    if upstream_sha is not None:
        q = q.where(AgentAttemptRow.upstream_sha == upstream_sha)
    return [AttemptInfo(r.id, r.path, r.backend, r.outcome, r.reason, r.duration_ms)
            for r in s.scalars(q.order_by(AgentAttemptRow.id)).all()]
