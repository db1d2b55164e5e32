"""The dashboard's Replay page over a store holding one finished replay."""
from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from forkflow.replay import records
from forkflow.replay.model import Landed, Report, State, Step, summarize
from forkflow.store import forks
from forkflow.store.session import Store
from forkflow.web.app import create_app


def _report() -> Report:
    steps = tuple(
        Step(at=1_767_600_000 + i * 604_800, fork_sha=f"{i:040x}", upstream_sha="b" * 40, fork_date=0,
             upstream_date=0, real=State(100.0 + 7 * i, 3, 600, 600), after=State(0.0, 40, 0, 40),
             landed=(Landed(f"{i + 100:040x}", "<b>Fix</b>", "applied", fork_sha="c" * 40,
                            taken_at=1_767_600_000 + (i + 3) * 604_800, same="patch-id"),))
        for i in range(4))
    return Report(1_767_600_000, 1_769_400_000, 604_800, "", steps, summarize(steps), (), ("merge-ability only",))


def test_replay_page_shows_the_stored_curves_and_steps(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ff.db'}"
    store = Store.open(url)
    assert {"replay_runs", "replay_cache"} <= set(store.table_names())  # the migration made them
    with store.session_scope() as s:
        fid = forks.fork_id(s, "triton:main")
        run = records.start_run(s, fid, "2026-01-05", "2026-01-26", 604_800, "")
        records.finish_run(s, run, _report().to_json())
    with TestClient(create_app(url)) as c:
        page = c.get("/replay")
        assert page.status_code == 200
        assert page.text.count("<svg") == 3 and "days behind upstream" in page.text
        assert "by picks</text>" not in page.text  # steps stored before the by-picks state: no such curve
        assert "<script" not in page.text.split("<main", 1)[-1].split("</main>", 1)[0]
        api = c.get("/api/replay").json()
        assert api["run"] == run and len(api["report"]["steps"]) == 4
        assert api["report"]["summary"]["lag_saved_median"] == 21.0
        assert c.get(f"/replay?run={run + 5}").status_code == 404


def test_replay_page_says_how_to_fill_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ff.db'}"
    with Store.open(url).session_scope() as s:
        forks.fork_id(s, "triton:main")
    with TestClient(create_app(url)) as c:
        page = c.get("/replay")
        assert page.status_code == 200 and "forkflow replay --since" in page.text
