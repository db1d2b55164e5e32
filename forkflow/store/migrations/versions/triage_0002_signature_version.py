"""triage: the signature rules' version of each group and tracked group key, a log's window

Revision ID: triage_0002
Revises: triage_0001
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "triage_0002"
down_revision = "triage_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # rows written before this revision were keyed by the first rules (version 1); they are
    # keyed again on read (forkflow.triage.records)
    for table in ("triage_groups", "triage_tracking"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("sig_version", sa.Integer, nullable=False, server_default="1"))
    # the part of a job's log a failure was keyed from: the store kept only the log's path
    with op.batch_alter_table("triage_failures") as batch:
        batch.add_column(sa.Column("source", sa.Text, nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("triage_failures") as batch:
        batch.drop_column("source")
    for table in ("triage_tracking", "triage_groups"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("sig_version")
