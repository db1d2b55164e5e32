"""Days behind counts what a person has not decided: a conflict forkflow only holds keeps the
ingestion point where it is, in `status`, `status --json`, the overview and replay alike."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from forkflow.context import open_context
from forkflow.git.run import run_git
from forkflow.ledger.headline import OPT_OUT_RULE, headline
from forkflow.models import (
    Commit,
    Disposition,
    Evidence,
    EvidenceKind,
    Ledger,
    LedgerEntry,
    PointInTime,
    Sha,
)
from forkflow.testing.gitrepo import ForkBuilder
from forkflow.web.app import create_app
from forkflow.web.charts import line
from tests.test_merge_fork import _init as _merge_init
from tests.test_merge_fork import conflicting  # noqa: F401  (a fixture)
from tests.test_web import charts_of

DAY = 86_400
WAITS = (4, 5)  # ingest's exit codes when a person is needed


def _date(repo: Path, rev: str) -> int:
    return int(run_git("show", "-s", "--format=%ct", rev, cwd=repo).strip())


def _held_fork(cli, b: ForkBuilder) -> tuple[Path, str]:  # type: ignore[no-untyped-def]
    """A fork whose oldest upstream commit (#10) conflicts in two files the fork changed, with
    two clean upstream commits after it; `ingest --land` has run.  Returns (fork, #10's sha)."""
    b.upstream_commit({"k.py": "def f():\n    return 1\n", "j.py": "J = 1\n"}, "Initial (#1)")
    b.branch_fork()
    b.fork_commit({"k.py": "def f():\n    return 10  # fork\n", "j.py": "J = 10  # fork\n"}, "[fork] f and J")
    b.tick(10 * DAY)
    held = b.upstream_commit({"k.py": "def f():\n    return 100\n", "j.py": "J = 100\n"}, "Tune f and J (#10)")
    b.tick(20 * DAY)
    b.upstream_commit({"a.py": "A = 1\n"}, "Add a (#11)")
    b.tick(30 * DAY)
    b.upstream_commit({"c.py": "C = 1\n"}, "Add c (#12)")
    fork = b.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n')
    assert cli("ingest", "--land", repo=fork).rc in WAITS
    return fork, held


def test_a_held_conflict_keeps_the_point_at_the_fork_point(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork, held = _held_fork(cli, builder)
    doc = cli("status", "--json", repo=fork).json()
    tip, base = _date(fork, "upstream/main"), _date(fork, "upstream/main~3")
    # before: 0.0, the automatic deferral of #10 moved the point to upstream's tip
    assert doc["days_behind"] == pytest.approx((tip - base) / DAY, abs=0.01) and doc["days_behind"] > 60
    assert doc["ingestion_point"]["sha"] == doc["fork_point"]
    assert doc["recorded_point"]["sha"] == doc["upstream_tip"]["sha"]  # forkflow's ref: holds included
    h = doc["headline"]
    assert h["oldest_open"]["sha"] == held
    assert h["oldest_open"]["age_days"] == pytest.approx((tip - _date(fork, held)) / DAY, abs=0.01)
    assert h["open_conflicts"] == {"commits": 1, "files": 2}  # one commit, two conflicted files
    assert h["open_commits"] == h["held_commits"] == 1
    assert h["if_deferred"]["days_behind"] == 0 and h["if_deferred"]["sha"] == doc["upstream_tip"]["sha"]
    text = cli("status", repo=fork).out
    assert re.search(r"days behind upstream\s+%g\b" % doc["days_behind"], text)
    assert "if deferred" in text and "0 days (were the 1 held commits deferred)" in text
    assert "1 commits (2 files)" in text
    series = cli("history", "--json", repo=fork).json()["series"]
    assert series[-1]["days_behind"] == doc["days_behind"]  # the snapshot keeps the same figure


def test_a_persons_decision_moves_the_point(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork, held = _held_fork(cli, builder)
    assert cli("decide", held, "--defer", "--reason", "needs the kernel owner", repo=fork).rc == 0
    doc = cli("status", "--json", repo=fork).json()
    assert doc["days_behind"] == 0 and doc["ingestion_point"]["sha"] == doc["upstream_tip"]["sha"]
    h = doc["headline"]
    assert h["open_commits"] == 0 and h["oldest_open"] is None
    assert h["open_conflicts"] == {"commits": 0, "files": 0}  # decided: no longer open


def test_a_configured_rule_moves_the_point_and_is_named(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    b = builder
    b.upstream_commit({"a.py": "A = 1\n"}, "Initial (#1)")
    b.branch_fork()
    b.tick(5 * DAY)
    b.upstream_commit({"docs.md": "x\n"}, "[no-downstream] Upstream docs (#20)")
    b.tick(5 * DAY)
    keep = b.upstream_commit({"b.py": "B = 1\n"}, "Add b (#21)")
    b.pick(keep)
    fork = b.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    doc = cli("status", "--json", repo=fork).json()
    assert doc["days_behind"] > 0  # without the rule, #20 is pending: 1 of 2 handled
    cfg = fork / "forkflow.toml"
    cfg.write_text(cfg.read_text().replace("infer_threshold = 0.95",
                                           "infer_threshold = 0.95\nopt_out = ['\\[no-downstream\\]']"))
    doc = cli("status", "--json", repo=fork).json()
    assert doc["days_behind"] == 0 and doc["headline"]["rules"] == {OPT_OUT_RULE: 1}
    assert f"or by a configured rule: {OPT_OUT_RULE} (1)" in " ".join(cli("status", repo=fork).out.split())


def test_overview_shows_the_headline_and_counts_conflicts_as_commits(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork, held = _held_fork(cli, builder)
    status = cli("status", "--json", repo=fork).json()
    with TestClient(create_app(open_context(fork))) as client:
        doc = client.get("/api/overview").json()
        html = client.get("/").text
    led = doc["ledger"]
    assert led["days_behind"] == status["days_behind"] > 60
    assert led["headline"]["open_conflicts"] == {"commits": 1, "files": 2}
    assert led["headline"]["oldest_open"]["sha"] == held
    # before: 2, one per conflicted file, under a card that said conflicts
    assert doc["attention"]["open_conflicts"] == 1 and doc["attention"]["open_conflict_files"] == 2
    assert 'id="if-deferred">if deferred: 0 days' in html and 'id="open-conflicts">1<' in html
    chart = charts_of(html)["days-behind"]
    assert chart["floor"] == 0  # days behind never draws below zero
    # the point is charted at the state it measured (upstream's tip, 2023), not at today's date
    assert chart["x"][-1] == _date(fork, "upstream/main")


def test_chart_payload_floor() -> None:
    assert line("t", [1, 2], [0.0, 0.0], floor=0.0)["floor"] == 0.0
    assert line("t", [1, 2], [-1.0, 2.0])["floor"] is None  # a metric may go below zero


# -- the rule itself, on plain values ------------------------------------------------------
def _entry(i: int, d: Disposition, kind: EvidenceKind | None = None, sha: str | None = None) -> LedgerEntry:
    c = Commit(Sha(sha or f"{i:040x}"), (), 1_000_000 + i * DAY, f"c{i}")
    ev = (Evidence(kind, None, "x"),) if kind else ()
    return LedgerEntry(c, None, d, (), ev)


def _ledger(entries: list[LedgerEntry], fork_point: str = "f" * 40) -> Ledger:
    tip = entries[-1].commit
    return Ledger(Sha(fork_point), Sha("e" * 40), PointInTime(tip.sha, tip.date),
                  PointInTime(Sha(fork_point), 1_000_000 - DAY), True, tuple(entries))


@pytest.mark.parametrize(("kind", "disposition", "moves"), [
    (EvidenceKind.RECORDED, Disposition.DEFERRED, False),  # a conflict, a chain, an L1 failure: held
    (EvidenceKind.RECORDED, Disposition.SKIPPED, True),  # an empty pick: nothing to take
    (EvidenceKind.DECIDED, Disposition.DEFERRED, True),  # a person deferred it
    (EvidenceKind.MESSAGE, Disposition.DEFERRED, True),  # the fork's own message deferred it
    (EvidenceKind.OPT_OUT, Disposition.SKIPPED, True),  # a configured rule
    (EvidenceKind.UPSTREAM_REVERT, Disposition.SKIPPED, True),
    (None, Disposition.PENDING, False),
    (EvidenceKind.FORK_REVERT, Disposition.REVERTED, False),  # backed out: the fork lacks it again
])
def test_what_moves_the_point(kind: EvidenceKind | None, disposition: Disposition, moves: bool) -> None:
    entries = [_entry(0, Disposition.PICKED), _entry(1, disposition, kind)]
    entries += [_entry(i, Disposition.PICKED) for i in range(2, 40)]
    h = headline(_ledger(entries), threshold=1.0)
    assert (h.point.sha == entries[-1].commit.sha) is moves
    if not moves:
        assert h.point.sha == entries[0].commit.sha and h.oldest_open is not None
        assert h.oldest_open.sha == entries[1].commit.sha and h.days_behind == pytest.approx(39)
    # held counted as decided: the figure a deferral of every held commit gives
    assert (h.if_deferred.sha == entries[-1].commit.sha) is (disposition not in (Disposition.PENDING,
                                                                                 Disposition.REVERTED))
    assert h.held == (1 if kind is EvidenceKind.RECORDED and disposition is Disposition.DEFERRED else 0)


def test_merge_fork_reads_the_merge_base_and_what_is_decided_after_it() -> None:
    entries = [_entry(i, Disposition.PICKED) for i in range(3)]  # merged: the merge base is entries[2]
    entries += [_entry(3, Disposition.DEFERRED, EvidenceKind.RECORDED), _entry(4, Disposition.PICKED)]
    h = headline(_ledger(entries, fork_point=entries[2].commit.sha))  # the merge base is listed: a merge fork
    assert h.point.sha == entries[2].commit.sha and h.days_behind == pytest.approx(2)
    assert h.rule.startswith("merge base")
    assert h.if_deferred.sha == entries[4].commit.sha and h.if_deferred_days == 0


def _doc_lines(doc: dict[str, Any]) -> list[str]:
    from forkflow.ledger.headline import headline_lines
    return [label for label, _ in headline_lines(doc)]


def test_headline_lines_are_side_by_side() -> None:
    h = headline(_ledger([_entry(0, Disposition.DEFERRED, EvidenceKind.RECORDED), _entry(1, Disposition.PICKED)]),
                 conflicts=[("0" * 40, "k.py"), ("0" * 40, "j.py"), ("9" * 40, "gone.py")])
    assert h.conflict_commits == 1 and h.conflict_files == 2  # a record of a commit no longer listed: not open
    assert _doc_lines(h.to_json())[:5] == ["days behind upstream", "oldest open commit", "open commits",
                                           "open conflicts", "if deferred"]


def test_a_merge_forks_held_conflict_keeps_the_point_at_the_merge_base(conflicting: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = _merge_init(conflicting, cli, intake="merge")
    assert cli("ingest", "--land", repo=fork).rc == 4  # c1..c3 merged; c4 conflicts
    c3, c4 = (run_git("rev-parse", f"upstream/main~{n}", cwd=fork).strip() for n in (3, 2))
    doc = cli("status", "--json", repo=fork).json()
    assert doc["ingestion_point"]["sha"] == c3  # the merge base: c4 is only held
    assert doc["days_behind"] == pytest.approx((_date(fork, "upstream/main") - _date(fork, c3)) / DAY, abs=0.01)
    h = doc["headline"]
    assert h["oldest_open"]["sha"] == c4 and h["open_conflicts"] == {"commits": 1, "files": 1}
    assert h["rule"].startswith("merge base")


def test_replay_counts_forkflows_holds_as_open(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    from forkflow.replay.model import iso as replay_iso

    b = builder
    b.upstream_commit({"k.py": "def f():\n    return 1\n"}, "Initial (#1)")
    b.branch_fork()
    b.fork_commit({"k.py": "def f():\n    return 10  # fork\n"}, "[fork] f")
    b.tick(DAY)
    held = b.upstream_commit({"k.py": "def f():\n    return 100\n"}, "Tune f (#10)")
    b.tick(9 * DAY)
    b.upstream_commit({"a.py": "A = 1\n"}, "Add a (#11)")
    b.tick(DAY)
    b.fork_commit({"z.py": "Z = 1\n"}, "[fork] z")  # the fork moved in the window replayed
    b.fetch()
    fork = b.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    at = replay_iso(_date(fork, "main") + 3600)
    r = cli("replay", "--since", at, "--until", at, "--every", "day", "--json", repo=fork)
    assert r.rc == 0, r.err
    (step,) = r.json()["steps"]
    after = step["after"]
    tip = _date(fork, "upstream/main")
    # before: 0.0, the deferral of #10 counted as a decision
    assert after["days_behind"] == pytest.approx((tip - _date(fork, "upstream/main~2")) / DAY, abs=0.01)
    assert after["held"] == 1 and after["if_deferred_days"] == 0
    assert after["conflict_commits"] == 1 and after["conflict_files"] == 1
    assert after["oldest_open_days"] == pytest.approx((tip - _date(fork, held)) / DAY, abs=0.01)
    assert step["same_rule"]["days_behind"] == after["days_behind"]  # like with like, now the same


def test_a_conflicts_age_is_counted_to_upstreams_tip_as_status_counts(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    """`conflicts` and `status` say the same age of the commit a conflict holds: both count to
    upstream's tip (counted to now, a mirror fetched long ago made every conflict older)."""
    fork, held = _held_fork(cli, builder)
    oldest = cli("status", "--json", repo=fork).json()["headline"]["oldest_open"]
    listed = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    assert listed and {c["upstream_sha"] for c in listed} == {held}
    assert {c["age_days"] for c in listed} == {int(oldest["age_days"])}
    shown = cli("conflicts", "show", str(listed[0]["id"]), "--json", repo=fork).json()
    assert shown["age_days"] == int(oldest["age_days"])
    assert f"{int(oldest['age_days'])} d old" in " ".join(cli("conflicts", "show", str(listed[0]["id"]), repo=fork).out.split())
