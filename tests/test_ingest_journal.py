"""The landing loop with a fake journal, no CLI: the events an ingest run records (issue 11)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from forkflow.config import render_config
from forkflow.context import open_context
from forkflow import wiring
from forkflow.landing.ingest import IngestOptions, Mode, UnitStatus
from forkflow.landing.journal import KeptConflict, UnitStart, UsedResolution, landing_decisions
from forkflow.models import Disposition, GateResult, RecordedDecision, Sha
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

    def unit_gated(self, unit_id: int, passed: bool, summary: str) -> None:
        self.events.append(("gated", (unit_id, passed)))

    def unit_settled(self, unit_id: int, status: str, summary: str | None = None,
                     more_members: Sequence[tuple[Sha, str]] = (), reasons: Mapping[Sha, str] | None = None) -> None:
        self.events.append(("settled", (unit_id, status)))

    def unit_landed(self, unit_id: int, candidate: Sha, members: Sequence[tuple[Sha, str]], base: Sha,
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
    assert ("decided", ((Disposition.DEFERRED, "chain resolve-" + report.results[0].deferred[0][:10]),)) \
        in journal.events
    landed = names.index("landed")
    assert names[landed - 1] == "gated" and journal.events[landed][1] == (2, 1)
    assert Path(fork / ".forkflow").exists()  # the store exists, and holds no unit: the journal had them
    from forkflow.landing import records

    with ctx.store.session_scope() as s:
        assert records.units(s, ctx.fork_id) == []
