"""regress: metric_points.context, what each L2 point was measured with (config, device, versions)

Revision ID: regress_0002
Revises: regress_0001
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "regress_0002"
down_revision = "regress_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("metric_points") as batch:
        batch.add_column(sa.Column("context", sa.Text, nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("metric_points") as batch:
        batch.drop_column("context")
