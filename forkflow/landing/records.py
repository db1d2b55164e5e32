"""Store reads and writes of ingestion runs and landing units; returns dataclasses, never rows."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, cast

from sqlalchemy import CursorResult, Table, bindparam, insert, select, update
from sqlalchemy.orm import Session

from forkflow.landing.shapes import SHAPE_VERSION, shape_from_json, shape_to_json
from forkflow.landing.touches import TOUCH_VERSION, touch_from_json, touch_to_json
from forkflow.models import MemberOutcome, RunState, Sha, UnitState
from forkflow.planning.lines import CommitShape
from forkflow.planning.model import Touch
from forkflow.store.schema_ingest import (
    IngestRunRow,
    LandingUnitRow,
    ShapeCacheRow,
    TouchCacheRow,
    UnitMemberRow,
)
from forkflow.store.session import Writer, connection_of, insert_new



@dataclass(frozen=True, slots=True)
class UnitRecord:
    id: int
    run_id: int
    kind: str
    name: str
    base_sha: Sha
    candidate_sha: Sha | None
    status: UnitState
    summary: str
    members: tuple[tuple[Sha, MemberOutcome], ...]  # (upstream sha, outcome) in order
    reasons: dict[Sha, str] = field(default_factory=dict)  # upstream sha -> why it was routed here
    retry_of: int | None = None  # the unit this one re-ran
    l1_run: int | None = None  # the L1 gate run that validated it (`forkflow triage RUN`), when stored


def _now() -> datetime:
    return datetime.now(timezone.utc)


def start_run(s: Writer, fid: int, mode: str, base: Sha) -> int:
    result = cast(CursorResult[Any], connection_of(s).execute(_ADD_RUN, {
        "fork_id": fid, "mode": mode, "base_sha": base, "status": RunState.RUNNING, "started_at": _now()}))
    assert result.inserted_primary_key is not None
    return int(result.inserted_primary_key[0])


def finish_run(s: Writer, run_id: int, status: RunState = RunState.DONE) -> None:
    connection_of(s).execute(update(IngestRunRow).where(IngestRunRow.id == run_id)
                             .values(status=status, finished_at=_now()))


def interrupt_running(s: Session, fid: int) -> None:
    """Mark runs a crash left `running` as interrupted."""
    s.execute(update(IngestRunRow).where(IngestRunRow.fork_id == fid, IngestRunRow.status == RunState.RUNNING)
              .values(status=RunState.INTERRUPTED, finished_at=_now()))


def add_unit(s: Writer, run_id: int, fid: int, kind: str, name: str, base: Sha, candidate: Sha | None,
             status: UnitState, members: Sequence[tuple[Sha, MemberOutcome]], summary: str = "",
             reasons: Mapping[Sha, str] | None = None, retry_of: int | None = None) -> int:
    """A landing unit and its members, each with the routing reason the plan gave it.

    Two prepared statements, not the ORM's unit of work (a run writes hundreds of units)."""
    now = _now()
    result = cast(CursorResult[Any], connection_of(s).execute(_ADD_UNIT, {
        "run_id": run_id, "fork_id": fid, "kind": kind, "name": name, "base_sha": base, "candidate_sha": candidate,
        "status": status, "summary": summary, "retry_of": retry_of, "created_at": now, "updated_at": now}))
    key = result.inserted_primary_key
    assert key is not None
    unit_id = int(key[0])
    _insert_members(s, unit_id, 0, members, reasons)
    return unit_id


_UNITS = cast(Table, LandingUnitRow.__table__)  # a mapped class's table
_MEMBERS = cast(Table, UnitMemberRow.__table__)
# built once: a statement built per call cost more than its transaction (the landing journal's)
_ADD_RUN = insert(cast(Table, IngestRunRow.__table__))
_ADD_UNIT = insert(_UNITS)
_ADD_MEMBERS = insert(_MEMBERS)
_LAST_MEMBER = (select(_MEMBERS.c.position).where(_MEMBERS.c.unit_id == bindparam("uid"))
                .order_by(_MEMBERS.c.position.desc()).limit(1))
_SET_UNIT = (update(_UNITS).where(_UNITS.c.id == bindparam("uid"))
             .values(status=bindparam("new_status", type_=_UNITS.c.status.type),
                     updated_at=bindparam("now", type_=_UNITS.c.updated_at.type)))
_SET_UNIT_SUMMARY = _SET_UNIT.values(summary=bindparam("new_summary", type_=_UNITS.c.summary.type))
_SET_UNIT_L1 = update(_UNITS).where(_UNITS.c.id == bindparam("uid")).values(
    l1_run_id=bindparam("l1_run", type_=_UNITS.c.l1_run_id.type))


def _insert_members(s: Writer, unit_id: int, start: int, members: Sequence[tuple[Sha, MemberOutcome]],
                    reasons: Mapping[Sha, str] | None) -> None:
    if members:
        connection_of(s).execute(_ADD_MEMBERS, [
            {"unit_id": unit_id, "upstream_sha": sha, "position": start + i, "outcome": outcome,
             "reason": (reasons or {}).get(sha, "")} for i, (sha, outcome) in enumerate(members)])


def add_members(s: Writer, unit_id: int, members: Sequence[tuple[Sha, MemberOutcome]],
                reasons: Mapping[Sha, str] | None = None) -> None:
    """More members of a stored unit (commits it left out because they wait for one held back)."""
    last = connection_of(s).execute(_LAST_MEMBER, {"uid": unit_id}).scalar()
    _insert_members(s, unit_id, 0 if last is None else last + 1, members, reasons)


def set_unit(s: Writer, unit_id: int, status: UnitState, summary: str | None = None,
             l1_run: int | None = None) -> None:
    """A unit's status (and summary); `l1_run` links the gate run that decided it."""
    if l1_run is not None:
        connection_of(s).execute(_SET_UNIT_L1, {"uid": unit_id, "l1_run": l1_run})
    if summary is None:
        connection_of(s).execute(_SET_UNIT, {"uid": unit_id, "new_status": status, "now": _now()})
    else:
        connection_of(s).execute(_SET_UNIT_SUMMARY, {"uid": unit_id, "new_status": status, "now": _now(),
                                                     "new_summary": summary})


def _record(s: Session, row: LandingUnitRow) -> UnitRecord:
    members = s.execute(select(UnitMemberRow.upstream_sha, UnitMemberRow.outcome, UnitMemberRow.reason)
                        .where(UnitMemberRow.unit_id == row.id).order_by(UnitMemberRow.position)).all()
    return UnitRecord(row.id, row.run_id, row.kind, row.name, Sha(row.base_sha),
                      Sha(row.candidate_sha) if row.candidate_sha else None, UnitState(row.status), row.summary,
                      tuple((Sha(a), MemberOutcome(b)) for a, b, _ in members), {Sha(a): r for a, _, r in members if r},
                      row.retry_of, row.l1_run_id)


def units(s: Session, fid: int, statuses: Iterable[UnitState] | None = None) -> list[UnitRecord]:
    q = select(LandingUnitRow).where(LandingUnitRow.fork_id == fid)
    if statuses is not None:
        q = q.where(LandingUnitRow.status.in_(list(statuses)))
    return [_record(s, r) for r in s.scalars(q.order_by(LandingUnitRow.id)).all()]


def unit(s: Session, fid: int, unit_id: int) -> UnitRecord | None:
    """One landing unit of the fork, or None."""
    row = s.scalar(select(LandingUnitRow).where(LandingUnitRow.fork_id == fid, LandingUnitRow.id == unit_id))
    return _record(s, row) if row is not None else None


def failed_with(s: Session, fid: int, shas: Sequence[Sha]) -> list[UnitRecord]:
    """The units that failed L1 with any of these upstream commits among their members, oldest first."""
    ids: set[int] = set()
    for i in range(0, len(shas), 500):
        q = (select(UnitMemberRow.unit_id).join(LandingUnitRow, LandingUnitRow.id == UnitMemberRow.unit_id)
             .where(LandingUnitRow.fork_id == fid, LandingUnitRow.status == UnitState.FAILED,
                    UnitMemberRow.upstream_sha.in_(list(shas[i:i + 500]))))
        ids.update(s.scalars(q))
    rows = s.scalars(select(LandingUnitRow).where(LandingUnitRow.id.in_(sorted(ids))).order_by(LandingUnitRow.id))
    return [_record(s, r) for r in rows]


def retries_of(s: Session, unit_id: int) -> list[UnitRecord]:
    """The units that re-ran this one, oldest first."""
    q = select(LandingUnitRow).where(LandingUnitRow.retry_of == unit_id).order_by(LandingUnitRow.id)
    return [_record(s, r) for r in s.scalars(q)]


def routing_reasons(s: Session, unit_ids: Sequence[int]) -> dict[int, dict[Sha, str]]:
    """Per landing unit, why the plan routed each of its upstream commits there (in unit order)."""
    out: dict[int, dict[Sha, str]] = {i: {} for i in unit_ids}
    ids = list(unit_ids)
    for i in range(0, len(ids), 500):
        q = (select(UnitMemberRow.unit_id, UnitMemberRow.upstream_sha, UnitMemberRow.reason)
             .where(UnitMemberRow.unit_id.in_(ids[i:i + 500]))
             .order_by(UnitMemberRow.unit_id, UnitMemberRow.position))
        for unit_id, sha, reason in s.execute(q):
            out[unit_id][Sha(sha)] = reason
    return out


def cached_touches(s: Session, shas: Sequence[Sha]) -> dict[Sha, Touch]:
    out: dict[Sha, Touch] = {}
    for i in range(0, len(shas), 500):
        q = select(TouchCacheRow).where(TouchCacheRow.sha.in_(list(shas[i:i + 500])),
                                        TouchCacheRow.version == TOUCH_VERSION)
        for r in s.scalars(q):
            out[Sha(r.sha)] = touch_from_json(r.payload)
    return out


def save_touches(s: Session, touches: dict[Sha, Touch]) -> None:
    """Cache touches by sha (one bulk insert; rows of another version are replaced)."""
    # an upsert: the cache is shared by every fork of the store, which may write the same commit at once
    insert_new(s, TouchCacheRow.__table__, [{"sha": sha, "version": TOUCH_VERSION, "payload": touch_to_json(t)}
                                            for sha, t in touches.items()], update=("version", "payload"))


def cached_shapes(s: Session, shas: Sequence[Sha]) -> dict[Sha, CommitShape]:
    """The cached shapes of `shas` that were read by this reader version."""
    out: dict[Sha, CommitShape] = {}
    for i in range(0, len(shas), 500):
        q = select(ShapeCacheRow.sha, ShapeCacheRow.payload).where(
            ShapeCacheRow.sha.in_(list(shas[i:i + 500])), ShapeCacheRow.version == SHAPE_VERSION)
        for sha, payload in s.execute(q):
            out[Sha(sha)] = shape_from_json(Sha(sha), payload)
    return out


def save_shapes(s: Session, shapes: Sequence[CommitShape]) -> None:
    """Cache shapes by sha; a shape with missing blobs is not kept (a later fetch may bring them)."""
    keep = {x.sha: x for x in shapes if not x.missing}
    # an upsert: the cache is shared by every fork of the store, which may write the same commit at once
    insert_new(s, ShapeCacheRow.__table__, [{"sha": sha, "version": SHAPE_VERSION, "payload": shape_to_json(x)}
                                            for sha, x in keep.items()], update=("version", "payload"))
