"""The landing loop with a fake journal, no CLI: the events an ingest run records (issue 11)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from forkflow.config import load_config, render_config
from forkflow.conflicts.provenance import People
from forkflow.conflicts.resolvers.agent import Attempt
from forkflow.context import open_context
from forkflow import wiring
from forkflow.git.pick import MemoryPicker
from forkflow.git.repo import Repo
from forkflow.landing.ingest import IngestOptions, Ingestor, Mode, UnitStatus
from forkflow.landing.journal import KeptConflict, UnitStart, UsedResolution, landing_decisions
from forkflow.landing.records import UnitRecord
from forkflow.landing.settings import IngestSettings, ingest_settings
from forkflow.models import Disposition, GateResult, Ledger, MemberOutcome, RecordedDecision, Sha, UnitState
from forkflow.planning.model import Plan
from forkflow.testing.gitrepo import ForkBuilder


class FakeJournal:
    """Every event, in order, as (name, details)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []
        self.units = 0

    def run_started(self, mode: str, base: Sha) -> int:
        self.events.append(("run started", mode))
        return 7

    def run_finished(self, run_id: int) -> None:
        self.events.append(("run finished", run_id))

    def unit_started(self, run_id: int, unit: UnitStart) -> int:
        self.units += 1
        self.events.append(("unit started", (unit.name.split("-")[0], unit.status, len(unit.members))))
        return self.units

    def unit_gated(self, unit_id: int, passed: bool, summary: str, l1_run: int | None = None) -> None:
        self.events.append(("gated", (unit_id, passed)))

    def unit_settled(self, unit_id: int, status: UnitState, summary: str | None = None,
                     more_members: Sequence[tuple[Sha, MemberOutcome]] = (), reasons: Mapping[Sha, str] | None = None) -> None:
        self.events.append(("settled", (unit_id, status)))

    def unit_landed(self, unit_id: int, candidate: Sha, members: Sequence[tuple[Sha, MemberOutcome]], base: Sha,
                    used: Sequence[UsedResolution], summary: str | None = None) -> None:
        self.events.append(("landed", (unit_id, len(landing_decisions(candidate, members, base)))))

    def decided(self, decisions: Sequence[RecordedDecision]) -> None:
        self.events.append(("decided", tuple((d.disposition, d.reason.split(":")[0]) for d in decisions)))

    def conflicts_kept(self, conflicts: Sequence[KeptConflict]) -> None:
        self.events.append(("conflict kept", tuple(c.case.path for c in conflicts)))


class PassGate:
    def check(self, rev: Sha, base: Sha) -> GateResult:
        return GateResult(True, "passed")


def test_ingest_journal_events_of_a_landing_run(builder: ForkBuilder) -> None:
    builder.upstream_commit({"a.py": "a = 1\nb = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"a.py": "a = 10\nb = 1\n"}, "[fork] ours")
    builder.upstream_commit({"a.py": "a = 2\nb = 1\n"}, "Change a (#2)")  # conflicts with the fork
    builder.upstream_commit({"c.py": "c = 1\n"}, "Add c (#3)")  # independent: lands
    builder.fetch()
    fork = builder.f.path
    (fork / "forkflow.toml").write_text(render_config("upstream", "main", "main"))
    ctx = open_context(fork)
    journal = FakeJournal()
    report = wiring.ingestor(ctx, IngestOptions(mode=Mode.LAND), PassGate(), journal=journal).run()
    assert [r.status for r in report.results] == [UnitStatus.CONFLICT, UnitStatus.LANDED]
    names = [e for e, _ in journal.events]
    assert names[0] == "run started" and names[-1] == "run finished"
    assert ("conflict kept", ("a.py",)) in journal.events
    # the held commit meets the fork's lines: its unit `fork-<sha10>` keeps that name as its chain
    assert ("decided", ((Disposition.DEFERRED, "chain fork-" + report.results[0].deferred[0][:10]),)) \
        in journal.events
    landed = names.index("landed")
    assert names[landed - 1] == "gated" and journal.events[landed][1] == (2, 1)
    assert Path(fork / ".git" / "forkflow" / "forkflow.db").exists()  # the store exists, and holds no unit: the journal had them
    from forkflow.landing import records

    with ctx.store.session_scope() as s:
        assert records.units(s, ctx.fork_id) == []


class FakeReader:
    """An `IngestReader` holding only what a killed run left: no store at all."""

    def __init__(self, left: list[UnitRecord]) -> None:
        self.left = left

    def ledger(self, fork_tip: Sha, upstream_tip: Sha) -> Ledger:
        raise AssertionError("recovery reads no ledger")

    def plan(self, ledger: Ledger, settings: IngestSettings, until: str | None, max_bundle: int | None,
             picker: MemoryPicker) -> Plan:
        raise AssertionError("recovery plans nothing")

    def unfinished_units(self) -> list[UnitRecord]:
        return self.left

    def failed_with(self, shas: Sequence[Sha]) -> list[UnitRecord]:
        return []

    def close_conflicts_of(self, settled: set[Sha]) -> None:
        pass

    def lookup_resolution(self, key: str) -> tuple[list[str], str] | None:
        return None

    def log_attempt(self, attempt: Attempt) -> None:
        pass

    def resolution_people(self, keys: Sequence[str]) -> dict[str, People]:
        return {}


def test_ingestor_recovery_with_fakes_settles_what_a_killed_run_left(builder: ForkBuilder) -> None:
    builder.upstream_commit({"a.py": "a = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    tip = Sha(builder.fork_commit({"b.py": "b = 1\n"}, "[fork] ours"))
    builder.fetch()
    fork = builder.f.path
    (fork / "forkflow.toml").write_text(render_config("upstream", "main", "main"))
    config, repo = load_config(fork / "forkflow.toml"), Repo.open(fork)
    landed = UnitRecord(1, 3, "bundle", "bundle-1", tip, tip, UnitState.PASSED, "ok", ((Sha("u" * 40), MemberOutcome.APPLIED),))
    killed = UnitRecord(2, 3, "bundle", "bundle-2", tip, None, UnitState.PICKING, "", ((Sha("v" * 40), MemberOutcome.APPLIED),))
    journal = FakeJournal()
    ingestor = Ingestor(repo, MemoryPicker(repo.path), None, journal, None, config=config,
                        settings=ingest_settings(config), options=IngestOptions(mode=Mode.LAND),
                        reader=FakeReader([landed, killed]))
    ingestor.recover()
    assert journal.events == [("settled", (2, "abandoned")), ("landed", (1, 1))]
    assert Sha("u" * 40) in ingestor.settled and Sha("v" * 40) not in ingestor.decided
