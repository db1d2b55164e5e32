"""ingest: a fork's write lease (fencing generation) and the decisions waiting for a push

Revision ID: ingest_0007
Revises: ingest_0006
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "ingest_0007"
down_revision = "ingest_0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fork_leases",
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), primary_key=True),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("holder", sa.String(400), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "ingest_pending_decisions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("upstream_sha", sa.String(64), nullable=False),
        sa.Column("tip_sha", sa.String(64), nullable=False),
        sa.Column("unit_id", sa.Integer, nullable=True),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("fork_id", "upstream_sha"),
    )


def downgrade() -> None:
    op.drop_table("ingest_pending_decisions")
    op.drop_table("fork_leases")
