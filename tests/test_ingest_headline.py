"""`ingest --land` ends with what `forkflow status` says: days behind by the same rule."""
from __future__ import annotations

from pathlib import Path

from tests.test_ingest import WAITS, fork  # noqa: F401  (a fixture)


def test_ingest_reports_the_headline_status_reads(cli, fork: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc in WAITS, r.err
    after = r.json()["headline"]
    status = cli("status", "--json", repo=fork).json()
    assert after == status["headline"] and after["days_behind"] == status["days_behind"]
    assert after["days_behind"] > 0  # the sample's held conflict keeps the point where it was
    shown = cli("ingest", "--land", repo=fork).out
    assert "days behind upstream" in shown and "recorded point (forkflow's runs, holds included)" in shown
    assert cli("ingest", "--dry-run", "--json", repo=fork).json().get("headline") is None  # nothing landed
