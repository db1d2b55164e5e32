"""triage: failure groups, failures, classifications, tracking issues

Revision ID: triage_0001
Revises: 0002_metric_points
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "triage_0001"
down_revision = "0002_metric_points"
branch_labels = ("triage",)
depends_on = None


def _dt(name: str) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False)


def upgrade() -> None:
    op.create_table(
        "triage_groups",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("key", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("signature", sa.Text, nullable=False),
        _dt("first_seen_at"), _dt("last_seen_at"),
        sa.Column("first_run_id", sa.Integer, nullable=False),
        sa.Column("last_run_id", sa.Integer, nullable=False),
        sa.UniqueConstraint("fork_id", "key"),
    )
    op.create_table(
        "triage_failures",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("run_id", sa.Integer, nullable=False, index=True),
        sa.Column("suite", sa.String(200), nullable=False),
        sa.Column("test_id", sa.Text, nullable=False),
        sa.Column("group_id", sa.Integer, sa.ForeignKey("triage_groups.id"), nullable=False,
                  index=True),
        sa.Column("line", sa.Integer, nullable=False),
        sa.Column("excerpt", sa.Text, nullable=False),
        sa.UniqueConstraint("run_id", "suite", "test_id"),
    )
    op.create_table(
        "triage_classifications",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("failure_id", sa.Integer, sa.ForeignKey("triage_failures.id"), nullable=False,
                  unique=True),
        sa.Column("classification", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("reruns", sa.Text, nullable=False),
        _dt("classified_at"),
    )
    op.create_table(
        "triage_tracking",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("sink", sa.String(16), nullable=False),
        sa.Column("group_key", sa.String(16), nullable=False),
        sa.Column("issue_id", sa.String(200), nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("state", sa.String(8), nullable=False),
        sa.Column("green_streak", sa.Integer, nullable=False),
        sa.Column("last_run_id", sa.Integer, nullable=False),
        _dt("opened_at"), _dt("updated_at"),
        sa.UniqueConstraint("fork_id", "sink", "group_key"),
    )


def downgrade() -> None:
    for name in ("triage_tracking", "triage_classifications", "triage_failures", "triage_groups"):
        op.drop_table(name)
