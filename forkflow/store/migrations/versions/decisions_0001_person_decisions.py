"""decisions: who decided (a person or forkflow), the kind, until when, and the task

Revision ID: decisions_0001
Revises: 0002_metric_points
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "decisions_0001"
down_revision = "0002_metric_points"
branch_labels = ("decisions",)
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("dispositions") as batch:
        batch.add_column(sa.Column("source", sa.String(16), nullable=False, server_default="auto"))
        batch.add_column(sa.Column("verdict", sa.String(16), nullable=False, server_default=""))
        batch.add_column(sa.Column("until", sa.String(32), nullable=True))
        batch.add_column(sa.Column("task", sa.Text, nullable=False, server_default=""))
        batch.add_column(sa.Column("decided_by", sa.String(200), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("dispositions") as batch:
        for name in ("decided_by", "task", "until", "verdict", "source"):
            batch.drop_column(name)
