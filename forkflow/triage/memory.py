"""The flaky memory: one record of a test's behaviour per (test, signature), across tiers.

A test's history is read from every tier's runs, reruns included: an L1 gate run that failed
a test and the rerun that passed it at the same commit are a flip, whichever tier reads them
later.  With the verdicts stored by triage (a FLAKY verdict in an L1 run, a NEW one that failed
every rerun), this answers one question the same way for the gate, `forkflow triage`, `forkflow
trunk` and `forkflow issues sync`: is this failure known flaky, and why?

The rule, per (test, signature key):
- the newest stored verdict that rests on reruns decides: FLAKY holds, and a NEW that failed
  every rerun clears it while the test has not passed since (the evidence changed: it fails for
  real now; a 30% flaky test also fails four times in a row, once in 120 runs, and its next
  pass brings the memory back);
- else history decides: the test flipped with this signature (both outcomes at one commit, or
  failing between two passes at least twice: `classify.has_flipped`).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from forkflow.tiers.reports import TestOutcome
from forkflow.tiers.tiers import RunStatus
from forkflow.triage.classify import FlakyPolicy, HistoryPoint, has_flipped
from forkflow.triage.models import Classification

if TYPE_CHECKING:
    from forkflow.triage.journal import TriageJournal

BAD = (TestOutcome.FAIL, TestOutcome.ERROR)
Pair = tuple[str, str]   # (test, signature key)


def test_history(journal: TriageJournal, tests: Iterable[str], limit: int = 50,
                 exclude_run: int | None = None) -> dict[str, list[HistoryPoint]]:
    """Each test's outcomes in the newest `limit` finished runs of every tier (reruns included),
    oldest first; `exclude_run` and its reruns are left out (the run being triaged)."""
    from forkflow.triage.failures import failures_of_run

    wanted = set(tests)
    runs = [r for r in journal.latest_runs(None, limit)
            if r.id != exclude_run and (exclude_run is None or r.parent_run_id != exclude_run)
            and r.status in (RunStatus.PASS, RunStatus.FAIL)]
    outcomes = journal.outcomes_of_tests([r.id for r in runs], wanted)
    hist: dict[str, list[HistoryPoint]] = {t: [] for t in wanted}
    for r in sorted(runs, key=lambda r: r.id):  # oldest first
        got = outcomes.get(r.id) or []
        if not got:
            continue
        keys = {f.test: f.signature.key for f in failures_of_run(journal, r.id)} \
            if any(o.outcome in BAD for o in got) else {}
        for o in got:
            if o.outcome is TestOutcome.SKIP:
                continue  # a skip says nothing about the failure
            hist.setdefault(o.test_id, []).append(HistoryPoint(r.rev, o.outcome not in BAD, keys.get(o.test_id),
                                                               r.id))
    return hist


def flaky_reasons(journal: TriageJournal, pairs: Iterable[Pair], *, limit: int = 50,
                  history: Mapping[str, Sequence[HistoryPoint]] | None = None,
                  policy: FlakyPolicy = FlakyPolicy(), exclude_run: int | None = None) -> dict[Pair, str]:
    """The pairs known flaky, each with the evidence in words (see the module docstring);
    `exclude_run`'s own verdicts are not memory (the run being triaged again)."""
    pairs = set(pairs)
    if not pairs:
        return {}
    tests = sorted({t for t, _k in pairs})
    newest: dict[Pair, tuple[int, Classification, str, tuple[bool, ...]]] = {}
    for v in journal.verdicts_of_tests(tests):
        if (v.test, v.key) in pairs and v.reruns and v.run_id != exclude_run:
            newest[(v.test, v.key)] = (v.run_id, v.classification, v.reason, v.reruns)
    hist = history if history is not None else test_history(journal, tests, limit)
    out: dict[Pair, str] = {}
    for pair in sorted(pairs):
        known = newest.get(pair)
        points = hist.get(pair[0], ())
        if known is not None:
            run_id, cls, reason, reruns = known
            if cls is Classification.FLAKY:
                out[pair] = f"classed FLAKY in run {run_id} ({reason.split(';')[0]})"
            if cls is Classification.NEW and not any(reruns) and \
                    not any(p.passed and p.run_id > run_id for p in points):
                continue  # failed every rerun, and has not passed since: it fails for real now
        if pair not in out and has_flipped(points, pair[1], policy):
            out[pair] = "flipped before with this signature (runs of every tier, reruns included)"
    return out
