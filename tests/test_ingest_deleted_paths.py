"""Upstream changes to a file the fork deleted: `ingest` settles them as the fork settled the same
path before (its pick commits kept it deleted), once that rule earned its record on the fork's own
history, and the backtest reads such conflicts in all of the fork's picks, not only the newest it
replays whole."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from forkflow.conflicts import learn as learning
from forkflow.conflicts.trust import rules_of
from forkflow.models import Sha
from forkflow.testing.gitrepo import ForkBuilder

WORKFLOW = ".github/workflows/amd.yml"


def _fork(cli, builder: ForkBuilder, past: int, trust: str) -> tuple[Path, Sha, Sha]:  # type: ignore[no-untyped-def]
    """A fork that deleted upstream's AMD workflow and took `past` upstream commits that change it
    (each kept deleted, with a code change picked beside it); then two pending upstream commits:
    one that changes the workflow and the code, one that changes only the workflow."""
    builder.upstream_commit({WORKFLOW: "runs-on: gfx942\n", "src/k.py": "K = 0\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({WORKFLOW: None}, "[fork] drop upstream's AMD workflow")
    for i in range(past):
        up = builder.upstream_commit({WORKFLOW: f"runs-on: gfx942\nstep: {i}\n", "src/k.py": f"K = {i + 1}\n"},
                                     f"[CI] step {i} (#{10 + i})")
        builder.fetch()
        builder.fork_commit({"src/k.py": f"K = {i + 1}\n"}, f"[CI] step {i} (#{10 + i})",
                            f"(cherry picked from commit {up})")
    both = builder.upstream_commit({WORKFLOW: "runs-on: gfx950\n", "src/k.py": "K = 99\n"}, "[AMD] gfx950 (#98)")
    only = builder.upstream_commit({WORKFLOW: "runs-on: gfx950\ncache: pip\n"}, "[AMD][CI] pip cache (#99)")
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write(f"\n[ingest]\nl1_command = {json.dumps(f'{sys.executable} -c pass')}\n\n[trust]\n{trust}")
    return fork, both, only


def test_a_change_to_a_file_the_fork_deleted_is_settled_as_before(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork, both, only = _fork(cli, builder, past=3, trust="min_cases = 2\n")
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc == 0, r.err
    assert builder.f.git("show", "main:src/k.py") == "K = 99\n"
    assert builder.f.git("ls-tree", "main", "--", WORKFLOW).strip() == ""  # still deleted
    trailers = builder.f.git("log", "-1", "--format=%B", "main")
    assert f"Upstream-Commit: {both}" in trailers and f"Resolved-By: recorded {WORKFLOW}" in trailers
    rows = {c["sha"]: c for c in cli("status", "--commits", "--json", repo=fork).json()["commits"]}
    assert rows[both]["disposition"] == "PICKED"
    # the workflow-only commit changes nothing once settled, and says so (not "already applied")
    assert rows[only]["disposition"] == "SKIPPED"
    assert "once its conflicts are settled" in rows[only]["reason"] and WORKFLOW in rows[only]["reason"]
    (rule,) = [x for x in cli("conflicts", "rules", "--json", repo=fork).json()["rules"]
               if x["rule"] == "history: deleted, as the fork did before [other]"]
    assert (rule["cases"], rule["identical"], rule["status"]) == (2, 2, "trusted")  # the first taught it


@pytest.mark.security
def test_until_the_rule_earns_its_record_a_person_decides(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork, both, only = _fork(cli, builder, past=3, trust="")  # the defaults: 95% over 10 cases
    before = builder.f.git("rev-parse", "main")
    assert cli("ingest", "--land", repo=fork).rc == 4
    assert builder.f.git("rev-parse", "main") == before
    held = {c["upstream_sha"] for c in cli("conflicts", "--json", repo=fork).json()["conflicts"]}
    assert both in held and all("trust:" in t or "no proposal" in t or "deleted" in t
                                for c in cli("conflicts", "--json", repo=fork).json()["conflicts"]
                                for t in c["tried"])


def test_the_backtest_reads_deletions_in_picks_older_than_it_replays_whole(  # type: ignore[no-untyped-def]
        cli, builder: ForkBuilder, monkeypatch) -> None:
    fork, _, _ = _fork(cli, builder, past=4, trust="")
    from forkflow.git.repo import Repo

    repo = Repo(fork)
    tip = repo.resolve("HEAD")
    assert tip is not None
    monkeypatch.setattr(learning, "MAX_PAST_PICKS", 1)  # one pick replayed whole, as 400 are on a real fork
    history, skipped = learning.learn_fork(repo, tip)
    assert skipped == [] and history.book is not None
    record = history.book.record("history: deleted, as the fork did before [other]")
    assert (record.cases, record.identical) == (3, 3)  # 4 past picks: the oldest teaches the path
    assert history.settled_path(WORKFLOW, "fork") is not None
    # replayed whole, the newest pick alone: no case of the rule (what a 400-pick window gave before)
    newest, _ = learning.learn_from_picks(fork, reversed(learning.past_picks(repo, tip, 1)))
    assert newest.book is not None and newest.book.record("history: deleted, as the fork did before [other]").cases == 0


def test_recorded_answers_from_the_forks_past_are_the_history_rule() -> None:
    assert rules_of("recorded", "deleted, as the fork did before (abc123)", WORKFLOW) == (
        "history: deleted, as the fork did before [other]",)
    assert rules_of("recorded", "recorded resolution (by ann)", WORKFLOW) == (
        "recorded: recorded resolution [other]",)
