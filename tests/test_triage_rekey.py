"""Signatures stored by older rules are keyed again on read (SIGNATURE_VERSION), on real SQLite
and PostgreSQL, starting from a store created at the schema revision before `sig_version`."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text

from forkflow import wiring
from forkflow.config import find_config, load_config
from forkflow.context import Context, fork_name, open_context
from forkflow.git.repo import Repo
from forkflow.store import forks
from forkflow.store.schema_triage import FailureGroupRow, FailureRow, TrackingIssueRow
from forkflow.store.session import MIGRATIONS, Store, _make_engine
from forkflow.testing.gitrepo import ForkBuilder
from forkflow.tiers.reports import TestOutcome
from forkflow.tiers.tiers import Tier
from forkflow.triage import records as ts
from forkflow.triage.models import Classification, FailureKind, Signature
from forkflow.triage.signature import SIGNATURE_VERSION, signature_of
from forkflow.triage.sinks.base import IssueDraft, key_in
from forkflow.triage.sinks.github import GitHubSink
from forkflow.triage.sinks.markdown import MarkdownSink
from forkflow.triage.tracking import Action, sync_tracking
from forkflow.triage.triage import TriageSettings, triage_run
from tests.test_triage import KEYERROR, add_run, triage_fork

NEW_KEY = signature_of(KEYERROR).key
OLD_TEXT = "EXCEPTION: KeyError: <as the first rules normalized it>"  # what version 1 stored
OLD_KEY = Signature(FailureKind.EXCEPTION, OLD_TEXT, "").key


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'old.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def fork(builder: ForkBuilder, cli) -> Path:  # type: ignore[no-untyped-def]
    return triage_fork(builder, cli)


def previous_revision_context(fork: Path, url: str) -> Context:
    """A store migrated to every head but triage_0002, as the forkflow before it left stores."""
    from alembic import command
    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory

    engine = _make_engine(url, create=True)
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    heads = sorted(set(ScriptDirectory.from_config(cfg).get_heads()) - {"triage_0002"})
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        for head in [*heads, "triage_0001"]:
            command.upgrade(cfg, head)
    store = Store(engine, url)  # not Store.open: that would migrate it
    repo = Repo.open(fork)
    cfg_path = find_config(repo.path)
    assert cfg_path is not None
    config = load_config(cfg_path)
    with store.session_scope() as s:
        fid = forks.fork_id(s, fork_name(repo, config))
    return Context(repo=repo, config=config, store=store, fork_id=fid)


def store_old_failure(ctx: Context, run_id: int, test: str) -> None:
    """Triage rows as the first rules wrote them: no sig_version column, a key of their own."""
    now = datetime.now(timezone.utc)
    with ctx.store.engine.begin() as c:
        c.execute(text("INSERT INTO triage_groups (fork_id, key, kind, signature, first_seen_at, last_seen_at, "
                       "first_run_id, last_run_id) VALUES (:f, :k, 'EXCEPTION', :s, :t, :t, :r, :r)"),
                  {"f": ctx.fork_id, "k": OLD_KEY, "s": OLD_TEXT, "t": now, "r": run_id})
        gid = c.execute(text("SELECT id FROM triage_groups WHERE key = :k"), {"k": OLD_KEY}).scalar_one()
        c.execute(text("INSERT INTO triage_failures (fork_id, run_id, suite, test_id, group_id, line, excerpt) "
                       "VALUES (:f, :r, 'unit', :t, :g, 4, 'KeyError')"),
                  {"f": ctx.fork_id, "r": run_id, "t": test, "g": gid})


def _revs(b: ForkBuilder) -> tuple[str, str]:
    base = b.f.git("rev-parse", "HEAD").strip()
    unit = b.fork_commit({"g.py": "G = 2\n"}, "[fork] unit under test")
    return base, unit


def test_red_on_trunk_stays_broken_trunk_across_the_upgrade(fork: Path, builder: ForkBuilder,
                                                             store_url: str) -> None:
    base, unit = _revs(builder)
    old = previous_revision_context(fork, store_url)
    trunk = add_run(old, base, [("test_tune", TestOutcome.FAIL, KEYERROR)])
    store_old_failure(old, trunk, "test_tune")
    run = add_run(old, unit, [("test_tune", TestOutcome.FAIL, KEYERROR)], base=base)
    old.store.dispose()

    ctx = open_context(fork, store_url)  # the upgrade: migrates to triage_0002
    with ctx.store.session_scope() as s:
        assert s.execute(select(FailureGroupRow.key, FailureGroupRow.sig_version)).all() == [(OLD_KEY, 1)]
    report = triage_run(wiring.triager(ctx), run, settings=TriageSettings(reruns=0))
    [v] = report.verdicts
    assert v.classification is Classification.BROKEN_TRUNK, v.reason
    with ctx.store.session_scope() as s:
        [(key, version)] = s.execute(select(FailureGroupRow.key, FailureGroupRow.sig_version).join(
            FailureRow, FailureRow.group_id == FailureGroupRow.id).where(FailureRow.run_id == trunk)).all()
    assert (key, version) == (NEW_KEY, SIGNATURE_VERSION)
    assert triage_run(wiring.triager(ctx), run, settings=TriageSettings(reruns=0)).verdicts[0].classification \
        is Classification.BROKEN_TRUNK  # read again: nothing left to re-key


def test_tracked_group_keeps_its_issue_across_the_upgrade(fork: Path, builder: ForkBuilder,
                                                          store_url: str) -> None:
    first = builder.fork_commit({"k.py": "broken\n"}, "[fork] nightly change")
    old = previous_revision_context(fork, store_url)
    red = add_run(old, first, [("test_tune", TestOutcome.FAIL, KEYERROR)], tier=Tier.L2, trigger="nightly")
    store_old_failure(old, red, "test_tune")
    issues = fork / ".git" / "forkflow" / "issues"
    ref = MarkdownSink(issues).create(IssueDraft(OLD_KEY, "[forkflow] KeyError", "body"))
    with old.store.engine.begin() as c:
        c.execute(text("INSERT INTO triage_tracking (fork_id, sink, group_key, issue_id, url, state, green_streak, "
                       "last_run_id, opened_at, updated_at) VALUES (:f, 'markdown', :k, :i, :u, 'open', 0, :r, "
                       ":t, :t)"), {"f": old.fork_id, "k": OLD_KEY, "i": ref.id, "u": ref.url, "r": red,
                                   "t": datetime.now(timezone.utc)})
    old.store.dispose()

    second = builder.fork_commit({"n.py": "x\n"}, "[fork] nightly change")
    ctx = open_context(fork, store_url)
    add_run(ctx, second, [("test_tune", TestOutcome.FAIL, KEYERROR)], tier=Tier.L2, trigger="nightly")
    result = sync_tracking(wiring.triager(ctx), sink=MarkdownSink(issues), agent=None)
    [(step, got)] = result.steps
    assert step.action is Action.UPDATE and step.key == NEW_KEY
    assert got is not None and got.id == ref.id  # the same issue, not a second one
    [issue] = list(issues.glob("*.md"))
    assert key_in(issue.read_text()) == NEW_KEY
    with ctx.store.session_scope() as s:
        rows = s.execute(select(TrackingIssueRow.group_key, TrackingIssueRow.sig_version,
                                TrackingIssueRow.issue_id)).all()
    assert rows == [(NEW_KEY, SIGNATURE_VERSION, ref.id)]
    assert sync_tracking(wiring.triager(ctx), sink=MarkdownSink(issues), agent=None).steps == ()


def test_tracking_is_keyed_again_when_read_first(fork: Path, builder: ForkBuilder, store_url: str) -> None:
    """The dashboard reads tracked groups before any run: they move to the new key all the same."""
    old = previous_revision_context(fork, store_url)
    rev = builder.f.git("rev-parse", "HEAD").strip()
    red = add_run(old, rev, [("test_tune", TestOutcome.FAIL, KEYERROR)], tier=Tier.L2, trigger="nightly")
    store_old_failure(old, red, "test_tune")
    with old.store.engine.begin() as c:
        c.execute(text("INSERT INTO triage_tracking (fork_id, sink, group_key, issue_id, url, state, green_streak, "
                       "last_run_id, opened_at, updated_at) VALUES (:f, 'github', :k, '7', '', 'open', 0, :r, "
                       ":t, :t)"), {"f": old.fork_id, "k": OLD_KEY, "r": red, "t": datetime.now(timezone.utc)})
    old.store.dispose()
    ctx = open_context(fork, store_url)
    with ctx.store.session_scope() as s:
        assert list(ts.tracking(s, ctx.fork_id, "github")) == [NEW_KEY]
        assert ts.tracking(s, ctx.fork_id, "github")[NEW_KEY].issue_id == "7"


def test_a_failure_whose_log_is_gone_keeps_its_old_key(fork: Path, builder: ForkBuilder) -> None:
    """A job's failure was keyed from its log; stores before triage_0002 kept only its path: once
    the log is deleted, the old key stays and matches as before."""
    ctx = open_context(fork)
    rev = builder.f.git("rev-parse", "HEAD").strip()
    run = add_run(ctx, rev, [("[unit]", TestOutcome.ERROR, "")], log=KEYERROR)
    ts_rows = _tamper_to_version_1(ctx, run, window=False)
    Path(_log_path(ctx, run)).unlink()
    with ctx.store.session_scope() as s:
        [f] = ts.stored_failures(s, run) or []
        assert f.signature.key == OLD_KEY
        assert s.execute(select(FailureGroupRow.sig_version)).scalars().all() == [1]
    assert ts_rows == 1


def test_a_failure_keyed_from_its_log_is_keyed_again_while_the_log_exists(fork: Path,
                                                                          builder: ForkBuilder) -> None:
    ctx = open_context(fork)
    rev = builder.f.git("rev-parse", "HEAD").strip()
    run = add_run(ctx, rev, [("[unit]", TestOutcome.ERROR, "")], log=KEYERROR)
    _tamper_to_version_1(ctx, run)
    with ctx.store.session_scope() as s:
        [f] = ts.stored_failures(s, run) or []
    assert f.signature.key == NEW_KEY


def test_a_failure_keyed_from_its_log_is_keyed_again_from_its_window_once_the_log_is_gone(
        fork: Path, builder: ForkBuilder) -> None:
    ctx = open_context(fork)
    rev = builder.f.git("rev-parse", "HEAD").strip()
    noise = "".join(f"step {i} ok\n" for i in range(20_000))
    run = add_run(ctx, rev, [("[unit]", TestOutcome.ERROR, "")], log=noise + KEYERROR + "teardown\n" * 5)
    _tamper_to_version_1(ctx, run)
    Path(_log_path(ctx, run)).unlink()
    with ctx.store.session_scope() as s:
        [f] = ts.stored_failures(s, run) or []
        [window] = s.scalars(select(FailureRow.source)).all()
    assert f.signature.key == NEW_KEY
    assert KEYERROR in window and len(window) < 70_000  # the error's part of the log, capped


def test_a_message_keeps_no_window(fork: Path, builder: ForkBuilder) -> None:
    """A failure keyed from its message (kept in the store) stores nothing more."""
    ctx = open_context(fork)
    rev = builder.f.git("rev-parse", "HEAD").strip()
    run = add_run(ctx, rev, [("test_tune", TestOutcome.FAIL, KEYERROR)], log="x\n" * 100)
    _tamper_to_version_1(ctx, run)
    with ctx.store.session_scope() as s:
        assert [f.signature.key for f in ts.stored_failures(s, run) or []] == [NEW_KEY]
        assert s.scalars(select(FailureRow.source)).all() == [""]


def _log_path(ctx: Context, run: int) -> str:
    from forkflow.tiers import records as tq

    with ctx.store.session_scope() as s:
        [job] = tq.jobs_of_run(s, run)
    return job.log_path


def _tamper_to_version_1(ctx: Context, run: int, window: bool = True) -> int:
    """Store the run's failures, then make their group look written by the first rules (and,
    without `window`, the failures stored before their log's window was)."""
    from forkflow.triage.triage import failures_of_run

    failures_of_run(wiring.triager(ctx).journal, run)
    with ctx.store.session_scope() as s:
        if not window:
            for f in s.scalars(select(FailureRow)):
                f.source = ""
        groups: list[Any] = list(s.scalars(select(FailureGroupRow)))
        for g in groups:
            g.key, g.signature, g.sig_version = OLD_KEY, OLD_TEXT, 1
        return len(groups)


def _track(ctx: Context, sink: str, key: str, issue_id: str, url: str, run_id: int) -> None:
    with ctx.store.engine.begin() as c:
        c.execute(text("INSERT INTO triage_tracking (fork_id, sink, group_key, issue_id, url, state, green_streak, "
                       "last_run_id, opened_at, updated_at) VALUES (:f, :s, :k, :i, :u, 'open', 0, :r, :t, :t)"),
                  {"f": ctx.fork_id, "s": sink, "k": key, "i": issue_id, "u": url, "r": run_id,
                   "t": datetime.now(timezone.utc)})


def test_github_issue_of_a_rekeyed_group_is_updated_not_filed_again(fork: Path, builder: ForkBuilder) -> None:
    from tests.fakeforge import FakeForge

    token = "ghp_rekey_SECRET"
    with FakeForge(tokens={token: "write"}) as forge:
        sink = GitHubSink("acme/fork", token, api=forge.url + "/github", retries=1, backoff=0.01)
        url = f"sqlite:///{fork.parent / 'gh.db'}"
        old = previous_revision_context(fork, url)
        first = builder.fork_commit({"k.py": "broken\n"}, "[fork] nightly change")
        red = add_run(old, first, [("test_tune", TestOutcome.FAIL, KEYERROR)], tier=Tier.L2, trigger="nightly")
        store_old_failure(old, red, "test_tune")
        ref = sink.create(IssueDraft(OLD_KEY, "[forkflow] KeyError", "body"))
        _track(old, "github", OLD_KEY, ref.id, ref.url, red)
        old.store.dispose()
        ctx = open_context(fork, url)
        second = builder.fork_commit({"n.py": "x\n"}, "[fork] nightly change")
        add_run(ctx, second, [("test_tune", TestOutcome.FAIL, KEYERROR)], tier=Tier.L2, trigger="nightly")
        [(step, got)] = sync_tracking(wiring.triager(ctx), sink=sink, agent=None).steps
        assert step.action is Action.UPDATE and got is not None and got.id == ref.id
        [issue] = forge.issues("acme/fork")
        assert key_in(issue["body"]) == NEW_KEY
        assert sink.find(NEW_KEY) is not None  # found by its marker from now on


def test_two_tracked_groups_the_new_rules_merge_leave_one_issue_tracking(fork: Path, builder: ForkBuilder,
                                                                          store_url: str) -> None:
    """Two tests failed with one error that the old rules keyed twice: the first tracked group
    takes the new key, the other keeps its old one and counts green nightlies until it closes."""
    old = previous_revision_context(fork, store_url)
    rev = builder.fork_commit({"k.py": "broken\n"}, "[fork] nightly change")
    red = add_run(old, rev, [("test_a", TestOutcome.FAIL, KEYERROR), ("test_b", TestOutcome.FAIL, KEYERROR)],
                  tier=Tier.L2, trigger="nightly")
    store_old_failure(old, red, "test_a")
    other = Signature(FailureKind.EXCEPTION, OLD_TEXT + " (b)", "").key
    now = datetime.now(timezone.utc)
    with old.store.engine.begin() as c:
        c.execute(text("INSERT INTO triage_groups (fork_id, key, kind, signature, first_seen_at, last_seen_at, "
                       "first_run_id, last_run_id) VALUES (:f, :k, 'EXCEPTION', :s, :t, :t, :r, :r)"),
                  {"f": old.fork_id, "k": other, "s": OLD_TEXT + " (b)", "t": now, "r": red})
        gid = c.execute(text("SELECT id FROM triage_groups WHERE key = :k"), {"k": other}).scalar_one()
        c.execute(text("INSERT INTO triage_failures (fork_id, run_id, suite, test_id, group_id, line, excerpt) "
                       "VALUES (:f, :r, 'unit', 'test_b', :g, 4, 'KeyError')"),
                  {"f": old.fork_id, "r": red, "g": gid})
    _track(old, "github", OLD_KEY, "1", "", red)
    _track(old, "github", other, "2", "", red)
    old.store.dispose()
    ctx = open_context(fork, store_url)
    with ctx.store.session_scope() as s:
        [f_a, f_b] = ts.stored_failures(s, red) or []
        tracked = ts.tracking(s, ctx.fork_id, "github")
    assert f_a.signature.key == f_b.signature.key == NEW_KEY
    assert sorted((k, t.issue_id) for k, t in tracked.items()) == sorted([(NEW_KEY, "1"), (other, "2")])


def test_log_window_keeps_the_error_and_caps_the_rest(tmp_path: Path) -> None:
    from forkflow.triage.signature import log_window, signature_of_file

    log = tmp_path / "job.log"
    log.write_bytes(b"x" * 3_000_000 + b"\n" + b"".join(b"step %d\n" % i for i in range(50_000))
                    + KEYERROR.encode() + b"y" * 1_000_000 + b"\n")
    sig = signature_of_file(log)
    window = log_window(log, sig.line)
    assert KEYERROR in window and len(window) <= 64 * 1024
    assert signature_of(window).key == sig.key == NEW_KEY
    assert len(log_window(log, 0)) == 64 * 1024          # no line known: the end of the log
    assert log_window(log, 10**9) == ""                  # past the end: nothing
    short = tmp_path / "short.log"
    short.write_text(KEYERROR)
    assert log_window(short, 1) == KEYERROR


def test_triage_0002_downgrades_and_upgrades_again(store_url: str) -> None:
    from alembic import command
    from alembic.config import Config as AlembicConfig
    from sqlalchemy import inspect

    store = Store.open(store_url)
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with store.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "triage_0001")
    assert "sig_version" not in {c["name"] for c in inspect(store.engine).get_columns("triage_groups")}
    store.dispose()
    store = Store.open(store_url)
    for table in ("triage_groups", "triage_tracking"):
        assert "sig_version" in {c["name"] for c in inspect(store.engine).get_columns(table)}
    assert "source" in {c["name"] for c in inspect(store.engine).get_columns("triage_failures")}
    store.dispose()
