"""Actions on the dashboard: the operator token, checked server-side, and the actions log."""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from forkflow import wiring
from forkflow.context import Context, open_context
from forkflow.models import UnitState
from forkflow.testing.gitrepo import ForkBuilder
from forkflow.tiers import l3
from forkflow.tiers import records as tq
from forkflow.tiers.reports import TestOutcome, TestResult
from forkflow.tiers.tiers import RunStatus, Tier
from forkflow.web.app import create_app
from tests.test_ingest import _blocked_fork

TOKEN = "operator-token-0123456789"
SUITES = """
[[suite]]
name = "soak"
tier = "L3"
command = "python -c pass"
report = "junit"
owners = ["perf-oncall"]

[[suite]]
name = "unit"
tier = "L1"
command = "python -c pass"
report = "junit"
"""


@dataclass
class Fork:
    ctx: Context
    request_id: int
    run_id: int
    log: Path
    failed_run_id: int


@pytest.fixture
def fork(builder: ForkBuilder, cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fork:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FORKFLOW_TOKEN_OWNER", "perf-oncall")  # whom the dashboard's token belongs to
    builder.upstream_commit({"a.py": "A = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"mine.py": "M = 1\n"}, "[fork] ours")
    assert cli("init", "--upstream", "upstream", repo=builder.f.path).rc == 0
    with (builder.f.path / "forkflow.toml").open("a", encoding="utf-8") as f:
        f.write(SUITES)
    ctx = open_context(builder.f.path)
    request_id = l3.request(wiring.validator(ctx), "soak", "main", by="alice", note="before the branch cut")
    with ctx.store.session_scope() as s:  # a finished L3 run of the request
        run_id, _ = tq.create_run(s, ctx.fork_id, tq.NewRun(Tier.L3, ctx.repo.resolve("main"), None,  # type: ignore[arg-type]
                                                            "local", "l3", 0, (), ("soak",), {},
                                                            l3_request_id=request_id), [])
        tq.finish_run(s, run_id, RunStatus.PASS, "soak passed", ())
        bad_run, jobs = tq.create_run(s, ctx.fork_id, tq.NewRun(Tier.L1, ctx.repo.resolve("main"), None,  # type: ignore[arg-type]
                                                                "local", "validate", 0, (), ("unit",), {}),
                                      [tq.NewJob("unit", "python -c pass", "", "", "", False, None, None)])
        tq.finish_job(s, jobs[0], tq.JobFinish(RunStatus.FAIL, 1, 0.1, "", 1, 1, None, (), (), 1),
                      [TestResult("[unit]", TestOutcome.FAIL, 0.0, "the suite failed")])
        tq.finish_run(s, bad_run, RunStatus.FAIL, "", ())
    return Fork(ctx, request_id, run_id, tmp_path / "actions.log", bad_run)


@pytest.fixture
def client(fork: Fork) -> Iterator[TestClient]:
    with TestClient(create_app(fork.ctx, TOKEN, actions_log=fork.log)) as c:
        yield c


def _signoffs(fork: Fork) -> list[tuple[str, str]]:
    with fork.ctx.store.session_scope() as s:
        req = tq.get_l3_request(s, fork.ctx.fork_id, fork.request_id)
    assert req is not None
    return [(x.owner, x.verdict) for x in req.signoffs]


def _log(fork: Fork | Units) -> list[dict[str, str]]:
    return [json.loads(line) for line in fork.log.read_text().splitlines()]


def _post(c: TestClient, fork: Fork, **fields: str) -> object:
    return c.post(f"/validation/l3/{fork.request_id}/signoff", data=fields, follow_redirects=False)


def test_signoff_without_or_with_a_wrong_token_is_403_and_changes_nothing(client: TestClient, fork: Fork) -> None:
    form = {"owner": "perf-oncall", "verdict": "accept"}
    r = client.post(f"/validation/l3/{fork.request_id}/signoff", data=form)
    assert r.status_code == 403 and "this action needs the operator" in r.text
    r = client.post(f"/validation/l3/{fork.request_id}/signoff", data={**form, "token": "guess-guess"})
    assert r.status_code == 403
    r = client.post(f"/api/validation/l3/{fork.request_id}/signoff", json=form,
                    headers={"X-Forkflow-Token": TOKEN + "x"})
    assert r.status_code == 403 and "token" in r.json()["error"]
    assert all(way in r.json()["error"] for way in ("token field", "X-Forkflow-Token", "Authorization: Bearer"))
    r = client.post(f"/api/validation/l3/{fork.request_id}/signoff", json=form,
                    headers={"Authorization": "Bearer nope"})
    assert r.status_code == 403
    assert _signoffs(fork) == []
    outcomes = [e["outcome"] for e in _log(fork)]
    assert outcomes == ["refused: no token", "refused: wrong token", "refused: wrong token",
                        "refused: wrong token"]


def test_signoff_with_the_token_by_an_owner_is_recorded_and_logged(client: TestClient, fork: Fork,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="forkflow.web.actions"):
        r = client.post(f"/validation/l3/{fork.request_id}/signoff", follow_redirects=False,
                        data={"owner": "perf-oncall", "verdict": "accept", "note": "loss ok", "token": TOKEN})
    assert r.status_code == 303 and r.headers["location"] == f"/validation/l3/{fork.request_id}"
    assert _signoffs(fork) == [("perf-oncall", "accept")]
    page = client.get(f"/validation/l3/{fork.request_id}")
    assert "ACCEPTED" in page.text and "loss ok" in page.text
    r = client.post(f"/api/validation/l3/{fork.request_id}/signoff", headers={"X-Forkflow-Token": TOKEN},
                    json={"owner": "perf-oncall", "verdict": "reject", "note": "regressed"})
    assert r.status_code == 200 and r.json()["verdict"] == "reject"
    assert client.get(f"/api/validation/l3/{fork.request_id}").json()["request"]["state"] == "REJECTED"
    done = [e for e in _log(fork) if e["outcome"] == "done"]
    assert [(e["action"], e["owner"], e["verdict"]) for e in done] == [
        ("l3-signoff", "perf-oncall", "accept"), ("l3-signoff", "perf-oncall", "reject")]
    assert any("l3-signoff" in rec.getMessage() for rec in caplog.records)


def test_signoff_checks_owner_verdict_and_request(client: TestClient, fork: Fork) -> None:
    r = client.post(f"/api/validation/l3/{fork.request_id}/signoff", headers={"X-Forkflow-Token": TOKEN},
                    json={"owner": "mallory", "verdict": "accept"})
    assert r.status_code == 400 and "belongs to 'perf-oncall', not 'mallory'" in r.json()["error"]
    r = client.post(f"/api/validation/l3/{fork.request_id}/signoff", headers={"X-Forkflow-Token": TOKEN},
                    json={"owner": "perf-oncall", "verdict": "maybe"})
    assert r.status_code == 400 and "accept or reject" in r.json()["error"]
    r = client.post("/api/validation/l3/999/signoff", headers={"X-Forkflow-Token": TOKEN},
                    json={"owner": "perf-oncall", "verdict": "accept"})
    assert r.status_code == 404 and "no L3 request 999" in r.json()["error"]
    r = client.post(f"/api/validation/l3/{fork.request_id}/signoff", headers={"X-Forkflow-Token": TOKEN,
                                                                             "Content-Type": "application/json"},
                    content=b"[1, 2]")
    assert r.status_code == 400 and "object" in r.json()["error"]
    assert _signoffs(fork) == []


@pytest.mark.parametrize("row_id", [2**63, 0])
def test_actions_on_ids_outside_the_stores_row_ids_are_400_and_logged(client: TestClient, fork: Fork,
                                                                      row_id: int) -> None:
    paths = [f"/api/validation/l3/{row_id}/signoff", f"/api/validation/runs/{row_id}/rerun",
             f"/api/ingestion/units/{row_id}/rerun"]
    for path in paths:
        r = client.post(path, headers={"X-Forkflow-Token": TOKEN}, json={"owner": "perf-oncall", "verdict": "accept"})
        assert r.status_code == 400 and r.json()["error"].startswith("bad request: "), (path, r.text)
    assert [(e["action"], e["target"], e["outcome"].split(":")[0]) for e in _log(fork)] == [
        ("l3-signoff", paths[0], "refused"), ("rerun", paths[1], "refused"), ("unit-rerun", paths[2], "refused")]
    assert _signoffs(fork) == []


def test_actions_with_a_body_that_does_not_read_are_400_and_logged(client: TestClient, fork: Fork) -> None:
    json_body = {"X-Forkflow-Token": TOKEN, "Content-Type": "application/json"}
    r = client.post(f"/api/validation/l3/{fork.request_id}/signoff", headers=json_body, content=b"{not json")
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]
    r = client.post(f"/api/validation/runs/{fork.failed_run_id}/rerun", headers=json_body, content=b"[1]")
    assert r.status_code == 400 and "object" in r.json()["error"]
    r = client.post("/api/ingestion/units/1/rerun", headers={"X-Forkflow-Token": TOKEN},
                    content=b"x" * (65 * 1024))
    assert r.status_code == 400 and "KiB" in r.json()["error"]
    assert [(e["action"], e["outcome"].split(" (")[0]) for e in _log(fork)] == [
        ("l3-signoff", "refused: the body is not valid JSON"),
        ("rerun", "refused: the JSON body must be an object, e.g. {\"owner\": ..., \"verdict\": ...}"),
        ("unit-rerun", "refused: the request body is over 64 KiB; send only the form's fields")]
    assert _signoffs(fork) == []


def test_read_only_dashboard_refuses_every_action(fork: Fork) -> None:
    with TestClient(create_app(fork.ctx, None, actions_log=fork.log)) as c:
        r = c.post(f"/api/validation/l3/{fork.request_id}/signoff", headers={"X-Forkflow-Token": TOKEN},
                   json={"owner": "perf-oncall", "verdict": "accept"})
        assert r.status_code == 403 and "read-only" in r.json()["error"]
        assert c.post(f"/api/validation/runs/{fork.run_id}/rerun", headers={"X-Forkflow-Token": TOKEN}
                      ).status_code == 403
        assert "sign off</button>" not in c.get(f"/validation/l3/{fork.request_id}").text
    assert _signoffs(fork) == []


def test_store_only_dashboard_cannot_sign_off_without_the_checkout(fork: Fork) -> None:
    with TestClient(create_app(fork.ctx.store.url, TOKEN)) as c:
        assert "sign off</button>" in c.get(f"/validation/l3/{fork.request_id}").text
        r = c.post(f"/api/validation/l3/{fork.request_id}/signoff", headers={"X-Forkflow-Token": TOKEN},
                   json={"owner": "perf-oncall", "verdict": "accept"})
        assert r.status_code == 409 and "checkout" in r.json()["error"]
    assert _signoffs(fork) == []


def test_rerun_needs_the_token_and_a_failed_test(client: TestClient, fork: Fork) -> None:
    assert client.post(f"/validation/runs/{fork.run_id}/rerun").status_code == 403
    r = client.post("/api/validation/runs/99999/rerun", headers={"X-Forkflow-Token": TOKEN})
    assert r.status_code == 404
    r = client.post(f"/api/validation/runs/{fork.run_id}/rerun", headers={"X-Forkflow-Token": TOKEN})
    assert r.status_code == 409 and "no failed test" in r.json()["error"]
    assert [e["outcome"] for e in _log(fork)] == ["refused: no token", "refused: unknown run",
                                                  "refused: nothing failed"]


def test_rerun_with_the_token_runs_the_failed_tests_again(client: TestClient, fork: Fork) -> None:
    r = client.post(f"/validation/runs/{fork.failed_run_id}/rerun", data={"token": TOKEN}, follow_redirects=False)
    assert r.status_code == 303
    deadline = time.monotonic() + 120
    while (state := client.get(f"/api/validation/runs/{fork.failed_run_id}").json()["rerun"])["state"] == "running":
        assert time.monotonic() < deadline, "the re-run did not finish"
        time.sleep(0.2)
    assert state["state"] == "done", state
    with fork.ctx.store.session_scope() as s:
        new = tq.get_run(s, state["new_run_id"])
    assert new is not None and new.parent_run_id == fork.failed_run_id and new.trigger == "rerun"
    page = client.get(f"/validation/runs/{new.id}").text
    assert f'href="/validation/runs/{fork.failed_run_id}"' in page
    assert [e["outcome"] for e in _log(fork)] == ["started"]


# -- re-running a landing unit ----------------------------------------------------------------------

@dataclass
class Units:
    ctx: Context
    block: Path
    log: Path
    ids: dict[str, int]  # unit name -> stored id, after a first `ingest --land` with L1 red


@pytest.fixture
def units(builder: ForkBuilder, cli, tmp_path: Path) -> Units:  # type: ignore[no-untyped-def]
    """A bundle of one commit and a declared chain of two; L1 fails while `block` exists."""
    block = tmp_path / "block"
    fork = _blocked_fork(cli, builder, block)
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    assert {u["status"] for u in doc["units"]} == {"failed", "waiting"}
    return Units(open_context(fork), block, tmp_path / "actions.log", {u["name"]: u["id"] for u in doc["units"]})


def _state(u: Units) -> tuple[str, list[tuple[int, UnitState]], list[tuple[str, str]]]:
    """The fork branch, every stored unit, every recorded decision: what an action could change."""
    from forkflow.landing import records
    from forkflow.ledger import records as ledger_records

    with u.ctx.store.session_scope() as s:
        stored = [(x.id, x.status) for x in records.units(s, u.ctx.fork_id)]
        decisions = sorted((d.sha, d.disposition.value) for d in ledger_records.recorded_decisions(s, u.ctx.fork_id))
    return str(u.ctx.repo.resolve("main")), stored, [(str(a), b) for a, b in decisions]


def _bundle(u: Units) -> int:
    return next(i for name, i in u.ids.items() if name.startswith("bundle-"))


def _wait_rerun(c: TestClient, unit_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while (state := c.get(f"/api/ingestion/units/{unit_id}").json()["rerun"])["state"] == "running":
        assert time.monotonic() < deadline, "the re-run did not finish"
        time.sleep(0.2)
    return state  # type: ignore[no-any-return]


def test_unit_rerun_without_or_with_a_wrong_token_is_403_and_changes_nothing(units: Units) -> None:
    before = _state(units)
    target = _bundle(units)
    with TestClient(create_app(units.ctx, TOKEN, actions_log=units.log)) as c:
        assert "re-run this unit" in c.get(f"/ingestion/units/{target}").text
        r = c.post(f"/ingestion/units/{target}/rerun")
        assert r.status_code == 403 and "this action needs the operator" in r.text
        assert c.post(f"/ingestion/units/{target}/rerun", data={"token": "guess-guess"}).status_code == 403
        r = c.post(f"/api/ingestion/units/{target}/rerun", headers={"X-Forkflow-Token": TOKEN + "x"})
        assert r.status_code == 403 and "operator's token" in r.json()["error"]
        assert c.get(f"/api/ingestion/units/{target}").json()["rerun"] is None
    with TestClient(create_app(units.ctx, None, actions_log=units.log)) as ro:
        r = ro.post(f"/api/ingestion/units/{target}/rerun", headers={"X-Forkflow-Token": TOKEN})
        assert r.status_code == 403 and "read-only" in r.json()["error"]
        assert "re-run this unit" not in ro.get(f"/ingestion/units/{target}").text
    time.sleep(0.3)  # nothing may have started in the background either
    assert _state(units) == before
    assert [(e["action"], e["outcome"]) for e in _log(units)] == [
        ("unit-rerun", "refused: no token"), ("unit-rerun", "refused: wrong token"),
        ("unit-rerun", "refused: wrong token"), ("unit-rerun", "refused: read-only dashboard")]


def test_unit_rerun_of_a_unit_that_still_fails_is_recorded(units: Units) -> None:
    main, stored, decisions = _state(units)
    target = _bundle(units)
    with TestClient(create_app(units.ctx, TOKEN, actions_log=units.log)) as c:
        r = c.post(f"/api/ingestion/units/{target}/rerun", headers={"X-Forkflow-Token": TOKEN})
        assert r.status_code == 202 and r.json()["state"] == "running"
        state = _wait_rerun(c, target)
        assert state["state"] == "done", state
        (new,) = state["units"]
        assert new["status"] == "failed" and "l1_command failed" in new["summary"]
        page = c.get(f"/api/ingestion/units/{new['id']}").json()
        assert page["unit"]["retry_of"] == target and page["unit"]["status"] == "failed"
        assert c.get(f"/api/ingestion/units/{target}").json()["unit"]["retried_as"] == [new["id"]]
        assert f'href="/ingestion/units/{new["id"]}"' in c.get(f"/ingestion/units/{target}").text
    main2, stored2, decisions2 = _state(units)
    assert main2 == main and decisions2 == decisions  # still DEFERRED, the branch did not move
    assert stored2 == stored + [(new["id"], "failed")]
    assert [e["outcome"] for e in _log(units)] == ["started", "done"]


def test_unit_rerun_lands_once_l1_passes_and_refuses_what_it_cannot_do(units: Units) -> None:
    main = _state(units)[0]
    first, second = [name for name in units.ids if name.startswith("ops#")]  # links: `ops#<sha10>`
    units.block.unlink()
    with TestClient(create_app(units.ctx, TOKEN, actions_log=units.log)) as c:
        r = c.post(f"/api/ingestion/units/{units.ids[second]}/rerun", headers={"X-Forkflow-Token": TOKEN})
        assert r.status_code == 409 and "waits for" in r.json()["error"]
        assert c.post("/api/ingestion/units/999/rerun", headers={"X-Forkflow-Token": TOKEN}).status_code == 404
        r = c.post(f"/ingestion/units/{units.ids[first]}/rerun", data={"token": TOKEN}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == f"/ingestion/units/{units.ids[first]}"
        state = _wait_rerun(c, units.ids[first])
        (new,) = state["units"]
        assert new["status"] == "landed", state
        r = c.post(f"/api/ingestion/units/{new['id']}/rerun", headers={"X-Forkflow-Token": TOKEN})
        assert r.status_code == 409 and "already landed" in r.json()["error"]
    main2, stored, _ = _state(units)
    assert main2 != main and units.ctx.repo.resolve("main~1") == main
    assert (new["id"], "landed") in stored
    outcomes = [e["outcome"] for e in _log(units)]
    assert outcomes[0].startswith(f"refused: unit {units.ids[second]} ({second}) waits for ")
    assert outcomes[1:] == ["refused: unknown unit", "started", "done",
                            f"refused: unit {new['id']} ({first}) already landed as {main2[:12]}; nothing to re-run"]


@pytest.mark.security
def test_signoff_is_bound_to_the_tokens_owner(client: TestClient, fork: Fork,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORKFLOW_TOKEN_OWNER")
    r = client.post(f"/api/validation/l3/{fork.request_id}/signoff", headers={"X-Forkflow-Token": TOKEN},
                    json={"owner": "perf-oncall", "verdict": "accept"})
    assert r.status_code == 409 and "FORKFLOW_TOKEN_OWNER" in r.json()["error"]
    monkeypatch.setenv("FORKFLOW_TOKEN_OWNER", "mallory")   # a token that is not an owner's
    r = client.post(f"/api/validation/l3/{fork.request_id}/signoff", headers={"X-Forkflow-Token": TOKEN},
                    json={"verdict": "accept"})
    assert r.status_code == 400 and "'mallory' (owner of the dashboard's token) is not an owner" in r.json()["error"]
    assert _signoffs(fork) == []
    monkeypatch.setenv("FORKFLOW_TOKEN_OWNER", "perf-oncall")
    r = client.post(f"/api/validation/l3/{fork.request_id}/signoff", headers={"X-Forkflow-Token": TOKEN},
                    json={"verdict": "accept"})      # no name typed: the token's owner signs
    assert r.status_code == 200 and _signoffs(fork) == [("perf-oncall", "accept")]
