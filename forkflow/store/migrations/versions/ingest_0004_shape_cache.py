"""ingest: a cache of each commit's hunks and names, for dependency-exact planning

Revision ID: ingest_0004
Revises: ingest_0003
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "ingest_0004"
down_revision = "ingest_0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ingest_shape_cache",
        sa.Column("sha", sa.String(64), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("ingest_shape_cache")
