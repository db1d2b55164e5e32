"""Tables of `forkflow replay`: finished and running replays, and a cache of step results by SHA."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from forkflow.store.schema import Base, UtcDateTime, utcnow


class ReplayRunRow(Base):
    """One `forkflow replay`: its window, its gate, and (once done) its whole report as JSON."""

    __tablename__ = "replay_runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    since: Mapped[str] = mapped_column(String(32))
    until: Mapped[str] = mapped_column(String(32))
    every_seconds: Mapped[int] = mapped_column(Integer)
    gate: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16), default="running")  # running | done
    report: Mapped[str] = mapped_column(Text, default="")
    started_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)


class ReplayCacheRow(Base):
    """What one step (or one comparison with a fork pick) computed, keyed by the SHAs it read."""

    __tablename__ = "replay_cache"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # step | compare | resolved
    payload: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
