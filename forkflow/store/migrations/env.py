"""Alembic environment: forkflow passes an open connection in `config.attributes`."""
from __future__ import annotations

from alembic import context

from forkflow.store import all_tables  # noqa: F401  (registers every table on Base)
from forkflow.store.schema import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
