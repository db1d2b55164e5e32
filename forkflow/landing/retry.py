"""Re-run one stored landing unit: `forkflow ingest --unit ID` and the dashboard's re-run action.

A unit that failed L1, waits in its chain, hit a conflict or was validated but not landed is
picked again in memory on the current fork tip (only its commits that still have no PICKED or
SKIPPED decision), gated by L1 and landed by compare-and-swap when it passes.  The outcome is a
new stored unit that names the old one (`retry_of`); the old one stays as history.
"""
from __future__ import annotations

from collections.abc import Callable

from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.landing import records
from forkflow.landing.gate import Gate
from forkflow.landing.ingest import IngestReport, Ingestor, UnitResult
from forkflow.landing.lock import is_ingest_running
from forkflow.models import RETRYABLE_STATES, Disposition, Ledger, UnitState
from forkflow.planning.model import Plan, Unit, UnitKind, chain_of_link
from forkflow.store.session import Store

OPEN = (Disposition.PENDING, Disposition.DEFERRED)


def _chain_name(record: records.UnitRecord) -> str:
    return chain_of_link(record.name) if record.kind == UnitKind.CHAIN.value else record.name


def load_target(repo: Repo, store: Store, fork_id: int, unit_id: int) -> records.UnitRecord:
    """The stored unit, or a UserError saying why it cannot be re-run."""
    with store.session_scope() as s:
        rec = records.unit(s, fork_id, unit_id)
    if rec is None:
        raise UserError(f"no landing unit {unit_id}; `forkflow ingest --json` prints unit ids "
                        "(the dashboard's ingestion page lists them too)")
    if rec.status is UnitState.LANDED:
        raise UserError(f"unit {unit_id} ({rec.name}) already landed as {(rec.candidate_sha or '')[:12]}; "
                        "nothing to re-run")
    if rec.status is UnitState.PICKING and not is_ingest_running(repo):
        return rec  # left by a killed run: `rerun_unit` settles it (Ingestor.recover) before it picks
    if rec.status not in RETRYABLE_STATES:
        what = {UnitState.PICKING: "is being picked by a running ingest; wait for it to finish",
                UnitState.EMPTY: "was already applied: nothing to pick"}.get(rec.status, f"is {rec.status}")
        raise UserError(f"unit {unit_id} ({rec.name}) {what}")
    return rec


def plan_retry(rec: records.UnitRecord, ledger: Ledger) -> Unit:
    """The unit re-running `rec` picks: its commits still without a decision, in upstream order,
    checked against the chain's order.  [pure]"""
    state = {e.commit.sha: e for e in ledger.entries}
    position = {sha: i for i, sha in enumerate(state)}
    open_ = sorted((sha for sha, _ in rec.members if sha in state and state[sha].disposition in OPEN),
                   key=position.__getitem__)
    if not open_:
        raise UserError(f"unit {rec.id} ({rec.name}) has nothing left to pick: each of its commits has a "
                        "decision now (`forkflow status --commits` shows them)")
    name = _chain_name(rec)
    if rec.kind == UnitKind.CHAIN.value:
        first = position[open_[0]]
        ahead = next((e for e in ledger.entries[:first]
                      if e.disposition is Disposition.DEFERRED and e.chain == name), None)
        if ahead is not None:
            raise UserError(f"unit {rec.id} ({rec.name}) waits for {ahead.commit.sha[:12]} of chain {name}, which "
                            "has not landed; re-run the unit holding that commit first (chains land in order)")
    return Unit(UnitKind(rec.kind), name, tuple(open_), {s: rec.reasons.get(s, "") for s in open_})


def rerun_unit(ing: Ingestor, target: Callable[[], records.UnitRecord], gate: Callable[[], Gate]) -> IngestReport:
    """Pick the unit `target()` reads again on the current fork tip, gate it and land it, under the
    fork lock the caller holds (`landing/wired.py`'s `retry_unit`).

    First settles what a killed run left, as `forkflow ingest` does (a unit it left `picking`
    becomes abandoned, so it can be re-run); then reads the unit and the gate."""
    ing.recover()  # under the lock no other run is going: a unit left `picking` was a killed run's
    rec = target()
    ing.gate = gate()
    ing.retry_of = rec.id
    ledger = ing.load_ledger(start_run=False)
    unit = plan_retry(rec, ledger)
    ing.start_run(ledger.fork_tip)
    ing.reasons.update(unit.reasons)
    ing.reporter.start_units(1)
    results: list[UnitResult] = ing.land_units(rec.name, unit, unit.commits, ledger.fork_tip)
    for r in results:
        ing.reporter.unit_done(r)
    return ing.finish(ledger, Plan((unit,), ledger.fork_tip), results)
