"""ingest: runs, landing units, members, conflicts, resolutions, agent attempts, touch cache

Revision ID: ingest_0001
Revises: 0002_metric_points
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "ingest_0001"
down_revision = "0002_metric_points"
branch_labels = ("ingest",)
depends_on = None


def _when(name: str, nullable: bool = False) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "ingest_runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("base_sha", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        _when("started_at"), _when("finished_at", nullable=True),
    )
    op.create_table(
        "ingest_units",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("ingest_runs.id"), nullable=False, index=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(400), nullable=False),
        sa.Column("base_sha", sa.String(64), nullable=False),
        sa.Column("candidate_sha", sa.String(64), nullable=True, index=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        _when("created_at"), _when("updated_at"),
    )
    op.create_table(
        "ingest_unit_members",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("unit_id", sa.Integer, sa.ForeignKey("ingest_units.id"), nullable=False, index=True),
        sa.Column("upstream_sha", sa.String(64), nullable=False, index=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.UniqueConstraint("unit_id", "upstream_sha"),
    )
    op.create_table(
        "ingest_conflicts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("upstream_sha", sa.String(64), nullable=False),
        sa.Column("subject", sa.Text, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("chain", sa.String(400), nullable=False),
        sa.Column("base_sha", sa.String(64), nullable=False),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("marked", sa.Text, nullable=False),
        sa.Column("tried", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("seen", sa.Integer, nullable=False),
        _when("first_seen"), _when("last_seen"),
        sa.UniqueConstraint("fork_id", "upstream_sha", "path"),
    )
    op.create_table(
        "ingest_resolutions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("key", sa.String(64), nullable=False, unique=True),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("regions", sa.Text, nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        _when("created_at"),
    )
    op.create_table(
        "ingest_agent_attempts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fork_id", sa.Integer, sa.ForeignKey("forks.id"), nullable=False, index=True),
        sa.Column("upstream_sha", sa.String(64), nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("backend", sa.String(16), nullable=False),
        sa.Column("request", sa.Text, nullable=False),
        sa.Column("response", sa.Text, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("duration_ms", sa.Integer, nullable=False),
        _when("created_at"),
    )
    op.create_table(
        "ingest_touch_cache",
        sa.Column("sha", sa.String(64), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
    )


def downgrade() -> None:
    for name in ("ingest_touch_cache", "ingest_agent_attempts", "ingest_resolutions", "ingest_conflicts",
                 "ingest_unit_members", "ingest_units", "ingest_runs"):
        op.drop_table(name)
