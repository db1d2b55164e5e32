"""Store reads and writes of each resolver rule's backtest on the fork (conflicts/trust.py)."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from forkflow.conflicts.trustbook import Record, RuleBook
from forkflow.store.schema_conflicts import RuleRecordRow


def save_book(s: Session, fid: int, book: RuleBook) -> None:
    """Replace the fork's stored rule records with this backtest's."""
    s.execute(delete(RuleRecordRow).where(RuleRecordRow.fork_id == fid))
    for rule, r in sorted(book.records.items()):
        s.add(RuleRecordRow(fork_id=fid, rule=rule[:200], identical=r.identical, different=r.different,
                            files=book.files))
    if not book.records:  # the backtest ran and no rule answered: say so, rather than "never ran"
        s.add(RuleRecordRow(fork_id=fid, rule="", identical=0, different=0, files=book.files))


def load_book(s: Session, fid: int) -> tuple[RuleBook, datetime] | None:
    """The fork's stored rule records and when they were computed; None when never backtested."""
    rows = s.scalars(select(RuleRecordRow).where(RuleRecordRow.fork_id == fid).order_by(RuleRecordRow.rule)).all()
    if not rows:
        return None
    book = RuleBook({r.rule: Record(r.identical, r.different) for r in rows if r.rule}, rows[0].files)
    return book, max(r.computed_at for r in rows)
