"""Store-level locks: one writing run per fork on any store, whoever's checkout it runs from.

The repository's flock (landing/lock.py) keeps two runs of one checkout apart; two clones of a
fork writing one shared store need the store to say no.  On PostgreSQL that is a session
advisory lock keyed by the fork's id, held on a connection of its own for the whole run (the
server drops it when the process dies, SIGKILL included); on a SQLite file it is a flock next
to the database.  Schema migrations take a transaction advisory lock of their own (session.py).
"""
from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import text

from forkflow.errors import UserError
from forkflow.store.session import LOCK_NAMESPACE as NAMESPACE
from forkflow.store.session import Store, redact

# keys: (NAMESPACE, 0) is the migration lock (session.py), (NAMESPACE, fork id >= 1) a fork's


def _busy(store: Store, what: str) -> UserError:
    return UserError(f"another `forkflow {what}` is writing this fork in the store {redact(store.url)} "
                     "(from this or another checkout); wait for it to finish and run again "
                     "(`--dry-run` works meanwhile)")


@contextmanager
def fork_write_lock(store: Store, fork_id: int, what: str = "ingest") -> Iterator[None]:
    """Hold the store's write lock of fork `fork_id` for the block; a UserError at once when
    another run holds it."""
    dialect = store.engine.dialect.name
    if dialect == "postgresql":
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            got = conn.execute(text("SELECT pg_try_advisory_lock(:ns, :key)"),
                               {"ns": NAMESPACE, "key": fork_id}).scalar()
            if not got:
                raise _busy(store, what)
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:ns, :key)"), {"ns": NAMESPACE, "key": fork_id})
        return
    path = _sqlite_file(store.url)
    if path is None:  # an in-memory store lives in this process only
        yield
        return
    fd = os.open(f"{path}.fork-{fork_id}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _busy(store, what) from None
        yield
    finally:
        os.close(fd)


def _sqlite_file(url: str) -> Path | None:
    if not url.startswith("sqlite"):
        return None
    path = url.split("///", 1)[1] if "///" in url else ""
    return Path(path) if path and path != ":memory:" else None
