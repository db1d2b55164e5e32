"""metric points: the L2 series that validation writes and regression detection reads

Revision ID: 0002_metric_points
Revises: 0001_foundation
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_metric_points"
down_revision = "0001_foundation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "metric_points",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("name", sa.String(400), nullable=False, index=True),
        sa.Column("rev", sa.String(64), nullable=False, index=True),
        sa.Column("value", sa.Float, nullable=False),
        sa.Column("unit", sa.String(32), nullable=False),
        sa.Column("better", sa.String(8), nullable=False),
        sa.Column("samples", sa.Text, nullable=False),
        sa.Column("suite", sa.String(200), nullable=False),
        sa.Column("run_id", sa.Integer, nullable=True),
        sa.Column("measured_at", sa.Integer, nullable=False),
        sa.Column("commit_date", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("metric_points")
