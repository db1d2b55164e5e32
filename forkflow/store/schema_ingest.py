"""Tables of ingestion: runs, landing units and their members, conflicts, recorded resolutions,
agent attempts, and a cache of what each commit touches."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from forkflow.store.schema import Base, UtcDateTime, utcnow


class IngestRunRow(Base):
    __tablename__ = "ingest_runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    mode: Mapped[str] = mapped_column(String(16))  # dry-run | validate | land
    base_sha: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default="running")  # running | done
    started_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)


class LandingUnitRow(Base):
    """One landing unit of one run: picked, validated, landed (or why not)."""

    __tablename__ = "ingest_units"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("ingest_runs.id"), index=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    kind: Mapped[str] = mapped_column(String(16))  # bundle | chain
    name: Mapped[str] = mapped_column(String(400))
    base_sha: Mapped[str] = mapped_column(String(64))
    candidate_sha: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    # picking | passed | failed | landed | abandoned | conflict | empty | candidate
    status: Mapped[str] = mapped_column(String(16))
    summary: Mapped[str] = mapped_column(Text, default="")
    retry_of: Mapped[int | None] = mapped_column(Integer, nullable=True)  # the unit this one re-ran
    l1_run_id: Mapped[int | None] = mapped_column(Integer, nullable=True)  # its L1 gate run (validation_runs.id)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class UnitMemberRow(Base):
    __tablename__ = "ingest_unit_members"
    __table_args__ = (UniqueConstraint("unit_id", "upstream_sha"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    unit_id: Mapped[int] = mapped_column(ForeignKey("ingest_units.id"), index=True)
    upstream_sha: Mapped[str] = mapped_column(String(64), index=True)
    position: Mapped[int] = mapped_column(Integer)
    outcome: Mapped[str] = mapped_column(String(16))  # applied | resolved | empty | conflict
    # why the planner routed this commit into this unit (the overlapping file or symbol, the conflict)
    reason: Mapped[str] = mapped_column(Text, default="", server_default="")


class ConflictRow(Base):
    """A conflict no resolver settled (or one that was settled), kept for a person."""

    __tablename__ = "ingest_conflicts"
    __table_args__ = (UniqueConstraint("fork_id", "upstream_sha", "path"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    upstream_sha: Mapped[str] = mapped_column(String(64))
    subject: Mapped[str] = mapped_column(Text, default="")
    path: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(32))
    chain: Mapped[str] = mapped_column(String(400), default="")
    base_sha: Mapped[str] = mapped_column(String(64))  # the fork tip it was picked onto
    key: Mapped[str] = mapped_column(String(64), default="")  # recorded-resolution key
    marked: Mapped[str] = mapped_column(Text, default="")  # diff3 text with conflict markers
    tried: Mapped[str] = mapped_column(Text, default="")  # what each resolver said
    status: Mapped[str] = mapped_column(String(16), default="open")  # open | resolved
    seen: Mapped[int] = mapped_column(Integer, default=1)
    first_seen: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class ResolutionRow(Base):
    """A resolution of conflict regions, keyed by the regions' content (like git rerere)."""

    __tablename__ = "ingest_resolutions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    path: Mapped[str] = mapped_column(Text, default="")
    regions: Mapped[str] = mapped_column(Text)  # JSON list of resolved region texts
    source: Mapped[str] = mapped_column(String(16))  # person | trivial | agent
    decided_by: Mapped[str] = mapped_column(String(200), default="", server_default="")  # "Name <email>"
    approved_by: Mapped[str] = mapped_column(String(200), default="", server_default="")  # an approved proposal's
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class AgentAttemptRow(Base):
    """Every agent call: what it was given, what it answered, and the guardrails' verdict."""

    __tablename__ = "ingest_agent_attempts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    upstream_sha: Mapped[str] = mapped_column(String(64))
    path: Mapped[str] = mapped_column(Text)
    backend: Mapped[str] = mapped_column(String(16))  # command | http
    request: Mapped[str] = mapped_column(Text)
    response: Mapped[str] = mapped_column(Text)
    outcome: Mapped[str] = mapped_column(String(16))  # accepted | rejected | error | timeout
    reason: Mapped[str] = mapped_column(Text, default="")
    duration_ms: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class TouchCacheRow(Base):
    """What a commit touches (files, symbols); never changes for its sha and parser version."""

    __tablename__ = "ingest_touch_cache"
    sha: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    payload: Mapped[str] = mapped_column(Text)


class ShapeCacheRow(Base):
    """What a commit changes, line by line (hunks, names defined and used), for the dependency
    walk; never changes for its sha and reader version, so it is read once per commit (issue 11)."""

    __tablename__ = "ingest_shape_cache"
    sha: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    payload: Mapped[str] = mapped_column(Text)


class ForkLeaseRow(Base):
    """The fork's write lease: the generation a writing run took with the fork's lock.  Each landing
    record and push compares it in its own transaction (`landing/shared.py`): a run whose
    generation is no longer the row's lost the lease to another writer and writes nothing more."""

    __tablename__ = "fork_leases"
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), primary_key=True)
    generation: Mapped[int] = mapped_column(Integer, default=0)
    holder: Mapped[str] = mapped_column(String(400), default="")
    taken_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class PendingDecisionRow(Base):
    """A decision of a landing that is on the running clone's fork branch but not yet on the shared
    one (`--push`): other clones do not see it as a decision until the push lands it there."""

    __tablename__ = "ingest_pending_decisions"
    __table_args__ = (UniqueConstraint("fork_id", "upstream_sha"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    upstream_sha: Mapped[str] = mapped_column(String(64))
    tip_sha: Mapped[str] = mapped_column(String(64))  # the fork commit that must be on the shared branch
    unit_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    payload: Mapped[str] = mapped_column(Text)  # the RecordedDecision, as JSON
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
