"""decisions: review_proposals, the pull / merge request of each landing unit in review

Revision ID: decisions_0002
Revises: decisions_0001
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "decisions_0002"
down_revision = "decisions_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "review_proposals",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), index=True, nullable=False),
        sa.Column("unit_id", sa.Integer, nullable=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("url", sa.Text, nullable=False, server_default=""),
        sa.Column("branch", sa.String(255), nullable=False),
        sa.Column("candidate", sa.String(64), nullable=False),
        sa.Column("base", sa.String(64), nullable=False),
        sa.Column("members", sa.Text, nullable=False, server_default="[]"),
        sa.Column("state", sa.String(16), nullable=False, server_default="open"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("review_proposals")
