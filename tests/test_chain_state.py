"""A held commit's chain is typed state: the planner and a unit's re-run read the decision's
`chain`, never the words of its reason (which a person, a log summary or a path may shape)."""
from __future__ import annotations

import pytest

from forkflow.errors import UserError
from forkflow.landing.plan import pending_commits, pending_entries
from forkflow.landing.records import UnitRecord
from forkflow.landing.retry import plan_retry
from forkflow.models import (IN_REVIEW_CHAIN, Commit, Disposition, Ledger, LedgerEntry, MemberOutcome, PointInTime,
                             Sha, UnitState)
from forkflow.planning.lines import CommitShape, Trace
from forkflow.planning.model import UnitKind


def _sha(c: str) -> Sha:
    return Sha(c * 40)


def _entry(c: str, disposition: Disposition = Disposition.PENDING, reason: str = "", chain: str = "") -> LedgerEntry:
    return LedgerEntry(Commit(_sha(c), (), 0, f"commit {c}"), None, disposition, reason=reason, chain=chain)


def _ledger(*entries: LedgerEntry) -> Ledger:
    return Ledger(fork_point=_sha("0"), fork_tip=_sha("f"), upstream_tip=PointInTime(entries[-1].commit.sha, 0),
                  ingestion_point=PointInTime(_sha("0"), 0), ingestion_point_inferred=False, entries=entries)


def _chain_unit(*shas: str) -> UnitRecord:
    return UnitRecord(7, 1, UnitKind.CHAIN.value, "ops#2", _sha("f"), None, UnitState.FAILED, "",
                      tuple((_sha(c), MemberOutcome.APPLIED) for c in shas))


def test_a_rerun_waits_for_the_chain_its_decision_names_whatever_the_reason_says() -> None:
    held = _entry("a", Disposition.DEFERRED, reason="L1 failed in ops#1: 1 test failed", chain="ops")
    with pytest.raises(UserError, match="waits for aaaaaaaaaaaa of chain ops"):
        plan_retry(_chain_unit("b"), _ledger(held, _entry("b")))


def test_a_reason_that_reads_like_a_chain_puts_nothing_in_one() -> None:
    lookalike = _entry("a", Disposition.DEFERRED, reason="chain ops: written by someone", chain="")
    unit = plan_retry(_chain_unit("b"), _ledger(lookalike, _entry("b")))
    assert unit.commits == (_sha("b"),)
    shape = {e: CommitShape(e, ()) for e in (_sha("a"), _sha("b"))}
    planned = pending_commits([lookalike, _entry("b")], shape, Trace({}, {}), {})
    assert [p.deferred_chain for p in planned] == [None, None]


def test_the_planner_reads_the_chain_and_leaves_commits_in_review_out() -> None:
    held = _entry("a", Disposition.DEFERRED, reason="waits for x", chain="ops")
    review = _entry("b", Disposition.DEFERRED, reason="waits for a person", chain=IN_REVIEW_CHAIN)
    ledger = _ledger(held, review, _entry("c"))
    entries = pending_entries(ledger)
    assert [e.commit.sha[0] for e in entries] == ["a", "c"]
    shape = {e.commit.sha: CommitShape(e.commit.sha, ()) for e in entries}
    assert [p.deferred_chain for p in pending_commits(entries, shape, Trace({}, {}), {})] == ["ops", None]
