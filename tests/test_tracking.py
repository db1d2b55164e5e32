"""Tracking issues for nightly failures: one per group, updated, closed after N green nightlies."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from forkflow import wiring
from forkflow.context import open_context
from forkflow.errors import UserError
from forkflow.testing.gitrepo import ForkBuilder
from forkflow.tiers.reports import TestOutcome
from forkflow.tiers.tiers import Tier
from forkflow.triage.sinks.base import SinkError, key_in
from forkflow.triage.sinks.github import GitHubSink
from forkflow.triage.tracking import Action, sync_tracking
from tests.fakeforge import FakeForge
from tests.test_triage import CUDA, add_run, triage_fork

TOKEN = "ghp_nightly_SECRET_42"


@pytest.fixture
def fork(builder: ForkBuilder, cli) -> Path:  # type: ignore[no-untyped-def]
    triage_fork(builder, cli, {"CODEOWNERS": "* @everyone\nkernels/ @kernel-team\n"}, "[fork] owners")
    cfg = builder.f.path / "forkflow.toml"
    cfg.write_text(cfg.read_text() + "\n[triage]\nclose_after = 2\n")
    return builder.f.path


def nightly(fork: Path, builder: ForkBuilder, red: bool, files: dict[str, str] | None = None) -> int:
    rev = builder.fork_commit(files or {f"n{len(list(fork.iterdir()))}.txt": "x\n"}, "[fork] nightly change")
    ctx = open_context(fork)
    results = [("test_mm", TestOutcome.FAIL if red else TestOutcome.PASS, CUDA if red else ""),
               ("test_ok", TestOutcome.PASS, "")]
    return add_run(ctx, rev, results, tier=Tier.L2, trigger="nightly")


def test_markdown_issue_lifecycle(fork: Path, builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    nightly(fork, builder, red=False)
    first = nightly(fork, builder, red=True, files={"kernels/mm.py": "broken\n"})
    r = cli("issues", "sync", "--json", repo=fork)
    assert r.rc == 0, r.err
    [step] = r.json()["steps"]
    assert step["action"] == "open" and step["tests"] == ["test_mm"]
    [issue] = list((fork / ".git" / "forkflow" / "issues").glob("*.md"))
    body = issue.read_text()
    assert key_in(body) == step["group"]
    assert "illegal memory access" in body and "@kernel-team" in body
    assert "kernels/mm.py" in body           # the culprit's hunk in the suggested fix
    assert f"run {first}" in body
    assert cli("issues", "sync", "--json", repo=fork).json()["steps"] == []  # same nightly: no-op
    nightly(fork, builder, red=True)
    again = cli("issues", "sync", "--json", repo=fork).json()["steps"]
    assert [s["action"] for s in again] == ["update"]
    assert len(list((fork / ".git" / "forkflow" / "issues").glob("*.md"))) == 1
    nightly(fork, builder, red=False)
    assert [s["action"] for s in cli("issues", "sync", "--json", repo=fork).json()["steps"]] == ["green"]
    nightly(fork, builder, red=False)
    assert [s["action"] for s in cli("issues", "sync", "--json", repo=fork).json()["steps"]] == ["close"]
    assert "state: closed" in issue.read_text()
    nightly(fork, builder, red=True)           # back: the same issue reopens
    assert [s["action"] for s in cli("issues", "sync", "--json", repo=fork).json()["steps"]] == ["update"]
    assert "state: open" in issue.read_text()


@pytest.fixture
def forge() -> Iterator[FakeForge]:
    with FakeForge(tokens={TOKEN: "write"}) as f:
        yield f


def test_github_sync_survives_a_failing_forge(fork: Path, builder: ForkBuilder, forge: FakeForge) -> None:
    nightly(fork, builder, red=True)
    ctx = open_context(fork)
    sink = GitHubSink("acme/fork", TOKEN, api=forge.url + "/github", retries=1, backoff=0.01)
    forge.fail("POST", r"/issues$", status=503, times=5)
    with pytest.raises(SinkError, match="503"):
        sync_tracking(wiring.triager(ctx), sink=sink)
    assert forge.issues("acme/fork") == []
    forge.state.faults.clear()
    forge.fail("POST", r"/issues$", status=500, times=1, after_effect=True)  # created, answer lost
    result = sync_tracking(wiring.triager(ctx), sink=sink)
    assert [st.action for st, _ in result.steps] == [Action.OPEN]
    assert len(forge.issues("acme/fork")) == 1      # found by its marker, not filed again
    assert sync_tracking(wiring.triager(ctx), sink=sink).steps == ()
    assert TOKEN not in str(result.to_dict())


def test_forge_that_stays_down_is_one_line_and_exit_1(fork: Path, builder: ForkBuilder, forge: FakeForge,  # type: ignore[no-untyped-def]
                                                      monkeypatch: pytest.MonkeyPatch, cli) -> None:
    nightly(fork, builder, red=True)
    cfg = fork / "forkflow.toml"
    cfg.write_text(cfg.read_text().replace("close_after = 2", 'close_after = 2\nsink = "github"\n'
                                           f'github_repo = "acme/fork"\ngithub_api = "{forge.url}/github"'))
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    forge.fail("GET", r"/issues", status=503, times=1000, retry_after="0")  # no waiting between tries
    r = cli("issues", "sync", repo=fork)
    assert r.rc == 1 and "answered 503" in r.err and "re-run later" in r.err, r.err
    assert "unexpectedly" not in r.err and len(r.err.strip().splitlines()) == 1 and TOKEN not in r.err
    assert forge.issues("acme/fork") == []


def test_missing_token_is_a_user_error(fork: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:  # type: ignore[no-untyped-def]
    cfg = fork / "forkflow.toml"
    cfg.write_text(cfg.read_text().replace("close_after = 2", 'close_after = 2\nsink = "github"\n'
                                           'github_repo = "acme/fork"'))
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    r = cli("issues", "sync", repo=fork)
    assert r.rc == 1 and "$GITHUB_TOKEN" in r.err
    with pytest.raises(UserError):
        from forkflow.triage.tracking import make_sink
        make_sink(open_context(fork).config)
