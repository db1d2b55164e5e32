"""`forkflow ingest` exit codes for cron and CI: 0 only when nothing needs a person (issue 12)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from forkflow.render import EXIT_FAILED, EXIT_NEEDS_PERSON, EXIT_OK, exit_code
from forkflow.demo import build_sample, demo_config
from forkflow.landing.ingest import IngestReport, Mode, UnitResult, UnitStatus
from forkflow.models import Sha
from forkflow.planning.model import Plan


def _report(*statuses: UnitStatus) -> IngestReport:
    units = tuple(UnitResult(f"u{i}", "bundle", st, "") for i, st in enumerate(statuses))
    return IngestReport(Mode.LAND, Sha("a" * 40), Sha("a" * 40), Plan((), Sha("a" * 40)), units, None)


@pytest.mark.parametrize(("statuses", "open_conflicts", "code"), [
    ((), 0, EXIT_OK),
    ((UnitStatus.LANDED, UnitStatus.EMPTY, UnitStatus.VALIDATED), 0, EXIT_OK),
    ((UnitStatus.LANDED,), 2, EXIT_NEEDS_PERSON),  # conflicts left open by an earlier run
    ((UnitStatus.LANDED, UnitStatus.CONFLICT), 0, EXIT_NEEDS_PERSON),
    ((UnitStatus.WAITING,), 0, EXIT_NEEDS_PERSON),
    ((UnitStatus.CONFLICT, UnitStatus.FAILED), 1, EXIT_FAILED),
    ((UnitStatus.ABANDONED,), 0, EXIT_FAILED),
])
def test_ingest_exit_code(statuses: tuple[UnitStatus, ...], open_conflicts: int, code: int) -> None:
    assert exit_code(_report(*statuses), open_conflicts) == code


def test_ingest_exit_code_end_to_end(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    sample = build_sample(tmp_path / "sample")
    assert cli("init", "--upstream", "upstream", repo=sample.fork).rc == 0
    with (sample.fork / "forkflow.toml").open("a") as f:
        f.write(demo_config(sys.executable))
    r = cli("ingest", "--land", "--json", repo=sample.fork)
    doc = r.json()
    assert r.rc == doc["exit_code"] == exit_code(_parsed(doc), doc["open_conflicts"])
    assert r.rc in (EXIT_NEEDS_PERSON, EXIT_FAILED) and doc["open_conflicts"] >= 1
    r = cli("ingest", "--land", repo=sample.fork)  # nothing new, but the conflicts are still open
    assert r.rc in (EXIT_NEEDS_PERSON, EXIT_FAILED) and f"exit {r.rc}" in r.out


def _parsed(doc: dict) -> IngestReport:  # type: ignore[type-arg]
    return _report(*(UnitStatus(u["status"]) for u in doc["units"]))
