"""A person's decisions (`forkflow decide`): stored, shown, told apart from forkflow's own (issue 12)."""
from __future__ import annotations

from pathlib import Path

import pytest

from forkflow.models import Sha
from forkflow.testing.gitrepo import ForkBuilder


@pytest.fixture
def fork(builder: ForkBuilder, cli) -> tuple[ForkBuilder, list[Sha]]:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"README": "hello\n"}, "Initial")
    builder.branch_fork()
    us = [builder.upstream_commit({f"lib/d{i}.py": f"D = {i}\n"}, f"Change d{i} (#{300 + i})") for i in range(4)]
    builder.pick(us[0])
    assert cli("init", "--upstream", "upstream", repo=builder.f.path).rc == 0
    return builder, us


def _rows(cli, repo: Path) -> dict[str, dict]:  # type: ignore[no-untyped-def,type-arg]
    doc = cli("status", "--json", "--commits", repo=repo).json()
    return {c["sha"]: c for c in doc["commits"]} | {"_doc": doc}


def test_decide_skip_defer_wont_port_shown_in_status(fork, cli) -> None:  # type: ignore[no-untyped-def]
    b, us = fork
    repo = b.f.path
    assert cli("decide", us[1][:10], "--wont-port", "--reason", "a version bump", "--task",
               "https://example.com/T1", repo=repo).rc == 0
    assert cli("decide", "#302", "--defer", "--reason", "needs the owner", "--until", "2999-01-01", repo=repo).rc == 0
    rows = _rows(cli, repo)
    assert rows[us[1]]["disposition"] == "SKIPPED"
    assert rows[us[1]]["decided_by"] == "person"
    assert rows[us[1]]["evidence"][0].startswith("decided: decided by a person: wont-port: a version bump")
    assert "task https://example.com/T1" in rows[us[1]]["reason"]
    assert rows[us[2]]["disposition"] == "DEFERRED"
    assert "until 2999-01-01" in rows[us[2]]["reason"]
    assert rows["_doc"]["decisions"] == {"deferred": {"person": 1}, "skipped": {"person": 1}}
    out = cli("status", repo=repo).out
    assert "deferred" in out and "1 by a person" in out
    listed = cli("decisions", "--json", repo=repo).json()["decisions"]
    assert {d["sha"] for d in listed} == {us[1], us[2]}


def test_decide_clear_makes_pending_again(fork, cli) -> None:  # type: ignore[no-untyped-def]
    b, us = fork
    assert cli("decide", us[3], "--skip", "--reason", "docs only", repo=b.f.path).rc == 0
    assert cli("decide", us[3], "--clear", repo=b.f.path).rc == 0
    assert _rows(cli, b.f.path)[us[3]]["disposition"] == "PENDING"


def test_decide_refuses_picked_unknown_and_missing_reason(fork, cli) -> None:  # type: ignore[no-untyped-def]
    b, us = fork
    r = cli("decide", us[0], "--skip", "--reason", "x", repo=b.f.path)
    assert r.rc == 1 and "already taken" in r.err
    r = cli("decide", "deadbeef00", "--skip", "--reason", "x", repo=b.f.path)
    assert r.rc == 1 and "not an upstream commit" in r.err
    r = cli("decide", us[1], "--skip", repo=b.f.path)
    assert r.rc == 1 and "--reason" in r.err
    r = cli("decide", us[1], "--skip", "--defer", "--reason", "x", repo=b.f.path)
    assert r.rc == 1 and "exactly one" in r.err
    r = cli("decide", us[1], "--skip", "--until", "2999-01-01", "--reason", "x", repo=b.f.path)
    assert r.rc == 1 and "--until only goes with --defer" in r.err


def test_decide_person_deferral_is_not_planned_and_lapses(fork, cli) -> None:  # type: ignore[no-untyped-def]
    from forkflow.context import open_context
    from forkflow.landing.plan import pending_entries
    from forkflow import wiring
    from forkflow.ledger import records as ledger_records
    from forkflow.models import Decider, Decision, RecordedDecision
    from forkflow.models import Disposition

    b, us = fork
    assert cli("decide", us[1], "--defer", "--reason", "later", repo=b.f.path).rc == 0
    assert cli("decide", us[2], "--skip", "--reason", "not needed", repo=b.f.path).rc == 0
    ctx = open_context(b.f.path)
    pending = {e.commit.sha for e in pending_entries(wiring.ledger(ctx))}
    assert us[1] not in pending and us[2] not in pending and us[3] in pending
    with ctx.store.session_scope() as s:  # a deferral whose date has passed lapses: pending again
        ledger_records.record_decision(s, ctx.fork_id, RecordedDecision(
            us[1], Disposition.DEFERRED, "later", source=Decider.PERSON, verdict=Decision.DEFER, until="2000-01-01"))
    assert us[1] in {e.commit.sha for e in pending_entries(wiring.ledger(ctx))}


def test_ledger_upstream_opt_out_marker(fork, cli) -> None:  # type: ignore[no-untyped-def]
    b, _ = fork
    u = b.upstream_commit({"lib/z.py": "Z = 1\n"}, "Bump version (#399)", body="[no-downstream]")
    b.fetch()
    cfg = b.f.path / "forkflow.toml"
    cfg.write_text(cfg.read_text().replace("infer_threshold = 0.95", "infer_threshold = 0.95\nopt_out = ['\\[no-downstream\\]']"))
    row = _rows(cli, b.f.path)[u]
    assert row["disposition"] == "SKIPPED" and row["decided_by"] == "opt-out"


def test_bundle_message_lists_decisions_capped_subject_and_ledger_reads_them_back() -> None:
    from forkflow.landing.message import Decided, Member, bundle_message, decided_between
    from forkflow.ledger.sections import read_sections

    members = [Member(Sha(f"{i:040x}"), f"Change {i} (#{1000 + i})", 1000 + i) for i in range(40)]
    gap = Decided(Sha("f" * 40), "Bump version (#2000)", False, "decided by a person: wont-port: a version bump")
    order = [members[0].sha, gap.sha, members[1].sha]
    assert decided_between([members[0].sha, members[1].sha], order, {gap.sha: gap}) == [gap]
    text = bundle_message(members, [gap])
    subject, body = text.split("\n", 1)
    assert len(subject) <= 72 and subject.startswith("Cherry-pick 40 upstream (#1000 ") and "more)" in subject
    refs = read_sections(body)
    # the row's sha is the decision; the "#2000" in its quoted upstream subject decides nothing
    assert refs.skipped_prs == [] and refs.skipped_shas == ["f" * 12]
    assert not refs.picked_prs
