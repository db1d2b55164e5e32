"""Tables of hierarchical validation: runs, jobs, per-test outcomes, L3 requests and sign-offs.

Read them through `forkflow.tiers.records` (dataclasses, never these rows).
"""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from forkflow.store.schema import Base, UtcDateTime, utcnow


class ValidationRunRow(Base):
    """One `forkflow validate` (or nightly, L3 run, rerun) of one tier at one fork commit."""

    __tablename__ = "validation_runs"
    __table_args__ = (Index("ix_validation_runs_fork_tier_rev", "fork_id", "tier", "rev"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    tier: Mapped[str] = mapped_column(String(4))
    rev: Mapped[str] = mapped_column(String(64))
    base: Mapped[str | None] = mapped_column(String(64), nullable=True)
    status: Mapped[str] = mapped_column(String(16))  # RUNNING | PASS | FAIL | INFRA
    runner: Mapped[str] = mapped_column(String(32))
    trigger: Mapped[str] = mapped_column(String(32), default="validate")  # validate|nightly|l3|rerun|gate
    started_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    commit_date: Mapped[int] = mapped_column(Integer, default=0)
    changed_files: Mapped[str] = mapped_column(Text, default="[]")  # JSON list
    inventory: Mapped[str] = mapped_column(Text, default="[]")  # JSON: the tier's configured suites
    selection: Mapped[str] = mapped_column(Text, default="{}")  # JSON: per suite, files + reasons
    findings: Mapped[str] = mapped_column(Text, default="[]")  # JSON: run-level saturation findings
    summary: Mapped[str] = mapped_column(Text, default="")
    parent_run_id: Mapped[int | None] = mapped_column(Integer, nullable=True)  # a rerun's origin
    l3_request_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)


class ValidationJobRow(Base):
    """One suite's job inside a run, with its log and artifacts on disk."""

    __tablename__ = "validation_jobs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("validation_runs.id"), index=True)
    suite: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))  # PENDING | PASS | FAIL | INFRA
    command: Mapped[str] = mapped_column(Text)
    returncode: Mapped[int | None] = mapped_column(Integer, nullable=True)
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
    log_path: Mapped[str] = mapped_column(Text)
    report_path: Mapped[str] = mapped_column(Text)
    artifact_dir: Mapped[str] = mapped_column(Text)
    message: Mapped[str] = mapped_column(Text, default="")
    narrowed: Mapped[int] = mapped_column(Integer, default=0)  # 1 when test selection applied
    selected: Mapped[str] = mapped_column(Text, default="null")  # JSON list of test files, or null
    tests_reported: Mapped[int] = mapped_column(Integer, default=0)
    tests_ran: Mapped[int] = mapped_column(Integer, default=0)
    tests_counted: Mapped[int | None] = mapped_column(Integer, nullable=True)  # from the output
    tests_expected: Mapped[int | None] = mapped_column(Integer, nullable=True)
    findings: Mapped[str] = mapped_column(Text, default="[]")  # JSON list of saturation findings
    metrics: Mapped[str] = mapped_column(Text, default="[]")  # JSON list of metrics reported
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)


class TestOutcomeRow(Base):
    """One test's outcome in one job."""

    __test__ = False  # not a pytest class
    __tablename__ = "test_outcomes"
    __table_args__ = (Index("ix_test_outcomes_suite_test", "suite", "test_id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("validation_runs.id"), index=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("validation_jobs.id"), index=True)
    suite: Mapped[str] = mapped_column(String(200))
    test_id: Mapped[str] = mapped_column(Text)
    outcome: Mapped[str] = mapped_column(String(8))  # PASS | FAIL | SKIP | ERROR
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
    message: Mapped[str] = mapped_column(Text, default="")


class L3RequestRow(Base):
    __tablename__ = "l3_requests"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fork_id: Mapped[int] = mapped_column(ForeignKey("forks.id"), index=True)
    suite: Mapped[str] = mapped_column(String(200))
    rev: Mapped[str] = mapped_column(String(64))
    requested_by: Mapped[str] = mapped_column(String(200), default="")
    note: Mapped[str] = mapped_column(Text, default="")
    requested_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class L3SignoffRow(Base):
    __tablename__ = "l3_signoffs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    request_id: Mapped[int] = mapped_column(ForeignKey("l3_requests.id"), index=True)
    run_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    owner: Mapped[str] = mapped_column(String(200))
    verdict: Mapped[str] = mapped_column(String(8))  # accept | reject
    note: Mapped[str] = mapped_column(Text, default="")
    signed_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
