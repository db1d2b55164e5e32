"""The dashboard's decide action: token-checked, the same record as `forkflow decide` (issue 12)."""
from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient

from forkflow.context import open_context
from forkflow.testing.gitrepo import ForkBuilder
from forkflow.web.app import create_app

TOKEN = "operator-token-0123456789"


def test_web_decide_needs_token_and_records_a_persons_decision(builder: ForkBuilder, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"README": "hello\n"}, "Initial")
    builder.branch_fork()
    sha = builder.upstream_commit({"lib/v.py": "V = 2\n"}, "Bump version (#7)")
    builder.fetch()
    assert cli("init", "--upstream", "upstream", repo=builder.f.path).rc == 0
    log = tmp_path / "actions.log"
    with TestClient(create_app(open_context(builder.f.path), TOKEN, actions_log=log)) as client:
        body = {"verdict": "wont-port", "reason": "version bumps stay upstream"}
        r = client.post(f"/api/commits/{sha}/decide", json=body)
        assert r.status_code in (401, 403)
        r = client.post(f"/api/commits/{sha}/decide", json=body, headers={"X-Forkflow-Token": TOKEN})
        assert r.status_code == 200 and r.json()["disposition"] == "SKIPPED"
        r = client.post(f"/api/commits/{sha}/decide", json={"verdict": "maybe", "reason": "x"},
                        headers={"X-Forkflow-Token": TOKEN})
        assert r.status_code == 400 and "verdict must be" in r.json()["error"]
    rows = cli("status", "--json", "--commits", repo=builder.f.path).json()["commits"]
    row = next(c for c in rows if c["sha"] == sha)
    assert row["decided_by"] == "person" and "version bumps stay upstream" in row["reason"]
    outcomes = [json.loads(line)["outcome"] for line in log.read_text().splitlines()]
    assert "done" in outcomes and any(o.startswith("refused") for o in outcomes)


def test_web_commit_page_offers_the_decide_form(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"README": "hello\n"}, "Initial")
    builder.branch_fork()
    sha = builder.upstream_commit({"lib/v.py": "V = 2\n"}, "Bump version (#7)")
    builder.fetch()
    assert cli("init", "--upstream", "upstream", repo=builder.f.path).rc == 0
    assert cli("status", repo=builder.f.path).rc == 0
    with TestClient(create_app(open_context(builder.f.path), None)) as client:  # read-only: no form
        assert 'id="decide"' not in client.get(f"/commits/{sha}").text
    with TestClient(create_app(open_context(builder.f.path), TOKEN)) as client:
        page = client.get(f"/commits/{sha}").text
        assert f'action="/commits/{sha}/decide"' in page and 'name="token"' in page
        form = {"verdict": "skip", "reason": "not for this fork", "token": TOKEN}
        r = client.post(f"/commits/{sha}/decide", data=form, follow_redirects=False)
        assert r.status_code in (200, 303), r.text
    row = next(c for c in cli("status", "--json", "--commits", repo=builder.f.path).json()["commits"]
               if c["sha"] == sha)
    assert row["disposition"] == "SKIPPED" and row["decided_by"] == "person"


def test_web_ingestion_tells_a_persons_deferral_from_forkflows(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    from forkflow.ledger import records as ledger_records
    from forkflow.models import RecordedDecision
    from forkflow.models import Disposition

    builder.upstream_commit({"README": "hello\n"}, "Initial")
    builder.branch_fork()
    a = builder.upstream_commit({"lib/a.py": "A = 2\n"}, "Change a (#8)")
    b = builder.upstream_commit({"lib/b.py": "B = 2\n"}, "Change b (#9)")
    builder.fetch()
    assert cli("init", "--upstream", "upstream", repo=builder.f.path).rc == 0
    assert cli("decide", a, "--defer", "--reason", "after the release", repo=builder.f.path).rc == 0
    ctx = open_context(builder.f.path)
    with ctx.store.session_scope() as s:
        ledger_records.record_decision(s, ctx.fork_id, RecordedDecision(b, Disposition.DEFERRED, "chain x: conflict in a.py"))
    with TestClient(create_app(ctx)) as client:
        waiting = {w["sha"]: w for w in client.get("/api/ingestion").json()["waiting"]}
    assert waiting[a]["decided_by"] == "person" and "decided by a person: defer" in waiting[a]["reason"]
    assert waiting[b]["decided_by"] == "auto"
