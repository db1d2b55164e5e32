"""Issue sinks against a real local HTTP server: retries, no duplicates, permissions, no token leaks."""
from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from forkflow.errors import UserError
from forkflow.triage.sinks.base import IssueDraft, SinkError, defuse_markers, ensure, key_in
from forkflow.triage.sinks.github import GitHubSink
from forkflow.triage.sinks.gitlab import GitLabSink
from forkflow.triage.sinks.markdown import MarkdownSink
from tests.fakeforge import FakeForge

TOKEN = "ghp_SECRET_token_1234567890"
READ_ONLY = "glpat-READONLY-0987654321"
KEY = "0123456789abcdef"
DRAFT = IssueDraft(KEY, "[forkflow] EXCEPTION: KeyError", "body text", ("forkflow", "nightly"))


@pytest.fixture
def forge() -> Iterator[FakeForge]:
    with FakeForge(tokens={TOKEN: "write", READ_ONLY: "read"}) as f:
        yield f


def _github(forge: FakeForge, token: str = TOKEN, **kw: Any) -> GitHubSink:
    return GitHubSink("acme/fork", token, api=forge.url + "/github", backoff=0.01, **kw)


def _gitlab(forge: FakeForge, token: str = TOKEN, **kw: Any) -> GitLabSink:
    return GitLabSink("acme/fork", token, api=forge.url + "/gitlab", backoff=0.01, **kw)


@pytest.mark.parametrize("make", [_github, _gitlab])
def test_sink_creates_once_then_updates(forge: FakeForge, make: Any) -> None:
    sink = make(forge)
    ref, created = ensure(sink, DRAFT, "seen again")
    assert created and ref.open
    ref2, created2 = ensure(sink, DRAFT, "seen again in run 7")
    assert not created2 and ref2.id == ref.id
    issues = forge.issues("acme/fork")
    assert len(issues) == 1
    assert key_in(issues[0]["body"]) == KEY
    assert forge.comments("acme/fork", 1) == ["seen again in run 7"]
    closed = sink.close(ref2, "green for 3 nightlies")
    assert not closed.open and forge.issues("acme/fork")[0]["state"] == "closed"
    reopened, _ = ensure(sink, DRAFT, "red again")
    assert reopened.open and len(forge.issues("acme/fork")) == 1


@pytest.mark.parametrize("make", [_github, _gitlab])
def test_lost_answer_on_create_does_not_duplicate(forge: FakeForge, make: Any) -> None:
    forge.fail("POST", r"/issues$", status=500, times=1, after_effect=True)
    ref, created = ensure(make(forge), DRAFT, "")
    assert created
    assert len(forge.issues("acme/fork")) == 1
    assert ref.id == "1"


@pytest.mark.parametrize("make", [_github, _gitlab])
def test_500_and_429_are_retried_with_backoff(forge: FakeForge, make: Any) -> None:
    waits: list[float] = []
    forge.fail("GET", r"/issues$", status=500, times=2)
    forge.fail("POST", r"/issues$", status=429, times=2, retry_after="3")
    sink = make(forge, sleep=waits.append)
    ref, _ = ensure(sink, DRAFT, "")
    assert len(forge.issues("acme/fork")) == 1
    assert waits[:2] == [0.01, 0.02]      # exponential backoff on 500
    assert 3.0 in waits                   # Retry-After honoured on 429
    assert ref.id == "1"


def test_forge_that_keeps_failing_raises_and_loses_nothing(forge: FakeForge) -> None:
    forge.fail("POST", r"/issues$", status=503, times=100)
    sink = _github(forge, retries=2, sleep=lambda _s: None)
    with pytest.raises(SinkError, match="503"):
        ensure(sink, DRAFT, "")
    assert forge.issues("acme/fork") == []
    forge.state.faults.clear()
    ensure(sink, DRAFT, "")          # the next sync files it, once
    assert len(forge.issues("acme/fork")) == 1


@pytest.mark.parametrize("make", [_github, _gitlab])
def test_token_without_permission_is_a_user_error_without_the_token(
        forge: FakeForge, make: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(UserError) as e:
        ensure(make(forge, READ_ONLY), DRAFT, "")
    assert "403" in str(e.value) and "permission" in str(e.value)
    assert READ_ONLY not in str(e.value)
    assert READ_ONLY not in caplog.text
    with pytest.raises(UserError, match="401") as e2:
        ensure(make(forge, "wrong-token"), DRAFT, "")
    assert "wrong-token" not in str(e2.value)
    assert forge.issues("acme/fork") == []


def test_token_only_in_the_auth_header(forge: FakeForge, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    ensure(_github(forge), DRAFT, "x")
    ensure(_gitlab(forge), DRAFT, "x")
    assert TOKEN not in caplog.text
    reqs = forge.requests()
    assert all(TOKEN not in r.path and TOKEN not in r.body for r in reqs)
    assert any(r.headers.get("Authorization") == f"Bearer {TOKEN}" for r in reqs)
    assert any(r.headers.get("PRIVATE-TOKEN") == TOKEN for r in reqs)


def test_markdown_sink_round_trip(tmp_path: Path) -> None:
    sink = MarkdownSink(tmp_path / "issues")
    ref, created = ensure(sink, DRAFT, "")
    assert created and (tmp_path / "issues" / f"{KEY}.md").is_file()
    assert sink.create(DRAFT) == ref      # never a second file
    ref, created = ensure(sink, DRAFT, "seen in run 9")
    assert not created
    text = (tmp_path / "issues" / f"{KEY}.md").read_text()
    assert "seen in run 9" in text and "state: open" in text
    closed = sink.close(ref, "green for 3 nightlies")
    assert not closed.open and sink.find(KEY) is not None and not sink.find(KEY).open  # type: ignore[union-attr]
    assert list((tmp_path / "issues").glob(".tmp-*")) == []


def test_untrusted_text_cannot_forge_a_marker() -> None:
    evil = f"log line <!-- forkflow:group={'f' * 16} --> more"
    assert key_in(defuse_markers(evil)) is None
