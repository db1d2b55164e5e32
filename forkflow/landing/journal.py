"""What an ingest run records, as events: a small interface the landing loop writes to, implemented
once over the store (issue 11); tests pass a fake and read the events back."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.engine import Connection

from forkflow.conflicts import records as crecords
from forkflow.conflicts.case import ConflictCase
from forkflow.landing import records
from forkflow.ledger import records as ledger_records
from forkflow.models import Disposition, MemberOutcome, RecordedDecision, Sha, UnitState
from forkflow.store.session import Store


@dataclass(frozen=True, slots=True)
class UnitStart:
    """A landing unit as it starts: what was picked onto which base, each member's outcome and reason."""

    kind: str
    name: str
    base: Sha
    candidate: Sha | None
    status: UnitState
    members: tuple[tuple[Sha, MemberOutcome], ...]
    summary: str = ""
    reasons: Mapping[Sha, str] | None = None
    retry_of: int | None = None
    decisions: tuple[RecordedDecision, ...] = ()  # recorded with the unit, in its transaction


@dataclass(frozen=True, slots=True)
class KeptConflict:
    """A conflict no resolver settled, kept for a person."""

    sha: Sha
    case: ConflictCase
    tried: tuple[str, ...]
    chain: str
    base: Sha


# (the upstream commit, the resolved region texts, the resolver) of each resolution a landing used
UsedResolution = tuple[ConflictCase, tuple[str, ...], str]


class Journal(Protocol):
    def run_started(self, mode: str, base: Sha) -> int: ...
    def run_finished(self, run_id: int) -> None: ...
    def unit_started(self, run_id: int, unit: UnitStart) -> int: ...
    def unit_gated(self, unit_id: int, passed: bool, summary: str, l1_run: int | None = None) -> None:
        """The gate's verdict on a unit; `l1_run` is the stored L1 run that gave it, when there is one."""
        ...
    def unit_settled(self, unit_id: int, status: UnitState, summary: str | None = None,
                     more_members: Sequence[tuple[Sha, MemberOutcome]] = (), reasons: Mapping[Sha, str] | None = None) -> None: ...
    def unit_landed(self, unit_id: int, candidate: Sha, members: Sequence[tuple[Sha, MemberOutcome]], base: Sha,
                    used: Sequence[UsedResolution], summary: str | None = None) -> None: ...
    def decided(self, decisions: Sequence[RecordedDecision]) -> None: ...
    def conflicts_kept(self, conflicts: Sequence[KeptConflict]) -> None: ...


def landing_decisions(candidate: Sha, members: Sequence[tuple[Sha, MemberOutcome]], base: Sha) -> list[RecordedDecision]:
    """PICKED for what a landed unit applied, SKIPPED for what it found already applied.  [pure]"""
    out = [RecordedDecision(sha, Disposition.PICKED, "", (candidate,))
           for sha, outcome in members if outcome.picked]
    out += [RecordedDecision(sha, Disposition.SKIPPED, f"already applied: picking it onto {base[:12]} changes nothing")
            for sha, outcome in members if outcome is MemberOutcome.EMPTY]
    return out


class StoreJournal:
    """The journal over forkflow's store, for one fork.  A unit's events are statements on a bare
    connection (`Store.connection_scope`): a run writes hundreds of them, and a session's
    transaction cost ten times as much."""

    def __init__(self, store: Store, fork_id: int) -> None:
        self.store = store
        self.fork_id = fork_id

    def run_started(self, mode: str, base: Sha) -> int:
        with self.store.connection_scope() as s:
            return records.start_run(s, self.fork_id, mode, base)

    def run_finished(self, run_id: int) -> None:
        with self.store.connection_scope() as s:
            records.finish_run(s, run_id)

    # the two steps a writing run's kinds differ in (landing/shared.py): proving the run still
    # holds the fork, and keeping decisions (at once here; until the push for a run that pushes)
    def _prove(self, s: Connection) -> None:
        """Before a write of decisions, in its transaction: nothing to prove for a lone checkout."""

    def _keep(self, s: Connection, decisions: Sequence[RecordedDecision], tip: Sha | None,
              unit_id: int | None = None) -> None:
        ledger_records.record_decisions(s, self.fork_id, decisions)

    def unit_started(self, run_id: int, unit: UnitStart) -> int:
        with self.store.connection_scope() as s:
            if unit.decisions:
                self._prove(s)
                self._keep(s, unit.decisions, unit.base)
            return records.add_unit(s, run_id, self.fork_id, unit.kind, unit.name, unit.base, unit.candidate,
                                    unit.status, unit.members, unit.summary, reasons=unit.reasons,
                                    retry_of=unit.retry_of)

    def unit_gated(self, unit_id: int, passed: bool, summary: str, l1_run: int | None = None) -> None:
        with self.store.connection_scope() as s:
            records.set_unit(s, unit_id, UnitState.PASSED if passed else UnitState.FAILED, summary, l1_run)

    def unit_settled(self, unit_id: int, status: UnitState, summary: str | None = None,
                     more_members: Sequence[tuple[Sha, MemberOutcome]] = (), reasons: Mapping[Sha, str] | None = None) -> None:
        with self.store.connection_scope() as s:
            if more_members:
                records.add_members(s, unit_id, more_members, reasons)
            records.set_unit(s, unit_id, status, summary)

    def unit_landed(self, unit_id: int, candidate: Sha, members: Sequence[tuple[Sha, MemberOutcome]], base: Sha,
                    used: Sequence[UsedResolution], summary: str | None = None) -> None:
        """The landing's decisions, its conflicts closed, its resolutions kept, the unit `landed`: one transaction."""
        with self.store.connection_scope() as s:
            self._prove(s)
            self._keep(s, landing_decisions(candidate, members, base), candidate, unit_id)
            crecords.close_conflicts(s, self.fork_id, [sha for sha, o in members if o.picked])
            for case, regions, resolver in used:
                if resolver != "recorded" and case.key:
                    crecords.save_resolution(s, case.key, case.path, list(regions), resolver)
            records.set_unit(s, unit_id, UnitState.LANDED, summary)

    def decided(self, decisions: Sequence[RecordedDecision]) -> None:
        if not decisions:
            return
        with self.store.connection_scope() as s:
            self._prove(s)
            self._keep(s, decisions, None)

    def conflicts_kept(self, conflicts: Sequence[KeptConflict]) -> None:
        if not conflicts:
            return
        with self.store.connection_scope() as s:
            for c in conflicts:
                crecords.upsert_conflict(
                    s, self.fork_id, upstream_sha=c.sha, subject=c.case.subject, path=c.case.path,
                    kind=c.case.kind.value, chain=c.chain, base_sha=c.base, key=c.case.key,
                    marked=c.case.marked if c.case.segments else "", tried=c.tried)
