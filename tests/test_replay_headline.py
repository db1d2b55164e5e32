"""Replay's table and HTML show the rest of `status`'s headline for forkflow's branch, as its JSON does."""
from __future__ import annotations

from pathlib import Path

from tests.conftest import run_forkflow
from tests.test_replay import Sample, sample  # noqa: F401  (a fixture)


def test_replay_table_and_html_show_the_headline_beside_days_behind(cli, sample: Sample, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    html = tmp_path / "replay.html"
    r = cli("replay", "--since", sample.since, "--until", sample.until, "--every", "day", "--json", "--html", str(html),
            repo=sample.fork)
    assert r.rc == 0, r.err
    steps = r.json()["steps"]
    held = [s for s in steps if s["after"].get("conflict_commits")]  # u4 conflicts: held for a person
    assert held, "the sample's conflict is held at some step"
    page = html.read_text()
    assert "oldest open, days (forkflow)" in page and "open conflicts (forkflow)" in page
    s = held[0]["after"]
    assert f'{s["conflict_commits"]} ({s["conflict_files"]} files)' in page
    wide = run_forkflow("replay", "--since", sample.since, "--until", sample.until, "--every", "day",
                        "--repo", str(sample.fork), cwd=sample.fork, env={"COLUMNS": "300"})
    assert wide.rc == 0, wide.err
    assert "conflicts→ff" in wide.out and "if deferred→ff" in wide.out
    assert f'{s["conflict_commits"]} ({s["conflict_files"]} files)' in wide.out
