"""ingest: who settled a recorded resolution and who approved it, for the landed commit's trailers

Revision ID: ingest_0008
Revises: ingest_0007
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "ingest_0008"
down_revision = "ingest_0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ingest_resolutions") as batch:
        batch.add_column(sa.Column("decided_by", sa.String(200), nullable=False, server_default=""))
        batch.add_column(sa.Column("approved_by", sa.String(200), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("ingest_resolutions") as batch:
        batch.drop_column("approved_by")
        batch.drop_column("decided_by")
