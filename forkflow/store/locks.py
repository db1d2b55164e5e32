"""Store-level locks: one writing run per fork on any store, whoever's checkout it runs from.

The repository's flock (landing/lock.py) keeps two runs of one checkout apart; two clones of a
fork writing one shared store need the store to say no.  On PostgreSQL that is a session
advisory lock keyed by the fork's id, held on a connection of its own for the whole run (the
server drops it when the process dies, SIGKILL included); on a SQLite file it is a flock next
to the database.  Schema migrations take a transaction advisory lock of their own (session.py).

A lock alone is not proof: a PostgreSQL restart drops every advisory lock without telling the
connection that held it, and a second clone is then let in while the first still runs.  So the
lock comes with a lease: taking it bumps the fork's generation in `fork_leases`, and every write
that matters (a landing's record, a push and what it makes shared) first checks, in its own
transaction, that the generation is still the one this run took and, on PostgreSQL, that its
lock connection still holds the advisory lock (`Lease.check`).  The check holds the lease row
until that transaction commits, so a writer taking over waits for it: a run that lost the fork
stops at its next write, with one line, and writes nothing more.
"""
from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

from sqlalchemy import CursorResult, Table, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from forkflow.errors import StoreError, UserError
from forkflow.store.schema_ingest import ForkLeaseRow
from forkflow.store.session import LOCK_NAMESPACE as NAMESPACE
from forkflow.store.session import Store, gone, insert_new, redact, went_away

# keys: (NAMESPACE, 0) is the migration lock (session.py), (NAMESPACE, fork id >= 1) a fork's
_LEASES = cast(Table, ForkLeaseRow.__table__)


class LeaseLost(UserError):
    """Another writer took the fork (or the store dropped this run's lock): stop writing."""


def _busy(store: Store, what: str) -> UserError:
    return UserError(f"another `forkflow {what}` is writing this fork in the store {redact(store.url)} "
                     "(from this or another checkout); wait for it to finish and run again "
                     "(`--dry-run` works meanwhile)")


@dataclass
class Lease:
    """This run's right to write fork `fork_id`: the generation it took, and on PostgreSQL the
    backend holding its advisory lock."""

    store: Store
    fork_id: int
    generation: int
    holder: str
    backend: int | None = None  # pg_backend_pid() of the lock's connection
    lost: str = ""  # why it was lost, once a check failed

    def check(self, conn: Connection) -> None:
        """Raise LeaseLost unless this run still holds the fork; run it in the transaction of the
        write it guards (the lease row stays locked until that transaction ends)."""
        if self.lost:
            raise LeaseLost(self.lost)
        if self.backend is not None:
            held = conn.execute(text(
                "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = :ns "
                "AND objid::bigint = :key AND objsubid = 2 AND pid = :pid AND granted"),
                {"ns": NAMESPACE, "key": self.fork_id, "pid": self.backend}).first()
            if held is None:
                self._lose("this run's write lock of the fork is gone from the store (the database restarted or "
                           "dropped the lock's connection)")
        result = cast(CursorResult[Any], conn.execute(
            update(_LEASES).where(_LEASES.c.fork_id == self.fork_id, _LEASES.c.generation == self.generation)
            .values(generation=_LEASES.c.generation)))
        if result.rowcount != 1:
            now = conn.execute(text("SELECT generation, holder FROM fork_leases WHERE fork_id = :f"),
                               {"f": self.fork_id}).first()
            who = f" ({now[1]}, generation {now[0]})" if now is not None else ""
            self._lose(f"another writer took this fork in the store{who}")

    def _lose(self, why: str) -> None:
        self.lost = (f"{why}; this run (generation {self.generation}) stopped and lands nothing more; what it "
                     "landed but did not push is dropped by the next run, which re-plans from the shared branch")
        raise LeaseLost(self.lost)

    def verify(self) -> None:
        """`check` in a transaction of its own (before a push)."""
        with self.store.connection_scope() as conn:
            self.check(conn)


def take_lease(store: Store, fork_id: int, backend: int | None = None) -> Lease:
    """Bump fork `fork_id`'s generation: from now on only the returned lease may write it."""
    holder = f"{socket.gethostname()} pid {os.getpid()}"[:400]
    now = datetime.now(timezone.utc)
    with store.connection_scope() as conn:
        insert_new(conn, _LEASES, [{"fork_id": fork_id, "generation": 0, "holder": "", "taken_at": now}])
        conn.execute(update(_LEASES).where(_LEASES.c.fork_id == fork_id)
                     .values(generation=_LEASES.c.generation + 1, holder=holder, taken_at=now))
        generation = conn.execute(text("SELECT generation FROM fork_leases WHERE fork_id = :f"),
                                  {"f": fork_id}).scalar_one()
    return Lease(store, fork_id, int(generation), holder, backend)


@contextmanager
def fork_write_lock(store: Store, fork_id: int, what: str = "ingest") -> Iterator[Lease]:
    """Hold the store's write lock of fork `fork_id` for the block, with the lease it proves each
    write by; a UserError at once when another run holds it."""
    dialect = store.engine.dialect.name
    if dialect == "postgresql":
        with _pg_lock(store, fork_id, what) as backend:
            yield take_lease(store, fork_id, backend)
        return
    path = _sqlite_file(store.url)
    if path is None:  # an in-memory store lives in this process only
        yield take_lease(store, fork_id)
        return
    fd = os.open(f"{path}.fork-{fork_id}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _busy(store, what) from None
        yield take_lease(store, fork_id)
    finally:
        os.close(fd)


@contextmanager
def _pg_lock(store: Store, fork_id: int, what: str) -> Iterator[int]:
    """The advisory lock on a connection of its own; yields that connection's backend pid.  A
    connection the database dropped meanwhile is let go without a second error: its lock went
    with it."""
    try:
        conn = store.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    except DBAPIError as e:
        raise (went_away(store.url, e) if gone(e) else StoreError(f"cannot lock the fork in {redact(store.url)}: "
                                                                   f"{type(e).__name__}")) from None
    try:
        try:
            row = conn.execute(text("SELECT pg_try_advisory_lock(:ns, :key), pg_backend_pid()"),
                               {"ns": NAMESPACE, "key": fork_id}).one()
        except DBAPIError as e:
            raise went_away(store.url, e) from None
        if not row[0]:
            raise _busy(store, what)
        try:
            yield int(row[1])
        finally:
            try:
                conn.execute(text("SELECT pg_advisory_unlock(:ns, :key)"), {"ns": NAMESPACE, "key": fork_id})
            except DBAPIError:
                pass  # the connection (and so the lock) is gone already: nothing to release
    finally:
        try:
            conn.close()
        except DBAPIError:
            pass


def _sqlite_file(url: str) -> Path | None:
    if not url.startswith("sqlite"):
        return None
    path = url.split("///", 1)[1] if "///" in url else ""
    return Path(path) if path and path != ":memory:" else None
