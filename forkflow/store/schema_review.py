"""Review before landing: each proposed landing unit's pull / merge request."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from forkflow.store.schema import Base, UtcDateTime, utcnow


class ReviewRow(Base):
    __tablename__ = "review_proposals"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    unit_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    name: Mapped[str] = mapped_column(String(200))
    number: Mapped[int] = mapped_column(Integer)
    url: Mapped[str] = mapped_column(Text, default="")
    branch: Mapped[str] = mapped_column(String(255))
    candidate: Mapped[str] = mapped_column(String(64))
    base: Mapped[str] = mapped_column(String(64))
    members: Mapped[str] = mapped_column(Text, default="[]")  # JSON list of upstream shas
    state: Mapped[str] = mapped_column(String(16), default="open")  # open | landed | closed | stale
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
