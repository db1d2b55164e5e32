"""What the dashboard reads: a store, the fork in it, and (when served from a checkout) its Context."""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from forkflow.context import Context
from forkflow.errors import UserError
from forkflow.models import Ledger
from forkflow.store.schema import ForkRow
from forkflow.store.session import Store, redact
from forkflow.web.reads import newest_ledger

LEDGER_TTL_S = 30.0  # a checkout's ledger is rebuilt at most this often (git calls per build)


@dataclass
class Source:
    """The store a dashboard reads, and the one fork it shows."""

    store: Store
    fork_id: int | None
    fork_name: str
    ctx: Context | None = None
    _ledger: tuple[float, Ledger | None, str] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def store_label(self) -> str:
        return redact(self.store.url)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """One read transaction: a page reads a consistent store even while others write."""
        with self.store.session_scope() as s:
            yield s

    def fork(self, s: Session) -> int | None:
        """The fork shown; a store that was empty at start-up is looked at again."""
        if self.fork_id is None:
            rows = s.execute(select(ForkRow.id, ForkRow.name).order_by(ForkRow.id)).all()
            if len(rows) == 1:
                self.fork_id, self.fork_name = rows[0][0], rows[0][1]
        return self.fork_id

    def ledger(self, s: Session, fid: int) -> tuple[Ledger | None, str, str]:
        """(ledger, where it came from, problem): the checkout when served from one, else the store."""
        ledger, problem = self.checkout_ledger() if self.ctx is not None else (None, "")
        if ledger is not None:
            return ledger, "checkout", ""
        return newest_ledger(s, fid), "store (newest forkflow status)", problem

    def checkout_ledger(self) -> tuple[Ledger | None, str]:
        """(ledger, problem) built from the checkout, at most every LEDGER_TTL_S seconds."""
        from forkflow import wiring

        assert self.ctx is not None
        with self._lock:
            now = time.monotonic()
            if self._ledger is not None and now - self._ledger[0] < LEDGER_TTL_S:
                return self._ledger[1], self._ledger[2]
            try:
                ledger, problem = wiring.ledger(self.ctx), ""
            except UserError as e:
                ledger, problem = None, str(e)
            self._ledger = (now, ledger, problem)
            return ledger, problem


def open_source(target: str | Context, fork: str | None = None) -> Source:
    """A Source over a store URL (any fork in it) or over a fork's Context."""
    if isinstance(target, Context):
        return Source(target.store, target.fork_id, target.fork_name, target)
    store = Store.open(target)
    with store.session_scope() as s:
        forks = [(r.id, r.name) for r in s.scalars(select(ForkRow).order_by(ForkRow.id))]
    if fork is not None:
        match = [f for f in forks if f[1] == fork]
        if not match:
            names = ", ".join(n for _, n in forks) or "none yet"
            raise UserError(f"no fork named {fork!r} in the store {redact(target)} (forks: {names}); "
                            "pass one of them to --fork")
        return Source(store, match[0][0], match[0][1])
    if len(forks) > 1:
        names = ", ".join(n for _, n in forks)
        raise UserError(f"the store {redact(target)} holds several forks ({names}); pass --fork NAME")
    if not forks:
        return Source(store, None, "")
    return Source(store, forks[0][0], forks[0][1])
