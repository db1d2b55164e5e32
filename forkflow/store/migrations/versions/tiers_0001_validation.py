"""validation runs, jobs, per-test outcomes, L3 requests and sign-offs

Revision ID: tiers_0001
Revises: 0002_metric_points
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "tiers_0001"
down_revision = "0002_metric_points"
branch_labels = ("tiers",)
depends_on = None


def _when(name: str, nullable: bool = False) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "validation_runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("tier", sa.String(4), nullable=False),
        sa.Column("rev", sa.String(64), nullable=False),
        sa.Column("base", sa.String(64), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("runner", sa.String(32), nullable=False),
        sa.Column("trigger", sa.String(32), nullable=False),
        _when("started_at"), _when("finished_at", True),
        sa.Column("commit_date", sa.Integer, nullable=False),
        sa.Column("changed_files", sa.Text, nullable=False),
        sa.Column("inventory", sa.Text, nullable=False),
        sa.Column("selection", sa.Text, nullable=False),
        sa.Column("findings", sa.Text, nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("parent_run_id", sa.Integer, nullable=True),
        sa.Column("l3_request_id", sa.Integer, nullable=True, index=True),
    )
    op.create_index("ix_validation_runs_fork_tier_rev", "validation_runs", ["fork_id", "tier", "rev"])
    op.create_table(
        "validation_jobs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("validation_runs.id"), nullable=False, index=True),
        sa.Column("suite", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("command", sa.Text, nullable=False),
        sa.Column("returncode", sa.Integer, nullable=True),
        sa.Column("duration_s", sa.Float, nullable=False),
        sa.Column("log_path", sa.Text, nullable=False),
        sa.Column("report_path", sa.Text, nullable=False),
        sa.Column("artifact_dir", sa.Text, nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("narrowed", sa.Integer, nullable=False),
        sa.Column("selected", sa.Text, nullable=False),
        sa.Column("tests_reported", sa.Integer, nullable=False),
        sa.Column("tests_ran", sa.Integer, nullable=False),
        sa.Column("tests_counted", sa.Integer, nullable=True),
        sa.Column("tests_expected", sa.Integer, nullable=True),
        sa.Column("findings", sa.Text, nullable=False),
        sa.Column("metrics", sa.Text, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        _when("finished_at", True),
    )
    op.create_table(
        "test_outcomes",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("validation_runs.id"), nullable=False, index=True),
        sa.Column("job_id", sa.Integer, sa.ForeignKey("validation_jobs.id"), nullable=False, index=True),
        sa.Column("suite", sa.String(200), nullable=False),
        sa.Column("test_id", sa.Text, nullable=False),
        sa.Column("outcome", sa.String(8), nullable=False),
        sa.Column("duration_s", sa.Float, nullable=False),
        sa.Column("message", sa.Text, nullable=False),
    )
    op.create_index("ix_test_outcomes_suite_test", "test_outcomes", ["suite", "test_id"])
    op.create_table(
        "l3_requests",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("suite", sa.String(200), nullable=False),
        sa.Column("rev", sa.String(64), nullable=False),
        sa.Column("requested_by", sa.String(200), nullable=False),
        sa.Column("note", sa.Text, nullable=False),
        _when("requested_at"),
    )
    op.create_table(
        "l3_signoffs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("request_id", sa.Integer, sa.ForeignKey("l3_requests.id"), nullable=False, index=True),
        sa.Column("run_id", sa.Integer, nullable=True),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("verdict", sa.String(8), nullable=False),
        sa.Column("note", sa.Text, nullable=False),
        _when("signed_at"),
    )


def downgrade() -> None:
    for name in ("l3_signoffs", "l3_requests", "test_outcomes", "validation_jobs", "validation_runs"):
        op.drop_table(name)
