"""The upstream ledger on real repositories: every kind of evidence, reverts, the ingestion point."""
from __future__ import annotations

from pathlib import Path

import pytest

from forkflow.testing.gitrepo import ForkBuilder


def _init(builder: ForkBuilder, cli) -> Path:  # type: ignore[no-untyped-def]
    fork = builder.f.path
    r = cli("init", "--upstream", "upstream", repo=fork)
    assert r.rc == 0, r.err
    return fork


def _by_subject(doc: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {c["subject"]: c for c in doc["commits"]}


@pytest.fixture
def base(builder: ForkBuilder) -> ForkBuilder:
    builder.upstream_commit({"README": "hello\n", "lib/a.py": "def a():\n    return 1\n"}, "Initial")
    builder.branch_fork()
    builder.fork_commit({"lib/fork_only.py": "X = 1\n"}, "[fork] our own feature")
    return builder


@pytest.mark.parametrize("style", ["trailer", "cherry", "reactor", "backport", "original", "upstream"])
def test_ledger_marker_kinds_make_picked(base: ForkBuilder, cli, style: str) -> None:  # type: ignore[no-untyped-def]
    u = base.upstream_commit({"lib/b.py": "B = 2\n"}, "Add b (#11)")
    f = base.pick(u, evidence=style)
    fork = _init(base, cli)
    doc = cli("status", "--json", "--commits", repo=fork).json()
    row = _by_subject(doc)["Add b (#11)"]
    assert row["disposition"] == "PICKED"
    assert row["fork_shas"] == [f]
    kind = "trailer" if style == "trailer" else "marker"
    assert row["evidence"][0].startswith(kind)
    assert row["pr"] == 11


def test_ledger_patch_id_without_marker(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    u = base.upstream_commit({"lib/c.py": "C = 3\n"}, "Add c (#12)")
    other = base.upstream_commit({"lib/d.py": "D = 4\n"}, "Add d (#13)")
    f = base.pick(u, evidence="patch-id")
    doc = cli("status", "--json", "--commits", repo=_init(base, cli)).json()
    rows = _by_subject(doc)
    assert rows["Add c (#12)"]["disposition"] == "PICKED"
    assert rows["Add c (#12)"]["fork_shas"] == [f]
    assert rows["Add c (#12)"]["evidence"][0].startswith("patch-id")
    assert rows["Add d (#13)"]["disposition"] == "PENDING"
    assert other


def test_ledger_squashed_bundle_by_prs_and_by_shas(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    us = [base.upstream_commit({f"lib/m{i}.py": f"M = {i}\n"}, f"Change m{i} (#{100 + i})") for i in range(5)]
    b1 = base.bundle(us[:3], style="prs")
    b2 = base.bundle(us[3:], style="shas")
    doc = cli("status", "--json", "--commits", repo=_init(base, cli)).json()
    rows = _by_subject(doc)
    for i in range(3):
        assert rows[f"Change m{i} (#{100 + i})"]["fork_shas"] == [b1]
        assert rows[f"Change m{i} (#{100 + i})"]["evidence"][0].startswith("bundle")
    for i in range(3, 5):
        assert rows[f"Change m{i} (#{100 + i})"]["fork_shas"] == [b2]
    assert doc["counts"]["picked"] == 5


def test_ledger_title_and_pr_only_when_unambiguous(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    u = base.upstream_commit({"lib/e.py": "E = 5\n"}, "Tune e (#20)")
    dup1 = base.upstream_commit({"lib/g.py": "G = 1\n"}, "Tune g (#21)")
    dup2 = base.upstream_commit({"lib/h.py": "H = 1\n"}, "Tune g again (#21)")  # PR 21 is ambiguous
    base.pick(u, evidence="title-pr", extra={"lib/e.py": "E = 6  # fork tweak\n"})
    base.pick(dup1, evidence="title-pr", extra={"lib/g.py": "G = 2  # fork tweak\n"})
    doc = cli("status", "--json", "--commits", repo=_init(base, cli)).json()
    rows = _by_subject(doc)
    assert rows["Tune e (#20)"]["disposition"] == "PICKED"
    assert rows["Tune e (#20)"]["evidence"][0].startswith("title+pr")
    assert rows["Tune g (#21)"]["disposition"] == "PENDING"
    assert rows["Tune g again (#21)"]["disposition"] == "PENDING"
    assert dup2


def test_ledger_quoted_marker_does_not_count(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    u = base.upstream_commit({"lib/q.py": "Q = 1\n"}, "Add q (#30)")
    base.fork_commit({"lib/mine.py": "M = 1\n"}, "Fork tweak, inspired by upstream",
                     body=f"Upstream said:\n> Add q (#30)\n> (cherry picked from commit {u})")
    doc = cli("status", "--json", "--commits", repo=_init(base, cli)).json()
    assert _by_subject(doc)["Add q (#30)"]["disposition"] == "PENDING"


def test_ledger_fork_revert_makes_reverted_and_repick_picked(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    u = base.upstream_commit({"lib/r.py": "R = 1\n"}, "Add r (#40)")
    v = base.upstream_commit({"lib/s.py": "S = 1\n"}, "Add s (#41)")
    fu = base.pick(u)
    base.revert_in_fork(fu)
    fv = base.pick(v)
    fr = base.revert_in_fork(fv)
    base.f.git("cherry-pick", "--no-commit", v)
    base.f.commit({}, "Re-land s (#41)", body=f"Upstream-Commit: {v}")
    doc = cli("status", "--json", "--commits", repo=_init(base, cli)).json()
    rows = _by_subject(doc)
    assert rows["Add r (#40)"]["disposition"] == "REVERTED"
    assert any(e.startswith("fork-revert") for e in rows["Add r (#40)"]["evidence"])
    assert rows["Add s (#41)"]["disposition"] == "PICKED"
    assert doc["counts"]["reverted"] == 1
    assert fr


def test_ledger_upstream_revert_pair_skipped(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    x = base.upstream_commit({"lib/x.py": "X = 1\n"}, "Add x (#50)")
    rx = base.revert_upstream(x)
    y = base.upstream_commit({"lib/y.py": "Y = 1\n"}, "Add y (#51)")
    ry = base.revert_upstream(y)
    base.pick(y)  # y picked: its revert must be picked too, so neither is skipped
    doc = cli("status", "--json", "--commits", repo=_init(base, cli)).json()
    by_sha = {c["sha"]: c for c in doc["commits"]}
    assert by_sha[x]["disposition"] == "SKIPPED"
    assert by_sha[x]["reason"] == "reverted upstream"
    assert by_sha[rx]["disposition"] == "SKIPPED"
    assert by_sha[y]["disposition"] == "PICKED"
    assert by_sha[ry]["disposition"] == "PENDING"


def test_ledger_revert_of_revert_relands(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    x = base.upstream_commit({"lib/x.py": "X = 1\n"}, "Add x (#60)")
    rx = base.revert_upstream(x)
    rrx = base.revert_upstream(rx)
    doc = cli("status", "--json", "--commits", repo=_init(base, cli)).json()
    by_sha = {c["sha"]: c for c in doc["commits"]}
    assert by_sha[x]["disposition"] == "PENDING"  # relanded: still to port
    assert by_sha[rx]["disposition"] == "SKIPPED"
    assert by_sha[rrx]["disposition"] == "SKIPPED"


def test_ledger_inferred_ingestion_point_days_behind_backlog_out_of_order(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    day = 86400
    us = []
    for i in range(20):
        base.tick(day)
        us.append(base.upstream_commit({f"lib/n{i}.py": f"N = {i}\n"}, f"Step {i} (#{200 + i})"))
    for i, u in enumerate(us[:10]):
        if i != 4:  # one gap in the first ten: 9/10 = 90% handled below the threshold at 10
            base.pick(u)
    base.pick(us[17])  # an urgent pick far ahead
    fork = _init(base, cli)
    doc = cli("status", "--json", repo=fork).json()
    ip = doc["ingestion_point"]
    assert ip["inferred"] is True
    # the newest commit with >= 95% handled up to it is us[3] (4/4); us[9] has 9/10
    assert ip["sha"] == us[3]
    assert doc["backlog_commits"] == 0
    assert doc["out_of_order_picks"] == 6  # us[5..9] and us[17]
    assert doc["days_behind"] == pytest.approx(16 + 16 / 24, abs=0.01)  # 16 days and 16 one-hour ticks

    # with a threshold of 0.9, us[9] qualifies: the gap becomes backlog
    cfg = fork / "forkflow.toml"
    cfg.write_text(cfg.read_text().replace("infer_threshold = 0.95", "infer_threshold = 0.9"))
    doc = cli("status", "--json", repo=fork).json()
    assert doc["ingestion_point"]["sha"] == us[9]
    assert doc["backlog_commits"] == 1
    assert doc["out_of_order_picks"] == 1
    assert doc["counts"] == {"pending": 10, "picked": 10, "skipped": 0, "deferred": 0, "reverted": 0}


def test_ledger_recorded_ingestion_point_is_not_inferred(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    us = [base.upstream_commit({f"lib/p{i}.py": "P\n"}, f"P {i} (#{300 + i})") for i in range(4)]
    fork = _init(base, cli)
    base.f.git("update-ref", "refs/forkflow/ingestion-point/main", us[1])
    doc = cli("status", "--json", repo=fork).json()
    assert doc["recorded_point"]["sha"] == us[1]
    # the ref alone moves nothing: days behind counts what is landed or decided (none here)
    assert doc["ingestion_point"]["sha"] == doc["fork_point"] and doc["headline"]["open_commits"] == 4


def test_ledger_non_utf8_message_is_read(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    base.upstream_commit({"lib/l.py": "L\n"}, "", raw_message=b"Caf\xe9 latin-1 subject (#70)\n")
    doc = cli("status", "--json", "--commits", repo=_init(base, cli)).json()
    row = [c for c in doc["commits"] if c["pr"] == 70][0]
    assert row["subject"].startswith("Caf")
    assert row["disposition"] == "PENDING"


def test_ledger_custom_marker_regex_from_config(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    u = base.upstream_commit({"lib/k.py": "K = 1\n"}, "Add k (#80)")
    base.fetch()
    base.f.git("cherry-pick", "--no-commit", u)
    f = base.f.commit({}, "Port k with a house marker", body=f"Picked-From: {u[:10]}")
    fork = _init(base, cli)
    doc = cli("status", "--json", "--commits", repo=fork).json()
    row = _by_subject(doc)["Add k (#80)"]
    # the same patch: found by patch-id while the marker is unknown
    assert row["evidence"][0].startswith("patch-id")
    cfg = fork / "forkflow.toml"
    cfg.write_text(cfg.read_text().replace("infer_threshold = 0.95",
                                           "infer_threshold = 0.95\nmarkers = ['Picked-From: ([0-9a-f]{7,40})']"))
    doc = cli("status", "--json", "--commits", repo=fork).json()
    row = _by_subject(doc)["Add k (#80)"]
    assert row["evidence"][0].startswith("marker") and row["fork_shas"] == [f]


def test_ledger_status_json_commit_rows_have_documented_keys(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    u = base.upstream_commit({"lib/z.py": "Z\n"}, "Add z (#90)")
    base.pick(u)
    doc = cli("status", "--json", "--commits", repo=_init(base, cli)).json()
    assert set(doc["upstream_tip"]) == {"sha", "date"}
    assert set(doc["ingestion_point"]) == {"sha", "date", "inferred"}
    assert set(doc["counts"]) == {"picked", "skipped", "deferred", "pending", "reverted"}
    for row in doc["commits"]:
        assert {"sha", "pr", "date", "subject", "disposition", "fork_shas", "evidence"} <= set(row)


def test_ledger_bundle_sections_marker_and_decisions(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    us = [base.upstream_commit({f"lib/n{i}.py": f"N = {i}\n"}, f"Change n{i} (#{200 + i})") for i in range(4)]
    base.fetch()
    for sha in us[:2]:
        base.f.git("cherry-pick", "--no-commit", "--allow-empty", sha)
    # a single revision marker (for the last member) must not hide the list; #202/#203 are decisions
    body = ("Picked (2):\n- #200 first\n- #201 second\n\nDeferred (1):\n- #202 needs the fork's owner\n\n"
            "Won't-port (1): #203\n\nReactor Cherry-pick Revision: " + us[1])
    b = base.f.commit({}, "[Cherry-pick][BUNDLE] Cherry-pick 2 upstream (#200 #201 #202 #203) (#77)", body=body)
    doc = cli("status", "--json", "--commits", repo=_init(base, cli)).json()
    rows = _by_subject(doc)
    assert [rows[f"Change n{i} (#{200 + i})"]["disposition"] for i in range(4)] == \
        ["PICKED", "PICKED", "DEFERRED", "SKIPPED"]
    assert rows["Change n0 (#200)"]["fork_shas"] == [b]
    assert rows["Change n2 (#202)"]["evidence"][0].startswith("message")


def test_ledger_phabricator_revert_and_its_revert(base: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    u = base.upstream_commit({"lib/p.py": "P = 1\n"}, "Add p (#50)")
    f = base.pick(u, evidence="reactor")
    subject = base.f.show(f, "%s").strip()
    # a revert undoes its pick's diff (a revert that changes nothing is not believed)
    base.f.commit({"lib/p.py": None}, f"Revert D900: {subject}", body="Differential Revision:\nD900\n\n"
                  "fbshipit-source-id: aaaaaaaaaaaa1111")
    doc = cli("status", "--json", "--commits", repo=_init(base, cli)).json()
    assert _by_subject(doc)["Add p (#50)"]["disposition"] == "REVERTED"
    base.f.commit({"lib/p.py": "P = 1\n"}, f"Revert D901: Revert D900: {subject}",
                  body="Original commit changeset: aaaaaaaaaaaa1111")
    doc = cli("status", "--json", "--commits", repo=base.f.path).json()
    assert _by_subject(doc)["Add p (#50)"]["disposition"] == "PICKED"
