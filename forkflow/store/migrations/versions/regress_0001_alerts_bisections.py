"""regress: alerts, alert members, bisections

Revision ID: regress_0001
Revises: 0002_metric_points
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "regress_0001"
down_revision = "0002_metric_points"
branch_labels = ("regress",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "regress_alerts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("good_rev", sa.String(64), nullable=False),
        sa.Column("bad_rev", sa.String(64), nullable=False),
        sa.Column("direction", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("fork_id", "good_rev", "bad_rev"),
    )
    op.create_table(
        "regress_alert_members",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("alert_id", sa.Integer, sa.ForeignKey("regress_alerts.id", ondelete="CASCADE"),
                  nullable=False, index=True),
        sa.Column("metric", sa.String(400), nullable=False),
        sa.Column("unit", sa.String(32), nullable=False),
        sa.Column("better", sa.String(8), nullable=False),
        sa.Column("good_rev", sa.String(64), nullable=False),
        sa.Column("bad_rev", sa.String(64), nullable=False),
        sa.Column("before", sa.Float, nullable=False),
        sa.Column("after", sa.Float, nullable=False),
        sa.Column("magnitude", sa.Float, nullable=False),
        sa.Column("pvalue", sa.Float, nullable=False),
        sa.Column("direction", sa.String(16), nullable=False),
        sa.UniqueConstraint("alert_id", "metric"),
    )
    op.create_table(
        "regress_bisections",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("alert_id", sa.Integer, sa.ForeignKey("regress_alerts.id"), nullable=True, index=True),
        sa.Column("metric", sa.String(400), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("good_rev", sa.String(64), nullable=False),
        sa.Column("bad_rev", sa.String(64), nullable=False),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("culprit_fork_sha", sa.String(64), nullable=True),
        sa.Column("culprit_unit", sa.String(64), nullable=True),
        sa.Column("culprit_upstream_sha", sa.String(64), nullable=True),
        sa.Column("culprit_pr", sa.Integer, nullable=True),
        sa.Column("confidence", sa.Float, nullable=False),
        sa.Column("rounds", sa.Integer, nullable=False),
        sa.Column("measurement_count", sa.Integer, nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("result", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("regress_bisections")
    op.drop_table("regress_alert_members")
    op.drop_table("regress_alerts")
