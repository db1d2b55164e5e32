"""decisions: a held commit's chain as a column, no longer read back from its reason text

Revision ID: decisions_0003
Revises: decisions_0002

Stores written before this revision said the chain only as the reason's prefix
("chain NAME: ..."); the upgrade reads that prefix once, here, so nothing after it parses text.
"""
from __future__ import annotations

import re

import sqlalchemy as sa
from alembic import op

revision = "decisions_0003"
down_revision = "decisions_0002"
branch_labels = None
depends_on = None

_PREFIX = re.compile(r"chain (\S{1,200}):")


def upgrade() -> None:
    with op.batch_alter_table("dispositions") as batch:
        batch.add_column(sa.Column("chain", sa.String(200), nullable=False, server_default=""))
    conn = op.get_bind()
    table = sa.table("dispositions", sa.column("id", sa.Integer), sa.column("reason", sa.Text),
                     sa.column("source", sa.String), sa.column("chain", sa.String))
    rows = conn.execute(sa.select(table.c.id, table.c.reason).where(
        table.c.source == "auto", sa.or_(table.c.reason.like("chain %"), table.c.reason.like("in review: %")))).all()
    for row_id, reason in rows:
        m = _PREFIX.match(reason or "")
        chain = m.group(1) if m else "(in review)" if (reason or "").startswith("in review: ") else ""
        if chain:
            conn.execute(table.update().where(table.c.id == row_id).values(chain=chain))


def downgrade() -> None:
    with op.batch_alter_table("dispositions") as batch:
        batch.drop_column("chain")
