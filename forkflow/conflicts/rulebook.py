"""Store reads and writes of each resolver rule's backtest on the fork (conflicts/trust.py)."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from forkflow.conflicts.trustbook import Record, RuleBook
from forkflow.store.schema_conflicts import RuleRecordRow
from forkflow.store.schema_ingest import AgentAttemptRow

RULE_BACKEND = "rule"  # trust.RULE_BACKEND: the attempt log's backend of a rule's proposal


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


def agent_proposal_waits(s: Session, fid: int, upstream_sha: str, path: str) -> bool:
    """Whether an agent's proposal (not a rule's) waits for a person for this conflict."""
    return s.scalar(select(AgentAttemptRow.id).where(
        AgentAttemptRow.fork_id == fid, AgentAttemptRow.upstream_sha == upstream_sha, AgentAttemptRow.path == path,
        AgentAttemptRow.outcome == "proposed", AgentAttemptRow.backend != RULE_BACKEND).limit(1)) is not None
