"""Tables of regression detection and bisection: alerts, their members, bisections."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from forkflow.store.schema import Base, UtcDateTime, utcnow


class RegressAlertRow(Base):
    """A change on one or more L2 metrics over one commit range."""

    __tablename__ = "regress_alerts"
    __table_args__ = (UniqueConstraint("fork_id", "good_rev", "bad_rev"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    good_rev: Mapped[str] = mapped_column(String(64))
    bad_rev: Mapped[str] = mapped_column(String(64))
    direction: Mapped[str] = mapped_column(String(16))   # regression | improvement
    status: Mapped[str] = mapped_column(String(16))      # open | bisected | no-culprit
    opened_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class RegressAlertMemberRow(Base):
    """One metric's change inside an alert."""

    __tablename__ = "regress_alert_members"
    __table_args__ = (UniqueConstraint("alert_id", "metric"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    alert_id: Mapped[int] = mapped_column(ForeignKey("regress_alerts.id", ondelete="CASCADE"), index=True)
    metric: Mapped[str] = mapped_column(String(400))
    unit: Mapped[str] = mapped_column(String(32), default="")
    better: Mapped[str] = mapped_column(String(8))
    good_rev: Mapped[str] = mapped_column(String(64))
    bad_rev: Mapped[str] = mapped_column(String(64))
    before: Mapped[float] = mapped_column(Float)
    after: Mapped[float] = mapped_column(Float)
    magnitude: Mapped[float] = mapped_column(Float)
    pvalue: Mapped[float] = mapped_column(Float)
    direction: Mapped[str] = mapped_column(String(16))


class BisectionRow(Base):
    """One bisection: its range, what it found, how sure, and the measurements behind it."""

    __tablename__ = "regress_bisections"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    alert_id: Mapped[int | None] = mapped_column(ForeignKey("regress_alerts.id"), nullable=True, index=True)
    metric: Mapped[str] = mapped_column(String(400))
    mode: Mapped[str] = mapped_column(String(16))        # perf | pass-fail
    good_rev: Mapped[str] = mapped_column(String(64))
    bad_rev: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(24))
    culprit_fork_sha: Mapped[str | None] = mapped_column(String(64), nullable=True)
    culprit_unit: Mapped[str | None] = mapped_column(String(64), nullable=True)
    culprit_upstream_sha: Mapped[str | None] = mapped_column(String(64), nullable=True)
    culprit_pr: Mapped[int | None] = mapped_column(Integer, nullable=True)
    confidence: Mapped[float] = mapped_column(Float, default=0.0)
    rounds: Mapped[int] = mapped_column(Integer, default=0)
    measurement_count: Mapped[int] = mapped_column(Integer, default=0)
    message: Mapped[str] = mapped_column(Text, default="")
    result: Mapped[str] = mapped_column(Text, default="{}")  # JSON: steps, measurements, skipped
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
