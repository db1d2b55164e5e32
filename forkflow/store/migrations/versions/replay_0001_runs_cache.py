"""replay: replay runs and the cache of step results

Revision ID: replay_0001
Revises: 0002_metric_points
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "replay_0001"
down_revision = "0002_metric_points"
branch_labels = ("replay",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "replay_runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("since", sa.String(32), nullable=False),
        sa.Column("until", sa.String(32), nullable=False),
        sa.Column("every_seconds", sa.Integer, nullable=False),
        sa.Column("gate", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("report", sa.Text, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_table(
        "replay_cache",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("replay_cache")
    op.drop_table("replay_runs")
