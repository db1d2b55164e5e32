"""ingest: a landing unit names the L1 gate run that validated it (`forkflow triage RUN`)

Revision ID: ingest_0006
Revises: ingest_0005
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "ingest_0006"
down_revision = "ingest_0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ingest_units") as batch:
        batch.add_column(sa.Column("l1_run_id", sa.Integer, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ingest_units") as batch:
        batch.drop_column("l1_run_id")
