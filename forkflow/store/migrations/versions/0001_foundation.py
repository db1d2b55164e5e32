"""foundation: forks, dispositions, snapshots, commit facts, ledger cache

Revision ID: 0001_foundation
Revises:
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_foundation"
down_revision = None
branch_labels = ("foundation",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "forks",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(400), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "dispositions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("upstream_sha", sa.String(64), nullable=False),
        sa.Column("disposition", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("fork_shas", sa.Text, nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("fork_id", "upstream_sha"),
    )
    op.create_table(
        "snapshots",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("fork_tip", sa.String(64), nullable=False),
        sa.Column("upstream_tip", sa.String(64), nullable=False),
        sa.Column("ingestion_point", sa.String(64), nullable=False),
        sa.Column("inferred", sa.Boolean, nullable=False),
        sa.Column("days_behind", sa.Float, nullable=False),
        sa.Column("backlog", sa.Integer, nullable=False),
        sa.Column("counts", sa.Text, nullable=False),
        sa.UniqueConstraint("fork_id", "source", "taken_at"),
    )
    op.create_table(
        "commit_facts",
        sa.Column("sha", sa.String(64), primary_key=True),
        sa.Column("patch_id", sa.String(64), nullable=True),
        sa.Column("files", sa.Text, nullable=True),
    )
    op.create_table(
        "ledger_cache",
        sa.Column("key", sa.String(128), primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    for table in ("ledger_cache", "commit_facts", "snapshots", "dispositions", "forks"):
        op.drop_table(table)
