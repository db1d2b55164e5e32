"""Tables of triage: failure groups, failures, their classifications, tracking issues.

Read and write them through `forkflow.triage.records` (dataclasses, never these rows).
"""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from forkflow.store.schema import Base, UtcDateTime, utcnow


class FailureGroupRow(Base):
    """One signature: the failures that share it, across tests and runs."""

    __tablename__ = "triage_groups"
    __table_args__ = (UniqueConstraint("fork_id", "key"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    key: Mapped[str] = mapped_column(String(16))
    kind: Mapped[str] = mapped_column(String(16))
    signature: Mapped[str] = mapped_column(Text)
    # the version of the signature rules that computed `key` (triage.signature.SIGNATURE_VERSION)
    sig_version: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    first_seen_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    first_run_id: Mapped[int] = mapped_column(Integer)
    last_run_id: Mapped[int] = mapped_column(Integer)


class FailureRow(Base):
    """One failing test (or job) of one validation run, with its signature's group."""

    __tablename__ = "triage_failures"
    __table_args__ = (UniqueConstraint("run_id", "suite", "test_id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    run_id: Mapped[int] = mapped_column(Integer, index=True)
    suite: Mapped[str] = mapped_column(String(200))
    test_id: Mapped[str] = mapped_column(Text)
    group_id: Mapped[int] = mapped_column(ForeignKey("triage_groups.id"), index=True)
    line: Mapped[int] = mapped_column(Integer, default=0)
    excerpt: Mapped[str] = mapped_column(Text, default="")
    # a failure keyed from its job's log: the log's window around the error (signature.log_window),
    # to key it again under newer rules once the log is gone; "" when keyed from its message
    source: Mapped[str] = mapped_column(Text, default="", server_default="")


class ClassificationRow(Base):
    """The verdict on one failure: NEW, BROKEN_TRUNK, FLAKY or INFRA, and why."""

    __tablename__ = "triage_classifications"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    failure_id: Mapped[int] = mapped_column(ForeignKey("triage_failures.id"), unique=True)
    classification: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    reruns: Mapped[str] = mapped_column(Text, default="[]")  # JSON list of bools (passed?)
    classified_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class TrackingIssueRow(Base):
    """The tracking issue of one failure group in one sink."""

    __tablename__ = "triage_tracking"
    __table_args__ = (UniqueConstraint("fork_id", "sink", "group_key"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    sink: Mapped[str] = mapped_column(String(16))
    group_key: Mapped[str] = mapped_column(String(16))
    sig_version: Mapped[int] = mapped_column(Integer, default=1, server_default="1")  # of group_key
    issue_id: Mapped[str] = mapped_column(String(200))
    url: Mapped[str] = mapped_column(Text, default="")
    state: Mapped[str] = mapped_column(String(8))  # open | closed
    green_streak: Mapped[int] = mapped_column(Integer, default=0)
    last_run_id: Mapped[int] = mapped_column(Integer)  # the newest nightly that saw it or was green
    opened_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
