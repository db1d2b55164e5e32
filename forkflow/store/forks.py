"""The store's forks: the id every other table is keyed by."""
from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from forkflow.store.schema import ForkRow


def fork_id(s: Session, name: str) -> int:
    """The id of the fork called `name`, created on first use."""
    row = s.scalar(select(ForkRow).where(ForkRow.name == name))
    if row is None:
        try:
            with s.begin_nested():  # two first runs may add the same fork at once: one wins
                row = ForkRow(name=name)
                s.add(row)
                s.flush()
        except IntegrityError:
            row = s.scalar(select(ForkRow).where(ForkRow.name == name))
            assert row is not None
    return row.id
