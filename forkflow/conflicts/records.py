"""Store reads and writes of conflicts, recorded resolutions and agent attempts."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from typing import Any, cast

from sqlalchemy import CursorResult, Table, bindparam, insert, select, update
from sqlalchemy.orm import Session

from forkflow.conflicts.resolvers.agent import Attempt
from forkflow.models import Sha
from forkflow.store.schema_ingest import AgentAttemptRow, ConflictRow, ResolutionRow
from forkflow.store.session import Writer, connection_of, insert_new


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


def lookup_resolution(s: Writer, key: str) -> tuple[list[str], str] | None:
    """A prepared statement (the landing asks once per conflicted file; an ORM query was ten times
    the cost of the lookup itself)."""
    row = connection_of(s).execute(_FIND_RESOLUTION, {"k": key}).first()
    return (list(json.loads(row.regions)), row.source) if row else None


def save_resolution(s: Writer, key: str, path: str, texts: Sequence[str], source: str) -> None:
    """Remember how a conflict was resolved; a person's resolution replaces an automatic one."""
    conn = connection_of(s)
    row = conn.execute(_FIND_RESOLUTION, {"k": key}).first()
    if row is None:
        insert_new(conn, _RESOLUTIONS, [{"key": key, "path": path, "regions": json.dumps(list(texts)),  # shared by forks
                                         "source": source}], keys=("key",))
    elif source == "person" or row.source != "person":
        conn.execute(update(_RESOLUTIONS).where(_RESOLUTIONS.c.id == row.id)
                     .values(regions=json.dumps(list(texts)), source=source, path=path))


def upsert_conflict(s: Writer, fid: int, *, upstream_sha: Sha, subject: str, path: str, kind: str,
                    chain: str, base_sha: Sha, key: str, marked: str, tried: Sequence[str]) -> int:
    """Keep one open record per (upstream commit, path); seeing it again updates it."""
    conn = connection_of(s)
    row = conn.execute(_FIND_CONFLICT, {"fid": fid, "sha": upstream_sha, "p": path}).first()
    now = datetime.now(timezone.utc)
    values = {"subject": subject, "kind": kind, "chain": chain, "base_sha": base_sha, "key": key, "marked": marked,
              "tried": json.dumps(list(tried)), "status": "open", "last_seen": now}
    if row is None:
        result = cast(CursorResult[Any], conn.execute(insert(_CONFLICTS), {
            **values, "fork_id": fid, "upstream_sha": upstream_sha, "path": path, "seen": 1, "first_seen": now}))
        assert result.inserted_primary_key is not None
        return int(result.inserted_primary_key[0])
    conn.execute(update(_CONFLICTS).where(_CONFLICTS.c.id == row.id).values(**values, seen=(row.seen or 0) + 1))
    return int(row.id)


def close_conflicts(s: Writer, fid: int, upstream_shas: Sequence[str]) -> None:
    """Conflicts of commits that landed are resolved."""
    if upstream_shas:
        connection_of(s).execute(_CLOSE_CONFLICTS, {"fid": fid, "shas": list(upstream_shas)})


_CONFLICTS = cast(Table, ConflictRow.__table__)  # a mapped class's table
_RESOLUTIONS = cast(Table, ResolutionRow.__table__)
# statements built once (the landing journal runs them for every unit; see Store.connection_scope)
_FIND_RESOLUTION = select(_RESOLUTIONS.c.id, _RESOLUTIONS.c.regions, _RESOLUTIONS.c.source).where(
    _RESOLUTIONS.c.key == bindparam("k"))
_FIND_CONFLICT = select(_CONFLICTS.c.id, _CONFLICTS.c.seen).where(
    _CONFLICTS.c.fork_id == bindparam("fid"), _CONFLICTS.c.upstream_sha == bindparam("sha"),
    _CONFLICTS.c.path == bindparam("p"))
_CLOSE_CONFLICTS = (update(_CONFLICTS).where(_CONFLICTS.c.fork_id == bindparam("fid"),
                                             _CONFLICTS.c.upstream_sha.in_(bindparam("shas", expanding=True)))
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


RULE_BACKEND = "rule"  # trust.RULE_BACKEND: a resolver rule's proposal, logged beside the agent's attempts


def attempts(s: Session, fid: int, upstream_sha: str | None = None) -> list[AttemptInfo]:
    """The agent's attempts (a rule's proposals share the log, and are shown as the proposal)."""
    q = select(AgentAttemptRow).where(AgentAttemptRow.fork_id == fid, AgentAttemptRow.backend != RULE_BACKEND)
    if upstream_sha is not None:
        q = q.where(AgentAttemptRow.upstream_sha == upstream_sha)
    return [AttemptInfo(r.id, r.path, r.backend, r.outcome, r.reason, r.duration_ms)
            for r in s.scalars(q.order_by(AgentAttemptRow.id)).all()]
