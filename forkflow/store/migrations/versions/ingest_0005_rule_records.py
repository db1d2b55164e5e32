"""ingest: each resolver rule's backtest on the fork, for the trust gate

Revision ID: ingest_0005
Revises: ingest_0004
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "ingest_0005"
down_revision = "ingest_0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ingest_rule_records",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("rule", sa.String(200), nullable=False),
        sa.Column("identical", sa.Integer, nullable=False),
        sa.Column("different", sa.Integer, nullable=False),
        sa.Column("files", sa.Integer, nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("fork_id", "rule"),
    )


def downgrade() -> None:
    op.drop_table("ingest_rule_records")
