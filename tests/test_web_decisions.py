"""The decisions page: every decision a person (or a configured rule) recorded, filtered and paged."""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from forkflow.context import open_context
from forkflow.ledger import records as ledger_records
from forkflow.models import Decider, Decision, Disposition, RecordedDecision, Sha
from forkflow.store import forks
from forkflow.store.session import Store
from forkflow.testing.gitrepo import ForkBuilder
from forkflow.testing.seed import HOSTILE, sha_of
from forkflow.web.app import create_app

ALICE = "Alice Example <alice@example.com>"
BOB = "Bob <bob@example.com>"


def _person(sha: Sha, verdict: Decision, who: str, reason: str, task: str = "",
            until: str | None = None) -> RecordedDecision:
    return RecordedDecision(sha, verdict.disposition, reason, source=Decider.PERSON, verdict=verdict,
                            until=until, task=task, decided_by=who)


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """120 decisions of two people (the oldest first), one hostile, and forkflow's own holds."""
    url = f"sqlite:///{tmp_path_factory.mktemp('decisions') / 'store.db'}"
    store = Store.open(url)
    with store.session_scope() as s:
        fid = forks.fork_id(s, "triton:main")
        for i in range(120):
            verdict = (Decision.SKIP, Decision.DEFER, Decision.WONT_PORT)[i % 3]
            ledger_records.record_decision(s, fid, _person(
                sha_of(f"up-{i}"), verdict, ALICE if i % 2 else BOB, f"reason number {i}",
                until="2099-01-01" if verdict is Decision.DEFER else None))
        ledger_records.record_decision(s, fid, _person(sha_of("hostile"), Decision.WONT_PORT, f"Mallory {HOSTILE}",
                                                       f"not ours {HOSTILE}", task="javascript:alert(1)"))
        ledger_records.record_decision(s, fid, _person(sha_of("linked"), Decision.DEFER, ALICE, "after the release",
                                                       task="https://tracker.example/T-42", until="2099-02-03"))
        for i in range(5):  # forkflow's own: a conflict held
            ledger_records.record_decision(s, fid, RecordedDecision(sha_of(f"auto-{i}"), Disposition.DEFERRED,
                                                                    "chain x: conflict in a.py"))
    store.dispose()
    yield url


@pytest.fixture(scope="module")
def client(store_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(store_url)) as c:
        yield c


def test_decisions_lists_peoples_decisions_newest_first_and_not_forkflows_holds(client: TestClient) -> None:
    doc = client.get("/api/decisions").json()
    assert doc["total"] == 122  # 120 + the hostile one + the linked one; the 5 automatic holds are not decisions
    rows = doc["decisions"]
    assert len(rows) == 50 and doc["pager"]["pages"] == 3
    assert rows[0]["sha"] == sha_of("linked") and rows[1]["sha"] == sha_of("hostile")
    assert all(r["source"] == "person" for r in rows)
    first = rows[0]
    assert (first["verdict"], first["decided_by"], first["reason"], first["until"]) == (
        "defer", ALICE, "after the release", "2099-02-03")
    assert first["task_href"] == "https://tracker.example/T-42" and first["decided_at"]
    seen = {r["sha"] for p in (1, 2, 3) for r in client.get(f"/api/decisions?page={p}").json()["decisions"]}
    assert len(seen) == 122 and not any(sha_of(f"auto-{i}") in seen for i in range(5))


def test_decisions_filter_by_kind_and_person(client: TestClient) -> None:
    skip = client.get("/api/decisions", params={"kind": "skip"}).json()
    assert skip["total"] == 40 and {r["verdict"] for r in skip["decisions"]} == {"skip"}
    alice = client.get("/api/decisions", params={"person": ALICE}).json()
    assert alice["total"] == 61 and {r["decided_by"] for r in alice["decisions"]} == {ALICE}
    both = client.get("/api/decisions", params={"person": BOB, "kind": "wont-port"}).json()
    assert both["total"] == 20  # i % 3 == 2 and i even, i < 120
    assert {(r["decided_by"], r["verdict"]) for r in both["decisions"]} == {(BOB, "wont-port")}
    assert ALICE in alice["people"] and BOB in alice["people"]
    page = client.get("/decisions", params={"person": BOB, "kind": "wont-port"}).text
    assert 'selected>wont-port</option>' in page and "20 decisions; page 1 of 1" in page


def test_decisions_pager_links_keep_the_filter(client: TestClient) -> None:
    page = client.get("/decisions", params={"person": ALICE}).text
    older = re.search(r'<a href="([^"]+)" rel="next">', page)
    assert older is not None and older.group(1) == "/decisions?person=Alice+Example+%3Calice%40example.com%3E&amp;page=2"
    doc = client.get("/api/decisions", params={"person": ALICE, "page": 2}).json()
    assert doc["total"] == 61 and len(doc["decisions"]) == 11 and doc["pager"]["next"] is None
    assert doc["pager"]["prev"] == "/decisions?person=Alice+Example+%3Calice%40example.com%3E&page=1"


@pytest.mark.security
def test_decisions_page_escapes_names_reasons_and_links_only_http_tasks(client: TestClient) -> None:
    page = client.get("/decisions").text
    assert HOSTILE not in page and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    assert 'href="javascript:' not in page and "javascript:alert(1)" in page  # shown, as text
    assert '<a href="https://tracker.example/T-42" rel="noreferrer noopener">' in page
    filtered = client.get("/decisions", params={"person": f"Mallory {HOSTILE}"})
    assert filtered.status_code == 200 and HOSTILE not in filtered.text
    assert filtered.text.count("not ours") == 1


@pytest.mark.security
@pytest.mark.parametrize("query", ["page=abc", "page=0", "page=-3", "page=99999999999999999999",
                                   "kind=maybe", "kind=%3Cscript%3E", "person=" + "x" * 500])
def test_decisions_refuses_malformed_queries_with_one_line(client: TestClient, query: str) -> None:
    for path in ("/decisions", "/api/decisions"):
        r = client.get(f"{path}?{query}")
        assert r.status_code == 400, (query, r.text[-300:])
        if path.startswith("/api"):
            message = r.json()["error"]
            assert "\n" not in message and message
        else:
            assert "<script>" not in r.text


def test_decisions_page_past_the_end_is_empty_not_an_error(client: TestClient) -> None:
    doc = client.get("/api/decisions?page=9").json()
    assert doc["decisions"] == [] and doc["total"] == 122 and doc["pager"]["prev"] == "/decisions?page=8"


def test_decisions_empty_store_says_how_to_fill_it(tmp_path: Path) -> None:
    with TestClient(create_app(f"sqlite:///{tmp_path / 'empty.db'}")) as c:
        doc = c.get("/api/decisions").json()
        assert doc["empty"] and "forkflow decide" in doc["hint"]
        assert "forkflow decide" in c.get("/decisions").text


def test_nav_links_the_decisions_page(client: TestClient) -> None:
    assert '<a href="/decisions"' in client.get("/").text


def test_a_decision_made_with_forkflow_decide_is_on_the_page(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"README": "hello\n"}, "Initial")
    builder.branch_fork()
    sha = builder.upstream_commit({"lib/v.py": "V = 2\n"}, "Bump version (#7)")
    other = builder.upstream_commit({"lib/w.py": "W = 2\n"}, "Touch w (#8)")
    builder.fetch()
    assert cli("init", "--upstream", "upstream", repo=builder.f.path).rc == 0
    assert cli("decide", sha, "--wont-port", "--reason", "version bumps stay upstream",
               "--task", "https://tracker.example/T-7", repo=builder.f.path).rc == 0
    assert cli("decide", other, "--defer", "--reason", "after the release", "--until", "2099-12-31",
               repo=builder.f.path).rc == 0
    with TestClient(create_app(open_context(builder.f.path))) as c:
        rows = {r["sha"]: r for r in c.get("/api/decisions").json()["decisions"]}
        page = c.get("/decisions").text
    assert set(rows) == {sha, other}
    assert rows[sha]["verdict"] == "wont-port" and rows[sha]["subject"] == "Bump version (#7)"
    assert rows[sha]["decided_by"] == rows[other]["decided_by"] != ""
    assert rows[other]["until"] == "2099-12-31"
    assert f'href="/commits/{sha}"' in page and "version bumps stay upstream" in page
    assert '<a href="https://tracker.example/T-7"' in page


def test_404_lists_every_top_level_page_from_the_routes(client: TestClient) -> None:
    message = client.get("/api/no-such-page").json()["error"]
    for page in ("/ (overview)", "/ingestion", "/validation", "/l2", "/triage", "/decisions", "/replay",
                 "/commits/SHA"):
        assert page in message, (page, message)
    html = client.get("/no-such-page")
    assert html.status_code == 404 and "/decisions" in html.text


def test_a_configured_rules_decisions_are_listed_with_the_rule(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"README": "hello\n"}, "Initial")
    builder.branch_fork()
    opted = builder.upstream_commit({"lib/z.py": "Z = 1\n"}, "Bump version (#399)", body="[no-downstream]")
    decided = builder.upstream_commit({"lib/w.py": "W = 2\n"}, "Touch w (#8)")
    builder.fetch()
    assert cli("init", "--upstream", "upstream", repo=builder.f.path).rc == 0
    cfg = builder.f.path / "forkflow.toml"
    cfg.write_text(cfg.read_text().replace("infer_threshold = 0.95",
                                           "infer_threshold = 0.95\nopt_out = ['\\[no-downstream\\]']"))
    assert cli("decide", decided, "--skip", "--reason", "not for us", repo=builder.f.path).rc == 0
    with TestClient(create_app(open_context(builder.f.path))) as c:
        doc = c.get("/api/decisions").json()
        page = c.get("/decisions").text
        by_rule = c.get("/api/decisions", params={"person": "[ledger] opt_out"}).json()
        deferrals = c.get("/api/decisions", params={"kind": "defer"}).json()
    assert [r["sha"] for r in doc["decisions"]] == [decided]
    (rule,) = doc["in_history"]
    assert (rule["sha"], rule["source"], rule["decided_by"], rule["verdict"]) == (
        opted, "rule", "[ledger] opt_out", "skip")
    assert "no-downstream" in rule["reason"] and "[ledger] opt_out" in doc["people"]
    assert 'id="decisions-in-history"' in page and f'href="/commits/{opted}"' in page
    assert by_rule["decisions"] == [] and [r["sha"] for r in by_rule["in_history"]] == [opted]
    assert deferrals["in_history"] == [] and deferrals["decisions"] == []
