"""ingest: the routing reason of every upstream commit in a landing unit

Revision ID: ingest_0002
Revises: ingest_0001
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "ingest_0002"
down_revision = "ingest_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ingest_unit_members") as batch:
        batch.add_column(sa.Column("reason", sa.Text, nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("ingest_unit_members") as batch:
        batch.drop_column("reason")
