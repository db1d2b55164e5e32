"""The ingestion page a page at a time, grouped by ingest run, with links wherever a row names a
conflict, a unit or a commit."""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from forkflow.conflicts import records as conflict_records
from forkflow.context import open_context
from forkflow.landing import records as landing_records
from forkflow.ledger import records as ledger_records
from forkflow.models import Disposition, MemberOutcome, RecordedDecision, Sha, UnitState
from forkflow.store import forks
from forkflow.store.session import Store
from forkflow.testing.gitrepo import ForkBuilder
from forkflow.testing.seed import HOSTILE, sha_of
from forkflow.web.app import create_app
from tests.test_ingest import WAITS, k_conflict_fork

SEE = "see `forkflow conflicts`"


@dataclass
class Seeded:
    url: str
    runs: list[int] = field(default_factory=list)
    units: dict[int, list[int]] = field(default_factory=dict)  # run -> its units, in the order they ran
    failed: int = 0
    retry: int = 0
    conflict_unit: int = 0
    conflict_id: int = 0
    held: Sha = Sha("")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    """Three ingest runs: 60 landed units, then a failed unit and a conflict, then the failed one's re-run."""
    url = f"sqlite:///{tmp_path_factory.mktemp('ingestion') / 'store.db'}"
    store = Store.open(url)
    out = Seeded(url)
    base = sha_of("base")
    with store.session_scope() as s:
        fid = forks.fork_id(s, "triton:main")
        run = landing_records.start_run(s, fid, "land", base)
        out.runs.append(run)
        out.units[run] = [landing_records.add_unit(
            s, run, fid, "bundle", f"bundle-{i}", base, sha_of(f"cand-{i}"), UnitState.LANDED,
            [(sha_of(f"up-{i}"), MemberOutcome.APPLIED)], "L1 passed") for i in range(60)]
        landing_records.finish_run(s, run)
        run = landing_records.start_run(s, fid, "land", base)
        out.runs.append(run)
        out.failed = landing_records.add_unit(s, run, fid, "chain", "ops-api#1", base, sha_of("cand-f"),
                                              UnitState.FAILED, [(sha_of("up-f"), MemberOutcome.APPLIED)],
                                              "L1 failed: 1 test")
        out.held = sha_of("up-c")
        out.conflict_unit = landing_records.add_unit(
            s, run, fid, "chain", f"warp {HOSTILE}", base, None, UnitState.CONFLICT,
            [(out.held, MemberOutcome.CONFLICT)], f"conflict in lib/k.py; {SEE}")
        out.conflict_id = conflict_records.upsert_conflict(
            s, fid, upstream_sha=out.held, subject=f"Tune k {HOSTILE}", path="lib/k.py", kind="content",
            chain="warp", base_sha=base, key="k1", marked="<<<<<<< fork\n=======\n>>>>>>> upstream\n", tried=[])
        ledger_records.record_decision(s, fid, RecordedDecision(out.held, Disposition.DEFERRED,
                                                                "chain warp: conflict in lib/k.py"))
        out.units[run] = [out.failed, out.conflict_unit]
        landing_records.finish_run(s, run)
        run = landing_records.start_run(s, fid, "land", base)
        out.runs.append(run)
        out.retry = landing_records.add_unit(s, run, fid, "chain", "ops-api#1", base, sha_of("cand-r"),
                                             UnitState.LANDED, [(sha_of("up-f"), MemberOutcome.APPLIED)],
                                             "L1 passed", retry_of=out.failed)
        out.units[run] = [out.retry]
        landing_records.finish_run(s, run)
    store.dispose()
    yield out


@pytest.fixture(scope="module")
def client(seeded: Seeded) -> Iterator[TestClient]:
    with TestClient(create_app(seeded.url)) as c:
        yield c


def test_ingestion_is_paged_and_grouped_by_run_newest_run_first(client: TestClient, seeded: Seeded) -> None:
    first = client.get("/api/ingestion").json()
    assert first["pager"] == {"page": 1, "pages": 2, "units": 63, "per_page": 50, "prev": None,
                              "next": "/ingestion?page=2"}
    newest, middle, oldest = seeded.runs[2], seeded.runs[1], seeded.runs[0]
    assert [r["id"] for r in first["runs"]] == [newest, middle, oldest]
    assert [u["id"] for u in first["runs"][0]["units"]] == [seeded.retry]  # the re-run, in the run that made it
    assert [u["id"] for u in first["runs"][1]["units"]] == seeded.units[middle]  # in the order they ran
    assert [u["id"] for u in first["runs"][2]["units"]] == seeded.units[oldest][:47]
    assert first["runs"][0]["mode"] == "land" and first["runs"][0]["started_at"]
    second = client.get("/api/ingestion?page=2").json()
    assert [r["id"] for r in second["runs"]] == [oldest]
    assert [u["id"] for u in second["runs"][0]["units"]] == seeded.units[oldest][47:]
    assert second["pager"]["prev"] == "/ingestion?page=1" and second["pager"]["next"] is None
    html = client.get("/ingestion").text
    assert html.count('<tr id="unit-') == 50 and '<a href="/ingestion?page=2" rel="next">' in html
    assert html.index(f'id="run-{newest}"') < html.index(f'id="run-{middle}"') < html.index(f'id="run-{oldest}"')
    assert "(continued)" in client.get("/ingestion?page=2").text


def test_a_rerun_row_links_the_unit_it_reran(client: TestClient, seeded: Seeded) -> None:
    html = client.get("/ingestion").text
    row = re.search(rf'<tr id="unit-{seeded.retry}">.*?</tr>', html, re.S)
    assert row is not None and f'<a href="/ingestion/units/{seeded.failed}">unit #{seeded.failed}</a>' in row.group(0)


def test_rows_that_name_a_conflict_link_it(client: TestClient, seeded: Seeded) -> None:
    href = f'<a href="/ingestion/conflicts/{seeded.conflict_id}">conflict #{seeded.conflict_id}</a>'
    html = client.get("/ingestion").text
    assert SEE not in html
    row = re.search(rf'<tr id="unit-{seeded.conflict_unit}">.*?</tr>', html, re.S)
    assert row is not None and href in row.group(0) and "conflict in lib/k.py" in row.group(0)
    waiting = re.search(r'<table class="list" id="waiting">.*?</table>', html, re.S)
    assert waiting is not None and href in waiting.group(0)
    assert f'<a href="/ingestion/units/{seeded.conflict_unit}">' in waiting.group(0)  # the unit it waits in
    assert f'href="/commits/{seeded.held}"' in waiting.group(0)
    doc = client.get("/api/ingestion").json()
    (unit,) = [u for u in doc["runs"][1]["units"] if u["id"] == seeded.conflict_unit]
    assert unit["conflicts"] == [{"id": seeded.conflict_id, "path": "lib/k.py",
                                  "href": f"/ingestion/conflicts/{seeded.conflict_id}"}]
    page = client.get(f"/ingestion/units/{seeded.conflict_unit}").text
    assert href in page and SEE not in page


@pytest.mark.security
def test_ingestion_escapes_unit_names_and_subjects(client: TestClient) -> None:
    html = client.get("/ingestion").text
    assert HOSTILE not in html and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html


@pytest.mark.security
@pytest.mark.parametrize("query", ["page=abc", "page=0", "page=-1", "page=1e3", "page=99999999999999999999"])
def test_ingestion_refuses_a_malformed_page_with_one_line(client: TestClient, query: str) -> None:
    r = client.get(f"/api/ingestion?{query}")
    assert r.status_code == 400 and "page" in r.json()["error"] and "\n" not in r.json()["error"]
    assert client.get(f"/ingestion?{query}").status_code == 400


def test_a_page_past_the_last_points_back(client: TestClient) -> None:
    r = client.get("/ingestion?page=7")
    assert r.status_code == 200 and 'href="/ingestion">the newest runs</a>' in r.text
    assert client.get("/api/ingestion?page=7").json()["runs"] == []


def test_a_real_conflict_from_ingest_is_linked_from_the_ingestion_page(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork: Path = k_conflict_fork(cli, builder)
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n')
    assert cli("ingest", "--land", repo=fork).rc in WAITS
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    with TestClient(create_app(open_context(fork))) as client:
        html = client.get("/ingestion").text
        doc = client.get("/api/ingestion").json()
    assert SEE not in html
    assert f'<a href="/ingestion/conflicts/{c["id"]}">conflict #{c["id"]}</a>' in html
    (unit,) = [u for r in doc["runs"] for u in r["units"] if u["status"] == "conflict"]
    assert [x["id"] for x in unit["conflicts"]] == [c["id"]]
