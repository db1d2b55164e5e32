"""The dashboard's pages and their JSON, over a seeded store, with FastAPI's TestClient."""
from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from forkflow.models import Better, MetricPoint, Sha
from forkflow.regress import records as regress_records
from forkflow.store import forks
from forkflow.store.session import Store
from forkflow.web.app import create_app
from forkflow.testing.seed import HOSTILE, SeedInfo, SeedSize, seed_store, sha_of

SMALL = SeedSize(days=60, metrics=8, upstream_commits=400, tests_per_run=6)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, SeedInfo]:
    path = tmp_path_factory.mktemp("web") / "store.db"
    url = f"sqlite:///{path}"
    store = Store.open(url)
    info = seed_store(store, "triton:main", SMALL, hostile=True)
    store.dispose()
    return url, info


@pytest.fixture(scope="module")
def client(seeded: tuple[str, SeedInfo]) -> Iterator[TestClient]:
    with TestClient(create_app(seeded[0])) as c:
        yield c


def _pages(info: SeedInfo) -> list[tuple[str, str]]:
    """(path, text the HTML must show) for every page kind."""
    metric = info.metric_names[0]
    return [
        ("/", "days behind upstream"),
        ("/ingestion", "conflicts kept for a person"),
        (f"/ingestion/units/{info.unit_ids[0]}", "bundle-1"),
        (f"/ingestion/conflicts/{info.conflict_ids[0]}", "WarpSpec.cpp"),
        ("/validation", "L3 requests and sign-offs"),
        (f"/validation/runs/{info.nightly_run_ids[11]}", "failed tests"),
        (f"/validation/l3/{info.l3_request_ids[0]}", "fsdp-training"),
        ("/l2", "alerts"),
        (f"/l2/metrics/{metric}", metric),
        (f"/l2/alerts/{info.alert_ids[1]}", "culprit"),
        (f"/l2/bisections/{info.bisection_ids[0]}", "stages"),
        (f"/commits/{info.culprit_upstream}", "named by bisections"),
        ("/triage", "trunk health"),
        (f"/triage/groups/{info.group_keys[0]}", "failures"),
    ]


def _api(path: str) -> str:
    return "/api/overview" if path == "/" else "/api" + path


def charts_of(html: str) -> dict[str, Any]:
    m = re.search(r'<script type="application/json" id="ff-charts">(.*?)</script>', html, re.S)
    assert m, "the page carries no chart data"
    return json.loads(m.group(1))  # type: ignore[no-any-return]


def test_every_page_answers_html_and_the_same_json(client: TestClient, seeded: tuple[str, SeedInfo]) -> None:
    for path, text in _pages(seeded[1]):
        r = client.get(path)
        assert r.status_code == 200, (path, r.text[-500:])
        assert r.headers["content-type"].startswith("text/html")
        assert text in r.text, path
        api = client.get(_api(path))
        assert api.status_code == 200 and api.headers["content-type"] == "application/json", path
        accept = client.get(path, headers={"Accept": "application/json"})
        assert accept.json() == api.json(), path


def test_overview_numbers_come_from_the_ledger(client: TestClient, seeded: tuple[str, SeedInfo]) -> None:
    doc = client.get("/api/overview").json()
    led = doc["ledger"]
    assert led["upstream_commits"] == SMALL.upstream_commits
    assert sum(led["counts"].values()) == SMALL.upstream_commits
    assert led["counts"]["SKIPPED"] > 0 and led["counts"]["DEFERRED"] > 0 and led["counts"]["PENDING"] > 0
    assert led["upstream_tip"]["sha"] == seeded[1].upstream[-1]
    def ts(iso: str) -> float:  # dates are ISO 8601 UTC, as in `status --json`
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    assert led["upstream_tip"]["date"].endswith("Z") and led["computed_at"].endswith("Z")
    days = (ts(led["upstream_tip"]["date"]) - ts(led["ingestion_point"]["date"])) / 86400
    assert led["days_behind"] == pytest.approx(days, abs=0.01)
    assert all("T" in str(p["taken_at"]) for p in doc["history"])
    assert len(doc["history"]) == SMALL.days
    assert doc["attention"]["open_conflicts"] == 1 and doc["attention"]["l3_waiting"] == 1
    html = client.get("/").text
    chart = charts_of(html)["days-behind"]
    assert len(chart["y"]) == SMALL.days and chart["y"][0] == doc["history"][0]["days_behind"]


def test_l2_series_alerts_and_culprit(client: TestClient, seeded: tuple[str, SeedInfo]) -> None:
    info = seeded[1]
    doc = client.get("/api/l2").json()
    assert [m["name"] for m in doc["metrics"]] == sorted(info.metric_names)
    assert all(m["points"] == SMALL.days for m in doc["metrics"])
    assert {a["id"] for a in doc["alerts"]} == set(info.alert_ids)
    bisected = next(a for a in doc["alerts"] if a["id"] == info.alert_ids[1])
    assert bisected["culprit"]["upstream_commit"] == info.culprit_upstream
    assert bisected["direction"] == "regression"
    charts = charts_of(client.get("/l2").text)
    assert len(charts) == len(info.metric_names)
    marked = [c for c in charts.values() if c["marks"]]
    assert marked, "no series carries its alert"
    for c in marked:
        assert len(c["y"]) == SMALL.days
        for mark in c["marks"]:
            assert mark["href"] in {f"/l2/alerts/{i}" for i in info.alert_ids}
            assert 0 <= mark["before"] < mark["after"] < SMALL.days
    one = client.get("/api/l2", params={"q": "softmax/*"}).json()
    assert one["metrics"] and all(m["name"].startswith("softmax/") for m in one["metrics"])


def test_seeded_alerts_agree_with_the_seeded_series(client: TestClient, seeded: tuple[str, SeedInfo]) -> None:
    import statistics

    alerts = client.get("/api/l2").json()["alerts"]
    assert sorted(a["direction"] for a in alerts) == ["improvement", "regression"]
    for a in alerts:
        for m in a["members"]:
            points = client.get(f"/api/l2/metrics/{m['metric']}").json()["points"]
            revs = [p["rev"] for p in points]
            at = revs.index(m["bad_rev"])
            assert revs[at - 1] == m["good_rev"]
            values = [p["value"] for p in points]
            before, after = statistics.median(values[at - 6:at]), statistics.median(values[at:at + 6])
            assert (m["before"], m["after"]) == pytest.approx((before, after)), m["metric"]
            worse = after > before if m["better"] == "lower" else after < before
            assert m["direction"] == ("regression" if worse else "improvement") == a["direction"], m
            assert abs(m["magnitude"]) > 0.04, m  # a step, not noise


def test_alert_page_links_to_the_culprit_commit(client: TestClient, seeded: tuple[str, SeedInfo]) -> None:
    info = seeded[1]
    assert info.culprit_upstream is not None
    html = client.get(f"/l2/alerts/{info.alert_ids[1]}").text
    assert f'href="/commits/{info.culprit_upstream}"' in html
    commit = client.get(f"/api/commits/{info.culprit_upstream}").json()
    assert commit["upstream"]["subject"] == info.culprit_subject
    assert commit["bisections"][0]["as"] == "upstream commit"
    short = client.get(f"/api/commits/{info.culprit_upstream[:10]}").json()
    assert short["sha"] == info.culprit_upstream


def test_validation_counts_and_saturation_alarms(client: TestClient, seeded: tuple[str, SeedInfo]) -> None:
    info = seeded[1]
    doc = client.get("/api/validation").json()
    l2 = {r["id"]: r for r in doc["tiers"]["L2"]}
    red = l2[info.nightly_run_ids[40]]  # red nightlies: day % 29 == 11
    assert (red["status"], red["failed"], red["skipped"]) == ("FAIL", 1, 3)
    assert red["passed"] == 3 * SMALL.tests_per_run - 4
    short = l2[info.nightly_run_ids[SMALL.days - 5]]  # lit ran 2 tests short
    assert any("ran 4 tests, expected 6" in a for a in short["alarms"])
    assert len(doc["tiers"]["L1"]) == len(info.candidates)
    states = {r["id"]: r["state"] for r in doc["l3_requests"]}
    assert states == {info.l3_request_ids[0]: "RAN", info.l3_request_ids[1]: "ACCEPTED"}
    bars = charts_of(client.get("/validation").text)["tier-L2"]
    assert bars["cls"].count("FAIL") == sum(1 for r in doc["tiers"]["L2"] if r["status"] == "FAIL")


def test_bar_charts_carry_only_what_charts_js_draws(client: TestClient) -> None:
    for path, key in (("/triage", "trunk"), ("/validation", "tier-L2")):
        bars = charts_of(client.get(path).text)[key]
        assert set(bars) == {"type", "title", "unit", "y", "cls", "labels", "href"}, path
        assert len(bars["y"]) == len(bars["cls"]) == len(bars["labels"]) == len(bars["href"]) > 0


def test_run_page_shows_the_alarms_of_the_list(client: TestClient, seeded: tuple[str, SeedInfo]) -> None:
    run_id = seeded[1].nightly_run_ids[SMALL.days - 5]  # lit ran 2 tests short
    listed = {r["id"]: r for r in client.get("/api/validation").json()["tiers"]["L2"]}[run_id]
    doc = client.get(f"/api/validation/runs/{run_id}").json()
    assert doc["run"]["alarms"] == listed["alarms"]
    assert doc["run"]["alarms"] == [f"{j['suite']}: {f}" for j in doc["jobs"] for f in j["findings"]]
    assert any("ran 4 tests, expected 6" in a for a in doc["run"]["alarms"])


def test_ingestion_units_conflicts_and_waiting(client: TestClient, seeded: tuple[str, SeedInfo]) -> None:
    info = seeded[1]
    doc = client.get("/api/ingestion").json()
    assert {u["id"] for u in doc["units"]} == set(info.unit_ids)
    statuses = {u["name"].split(" ")[0]: u["status"] for u in doc["units"]}
    assert statuses["warp-spec#2"] == "conflict" and statuses["bundle-1"] == "landed"
    assert all(u["l1"]["status"] == "PASS" for u in doc["units"] if u["candidate_sha"])
    assert [c["id"] for c in doc["conflicts"]] == info.conflict_ids
    assert doc["waiting"] and all(w["reason"].startswith("chain warp-spec") for w in doc["waiting"])
    unit = client.get(f"/api/ingestion/units/{info.unit_ids[0]}").json()
    assert len(unit["members"]) == 40 and all(m["subject"] for m in unit["members"])


def test_ingestion_shows_every_routing_reason(client: TestClient, seeded: tuple[str, SeedInfo]) -> None:
    doc = client.get("/api/ingestion").json()
    by = {u["name"].split(" ")[0]: u for u in doc["units"]}
    assert len(by["bundle-1"]["reasons"]) == 40
    assert set(by["bundle-1"]["reasons"].values()) == {"low risk: touches no chain, pin file or fork change"}
    assert list(by["llvm-pin"]["reasons"].values()) == ["updates pin file cmake/llvm-hash.txt"]
    html = client.get("/ingestion").text
    assert "why routed here" in html and "updates pin file cmake/llvm-hash.txt" in html
    assert "declared in chain warp-spec" in html
    warp = by["warp-spec#1"]
    unit = client.get(f"/api/ingestion/units/{warp['id']}").json()
    (member,) = unit["members"]
    assert member["routing_reason"].startswith("touches lib/Dialect/TritonGPU/Transforms/WarpSpec.cpp")
    assert unit["unit"]["reasons"] == {member["sha"]: member["routing_reason"]}
    page = client.get(f"/ingestion/units/{warp['id']}").text
    assert "why routed here" in page and "declared in chain warp-spec" in page


def test_triage_groups_classes_health_and_tracking(client: TestClient, seeded: tuple[str, SeedInfo]) -> None:
    info = seeded[1]
    doc = client.get("/api/triage").json()
    assert {g["key"] for g in doc["groups"]} == set(info.group_keys)
    assert {c for c, n in doc["totals"].items() if n} == {"NEW", "BROKEN_TRUNK", "FLAKY", "INFRA"}
    tracked = next(g for g in doc["groups"] if g["key"] == info.group_keys[0])
    assert tracked["tracking"][0]["issue_id"] == "issue-1"
    assert doc["health"]["state"] in ("green", "red") and doc["health"]["runs"] > 0
    group = client.get(f"/api/triage/groups/{info.group_keys[0]}").json()
    assert group["failures"] and all("CUDA error" in f["excerpt"] for f in group["failures"])


def test_the_fill_hint_comes_only_with_an_empty_page(client: TestClient) -> None:
    for path in ("/", "/ingestion", "/validation", "/l2", "/triage"):
        doc = client.get(_api(path)).json()
        assert doc["empty"] is False and "hint" not in doc, path


@pytest.mark.parametrize("path,word", [
    ("/l2/alerts/999", "no L2 alert 999"), ("/l2/bisections/999", "no bisection 999"),
    ("/l2/metrics/no/such:metric", "no metric named"), ("/ingestion/units/999", "no landing unit 999"),
    ("/ingestion/conflicts/999", "no conflict 999"), ("/validation/runs/99999", "no validation run 99999"),
    ("/validation/l3/999", "no L3 request 999"), ("/triage/groups/0123456789abcdef", "no failure group"),
    ("/commits/0123456789abcdef", "no commit 0123456789abcdef"), ("/no-such-page", "no such page"),
])
def test_unknown_ids_answer_404_with_a_message(client: TestClient, path: str, word: str) -> None:
    html = client.get(path)
    assert html.status_code == 404 and word in html.text
    api = client.get(_api(path))
    assert api.status_code == 404 and word in api.json()["error"]


@pytest.mark.parametrize("path,word", [
    ("/l2/alerts/abc", "alert_id"), ("/commits/not-a-sha", "not a commit sha"),
    ("/validation/runs/1.5", "run_id"), ("/triage/groups/zz", "16 hex digits"),
    ("/triage/groups/0123456789abcdef0", "16 hex digits"),
])
def test_malformed_ids_answer_400(client: TestClient, path: str, word: str) -> None:
    r = client.get(_api(path))
    assert r.status_code == 400 and word in r.json()["error"]


@pytest.mark.parametrize("path", ["/ingestion/units/{}", "/ingestion/conflicts/{}", "/validation/runs/{}",
                                  "/validation/l3/{}", "/l2/alerts/{}", "/l2/bisections/{}"])
@pytest.mark.parametrize("row_id", [2**63, 0, -1, 10**20])
def test_ids_outside_the_stores_row_ids_answer_400(client: TestClient, path: str, row_id: int) -> None:
    r = client.get(_api(path.format(row_id)))
    assert r.status_code == 400 and r.json()["error"].startswith("bad request: "), r.text
    html = client.get(path.format(row_id))
    assert html.status_code == 400 and "bad request" in html.text
    assert client.get(_api(path.format(2**63 - 1))).status_code == 404  # the largest id is only unknown


def test_conflict_page_says_how_each_kind_is_settled(tmp_path: Path) -> None:
    from forkflow.conflicts import records as conflicts

    url = f"sqlite:///{tmp_path / 's.db'}"
    store = Store.open(url)
    text = "<<<<<<< fork\nx = 1\n=======\nx = 2\n>>>>>>> upstream\n"
    kinds = [("content", "k.py", text, "key-1"), ("binary", "logo.png", "", ""),
             ("delete/modify", "gone.py", "", ""), ("submodule", "third_party/llvm", "", "")]
    with store.session_scope() as s:
        fid = forks.fork_id(s, "f:main")
        ids = [conflicts.upsert_conflict(s, fid, upstream_sha=sha_of(path), subject="a change", path=path,
                                         kind=kind, chain="", base_sha=sha_of("base"), key=key, marked=marked,
                                         tried=[]) for kind, path, marked, key in kinds]
    store.dispose()
    with TestClient(create_app(url)) as c:
        settle = [c.get(f"/api/ingestion/conflicts/{i}").json()["settle"] for i in ids]
        html = c.get(f"/ingestion/conflicts/{ids[1]}").text
    assert f"forkflow conflicts resolve {ids[0]} --file FILE" in settle[0]
    for line in settle[1:]:
        assert "conflicts resolve" not in line and "git cherry-pick -x" in line
    assert "git checkout --theirs -- logo.png" in settle[1] and "git rm -- gone.py" in settle[2]
    assert "git update-index --cacheinfo 160000,COMMIT,third_party/llvm" in settle[3]
    assert "git checkout --theirs -- logo.png" in html and "conflicts resolve" not in html


def test_hostile_text_is_escaped_never_executed(client: TestClient, seeded: tuple[str, SeedInfo]) -> None:
    info = seeded[1]
    hostile_commit = info.upstream[3]  # seeded with HTML in its subject
    pages = ["/ingestion", f"/ingestion/units/{info.unit_ids[3]}", f"/commits/{hostile_commit}",
             f"/validation/runs/{info.nightly_run_ids[11]}", "/triage",
             f"/triage/groups/{info.group_keys[0]}"]
    for path in pages:
        r = client.get(path)
        assert r.status_code == 200, path
        assert "<script>window.__pwned" not in r.text, path
        assert 'onerror="window' not in r.text, path
        assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in r.text, path
        assert "script-src 'self'" in r.headers["content-security-policy"]
        assert r.headers["x-content-type-options"] == "nosniff"
    assert client.get(f"/api/commits/{hostile_commit}").json()["upstream"]["subject"].endswith(HOSTILE)


def test_chart_data_cannot_close_its_script_block(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = Store.open(url)
    evil = "</script><script>window.__pwned=1</script>"
    with store.session_scope() as s:
        fid = forks.fork_id(s, "f")
        regress_records.add_metric_points(s, fid, [MetricPoint(f"m{evil}", sha_of(str(i)), 1.0 + i, evil, Better.HIGHER,
                                                       commit_date=1_700_000_000 + i) for i in range(3)])
    with TestClient(create_app(url)) as c:
        html = c.get("/l2").text
    block = re.search(r'id="ff-charts">(.*?)</script>', html, re.S)
    assert block is not None and "<" not in block.group(1)
    assert json.loads(block.group(1))["m0"]["unit"] == evil
    assert "<script>window.__pwned" not in html


def test_metric_page_shows_the_series_detect_reads(tmp_path: Path) -> None:
    from forkflow.regress.alerts import collapse

    url = f"sqlite:///{tmp_path / 's.db'}"
    store = Store.open(url)
    values = [5.0, 1.0, 2.0, 9.0, 4.0, 3.0, 7.0]  # commit 1 measured 4 times, commit 2 twice
    revs = [0, 1, 1, 2, 1, 1, 2]
    with store.session_scope() as s:
        fid = forks.fork_id(s, "f")
        regress_records.add_metric_points(s, fid, [MetricPoint("m", sha_of(str(r)), v, "ms", Better.LOWER,
                                                       commit_date=1_700_000_000 + r)
                                           for r, v in zip(revs, values)])
        stored = regress_records.metric_series(s, fid, "m")
    with TestClient(create_app(url)) as c:
        points = c.get("/api/l2/metrics/m").json()["points"]
    assert [(p["rev"], p["value"], p["measurements"]) for p in points] == [
        (p.rev, p.value, p.count) for p in collapse(stored)]
    assert [(p["value"], p["measurements"]) for p in points] == [(5.0, 1), (2.5, 4), (8.0, 2)]


def test_collapse_values_is_np_median_per_commit() -> None:
    import math
    import random

    import numpy as np

    from forkflow.regress.alerts import collapse_values

    rnd = random.Random(3)
    revs = [Sha(sha_of(str(rnd.randint(0, 40)))) for _ in range(300)]
    values = [rnd.gauss(10, 2) for _ in revs]
    values[7] = math.nan
    out_revs, out_values, counts = collapse_values(revs, values)
    assert list(out_revs) == list(dict.fromkeys(revs)) and sum(counts) == len(revs)
    for rev, value, n in zip(out_revs, out_values, counts):
        mine = [v for r, v in zip(revs, values) if r == rev]
        assert n == len(mine)
        expected = float(np.median(mine))
        assert value == expected or (math.isnan(value) and math.isnan(expected)), rev


def test_empty_store_pages_explain_how_to_fill_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    hints = {"/": "forkflow status", "/ingestion": "forkflow ingest --land", "/validation": "forkflow validate",
             "/l2": "forkflow nightly", "/triage": "forkflow triage"}
    with TestClient(create_app(url)) as c:
        for path, hint in hints.items():
            r = c.get(path)
            assert r.status_code == 200 and hint in r.text, path
            doc = c.get(_api(path)).json()
            assert doc["empty"] is True and hint in doc["hint"], path
        other = Store.open(url)
        with other.session_scope() as s:  # a fork appears while the dashboard runs, still empty
            forks.fork_id(s, "lonely:main")
        other.dispose()
        for path, hint in hints.items():
            r = c.get(path)
            assert hint in r.text and "lonely:main" in r.text, path


def test_overview_without_a_status_snapshot_still_shows_what_needs_a_person(tmp_path: Path) -> None:
    from forkflow.regress import records
    from forkflow.regress.alerts import AlertDraft, SeriesChange
    from forkflow.tiers import records as tq
    from forkflow.tiers.tiers import RunStatus, Tier

    url = f"sqlite:///{tmp_path / 's.db'}"
    store = Store.open(url)
    good, bad = Sha(sha_of("good")), Sha(sha_of("bad"))
    with store.session_scope() as s:
        fid = forks.fork_id(s, "forkm:main")
        records.save_alerts(s, fid, [AlertDraft(good, bad, (SeriesChange(
            "matmul/m128:latency", "ms", Better.LOWER, good, bad, 1.0, 1.2, 0.2, 0.001),))])
        run_id, _ = tq.create_run(s, fid, tq.NewRun(Tier.L2, bad, None, "local", "nightly", 0, (), ("perf",), {}), [])
        tq.finish_run(s, run_id, RunStatus.FAIL, "perf failed", ())
    store.dispose()
    with TestClient(create_app(url)) as c:
        doc = c.get("/api/overview").json()
        html = c.get("/").text
    assert doc["empty"] is False and doc["ledger"] is None and doc["history"] == []
    assert doc["attention"]["open_alerts"] == 1 and doc["attention"]["trunk"]["run_id"] == run_id
    assert "open L2 alerts" in html and "trunk (newest nightly)" in html and "no history yet" in html
    assert "nothing stored for this fork yet" not in html


def test_pages_read_while_the_store_is_written(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'busy.db'}"
    store = Store.open(url)
    seed_store(store, "f:main", SeedSize(days=20, metrics=3, upstream_commits=60, tests_per_run=3))
    stop = threading.Event()
    written = [0]

    def writer() -> None:
        w = Store.open(url)
        i = 0
        while not stop.is_set():
            with w.session_scope() as s:
                fid = forks.fork_id(s, "f:main")
                regress_records.add_metric_points(s, fid, [MetricPoint(f"live/m{i % 3}", Sha(sha_of(f"live{i}")),
                                                               float(i), "s", Better.LOWER,
                                                               commit_date=1_800_000_000 + i)])
            i += 1
            written[0] = i
        w.dispose()

    t = threading.Thread(target=writer)
    t.start()
    try:
        with TestClient(create_app(url)) as c:
            start = time.monotonic()
            seen = {0}
            # read for a second at least, and on until the writer's metrics show (60 s at most)
            while time.monotonic() < start + 1 or not (written[0] > 5 and max(seen) > 3):
                assert time.monotonic() < start + 60, "the readers never saw the writer's metrics"
                for path in ("/", "/l2", "/validation", "/api/l2"):
                    r = c.get(path)
                    assert r.status_code == 200, (path, r.text[-300:])
                seen.add(len(c.get("/api/l2").json()["metrics"]))
    finally:
        stop.set()
        t.join()
    assert written[0] > 5 and max(seen) > 3  # the writer got through, and readers saw its metrics


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_bad_inputs(tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    store = f"sqlite:///{tmp_path / 's.db'}"
    r = cli("serve")
    assert r.rc == 1 and "no forkflow.toml" in r.err and "--store" in r.err
    r = cli("serve", "--store", store, "--token", "short")
    assert r.rc == 1 and "shorter than 8" in r.err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        # a viewer never creates a store: a mistyped path is an error (the busy port stops a server
        # from starting if it were not)
        typo = tmp_path / "nonexist" / "x.db"
        r = cli("serve", "--store", f"sqlite:///{typo}", "--port", str(port))
        assert r.rc == 1 and f"no forkflow store at {typo}" in r.err and len(r.err.strip().splitlines()) == 1
        monkeypatch.setenv("FORKFLOW_STORE", f"sqlite:///{typo}")
        r = cli("serve", "--port", str(port))
        assert r.rc == 1 and "no forkflow store at" in r.err
        monkeypatch.delenv("FORKFLOW_STORE")
        assert not typo.parent.exists()
        Store.open(store).dispose()  # the checks below need a store that exists
        r = cli("serve", "--store", store, "--port", str(port))
    assert r.rc == 1 and f"port {port}" in r.err and "in use" in r.err
    r = cli("serve", "--store", store, "--fork", "nope")
    assert r.rc == 1 and "no fork named 'nope'" in r.err


def test_serve_demo_refuses_a_keep_that_is_not_a_new_folder(tmp_path: Path) -> None:
    from rich.console import Console

    from forkflow.errors import UserError
    from forkflow.web.serve import serve_demo

    taken = tmp_path / "taken"
    taken.write_text("a file\n")
    with pytest.raises(UserError, match="is a file, not a folder; pass a new folder to --keep"):
        serve_demo(taken, Console(), port=_free_port(), open_browser=False)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(UserError, match="is not empty"):
        serve_demo(tmp_path / "full", Console(), port=_free_port(), open_browser=False)


def test_demo_serve_shows_the_whole_product(tmp_path: Path) -> None:
    import subprocess
    import sys
    import urllib.request

    port = _free_port()
    exe = Path(sys.executable).parent / "forkflow"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "forkflow"]
    log = tmp_path / "demo.log"
    with log.open("w") as out:
        proc = subprocess.Popen([*cmd, "demo", "--serve", "--port", str(port), "--keep", str(tmp_path / "demo")],
                                cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "BROWSER": "true"})
    base = f"http://127.0.0.1:{port}"

    def get(path: str) -> Any:
        with urllib.request.urlopen(base + path, timeout=10) as r:
            return json.loads(r.read())

    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                overview = get("/api/overview")
                break
            except OSError:
                assert proc.poll() is None, log.read_text()[-2000:]
                assert time.monotonic() < deadline, "the demo's dashboard did not come up"
                time.sleep(0.5)
        assert overview["ledger"]["counts"]["PICKED"] > 0
        # a simulated year of days behind, ending before the demo's own `status` snapshots
        history = overview["history"]
        assert len(history) >= 365 + 2 and [h["source"] for h in history[-2:]] == ["status", "status"]
        assert history[0]["taken_at"] < history[-1]["taken_at"]
        ingestion = get("/api/ingestion")
        assert {u["status"] for u in ingestion["units"]} >= {"landed", "failed"} and ingestion["conflicts"]
        l2 = get("/api/l2")
        assert {m["points"] for m in l2["metrics"]} == {365}  # "a simulated year", as the banner says
        culprit = next(a["culprit"] for a in l2["alerts"] if a["culprit"])
        commit = get(f"/api/commits/{culprit['upstream_commit']}")
        assert commit["upstream"]["disposition"] == "PICKED"  # a real commit of the sample fork
        assert get("/api/validation")["tiers"]["L2"] and get("/api/triage")["groups"]
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert (tmp_path / "demo" / "sample" / "fork" / "forkflow.toml").is_file()  # --keep kept it


def test_a_filter_that_matches_nothing_says_so_not_that_nothing_was_measured(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    store = Store.open(url)
    with store.session_scope() as s:
        forks.fork_id(s, "f:main")
    store.dispose()
    with TestClient(create_app(url)) as c:
        doc = c.get("/api/l2", params={"q": "matmul/*"}).json()
        assert doc["empty"] and doc["hint"].startswith("no stored metric matches 'matmul/*'")
        assert c.get("/api/l2").json()["hint"].startswith("no L2 measurements yet")
