"""Tables of conflict resolution: each resolver rule's backtest on the fork (conflicts/trust.py)."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from forkflow.store.schema import Base, UtcDateTime, utcnow


class RuleRecordRow(Base):
    """One resolver rule's record on one fork: its past answers as the fork's engineers committed
    them or not.  Rewritten whole by each backtest (`forkflow conflicts rules`, `ingest`)."""

    __tablename__ = "ingest_rule_records"
    __table_args__ = (UniqueConstraint("fork_id", "rule"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    rule: Mapped[str] = mapped_column(String(200))
    identical: Mapped[int] = mapped_column(Integer, default=0)
    different: Mapped[int] = mapped_column(Integer, default=0)
    files: Mapped[int] = mapped_column(Integer, default=0)  # past conflicted files the backtest replayed
    computed_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
