"""SQLAlchemy tables of the foundation: forks, recorded dispositions, snapshots, caches.

Later subsystems add their tables in their own `schema_*.py` modules on the same `Base`,
each with an Alembic migration branch of its own that starts at the foundation revision.
"""
from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class UtcDateTime(TypeDecorator[datetime]):
    """`DateTime(timezone=True)` that reads back aware UTC on every backend: SQLite keeps no zone,
    so its naive values are UTC by construction (written through here)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return value.astimezone(timezone.utc) if value is not None and value.tzinfo else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return value.replace(tzinfo=timezone.utc) if value is not None and value.tzinfo is None else value


class Base(DeclarativeBase):
    pass


class ForkRow(Base):
    __tablename__ = "forks"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(400), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class DispositionRow(Base):
    """A decision forkflow recorded on an upstream commit (picked, skipped, deferred)."""

    __tablename__ = "dispositions"
    __table_args__ = (UniqueConstraint("fork_id", "upstream_sha"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    upstream_sha: Mapped[str] = mapped_column(String(64))
    disposition: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    fork_shas: Mapped[str] = mapped_column(Text, default="[]")  # JSON list
    decided_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    # who decided: "auto" (forkflow: a conflict, an empty pick) or "person" (`forkflow decide`)
    source: Mapped[str] = mapped_column(String(16), default="auto", server_default="auto")
    verdict: Mapped[str] = mapped_column(String(16), default="", server_default="")  # skip/defer/wont-port
    until: Mapped[str | None] = mapped_column(String(32), nullable=True)  # ISO date a deferral ends
    task: Mapped[str] = mapped_column(Text, default="", server_default="")
    decided_by: Mapped[str] = mapped_column(String(200), default="", server_default="")
    chain: Mapped[str] = mapped_column(String(200), default="", server_default="")  # a held commit's chain


class SnapshotRow(Base):
    """One point of the days-behind / backlog series."""

    __tablename__ = "snapshots"
    __table_args__ = (UniqueConstraint("fork_id", "source", "taken_at"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    taken_at: Mapped[datetime] = mapped_column(UtcDateTime())
    source: Mapped[str] = mapped_column(String(16))  # status | backfill
    fork_tip: Mapped[str] = mapped_column(String(64))
    upstream_tip: Mapped[str] = mapped_column(String(64))
    ingestion_point: Mapped[str] = mapped_column(String(64))
    inferred: Mapped[bool] = mapped_column(Boolean)
    days_behind: Mapped[float] = mapped_column(Float)
    backlog: Mapped[int] = mapped_column(Integer)
    counts: Mapped[str] = mapped_column(Text, default="{}")  # JSON


class CommitFactRow(Base):
    """Facts about one commit that never change for its sha (cache keyed by sha)."""

    __tablename__ = "commit_facts"
    sha: Mapped[str] = mapped_column(String(64), primary_key=True)
    patch_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    files: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON list


class LedgerCacheRow(Base):
    """A computed ledger, keyed by fork tip, upstream tip, recorded decisions and config."""

    __tablename__ = "ledger_cache"
    key: Mapped[str] = mapped_column(String(128), primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    payload: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class MetricPointRow(Base):
    """One L2 measurement; the series of a metric is its rows ordered by commit date."""

    __tablename__ = "metric_points"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    name: Mapped[str] = mapped_column(String(400), index=True)
    rev: Mapped[str] = mapped_column(String(64), index=True)
    value: Mapped[float] = mapped_column(Float)
    unit: Mapped[str] = mapped_column(String(32), default="")
    better: Mapped[str] = mapped_column(String(8))
    samples: Mapped[str] = mapped_column(Text, default="[]")  # JSON list of floats
    suite: Mapped[str] = mapped_column(String(200), default="")
    run_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    measured_at: Mapped[int] = mapped_column(Integer)
    commit_date: Mapped[int] = mapped_column(Integer)
    # JSON object: what it was measured with (kernel config, device, driver, versions, clocks)
    context: Mapped[str] = mapped_column(Text, default="{}", server_default="{}")
