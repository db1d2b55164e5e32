"""ingest: a landing unit re-run from an earlier one (`forkflow ingest --unit ID`, the dashboard)

Revision ID: ingest_0003
Revises: ingest_0002
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "ingest_0003"
down_revision = "ingest_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ingest_units") as batch:
        batch.add_column(sa.Column("retry_of", sa.Integer, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ingest_units") as batch:
        batch.drop_column("retry_of")
