"""Every dashboard action request, done or refused, malformed ones included, is one line in
actions.log with the client's address and a reason, and gets a 4xx with one line, never a 500."""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forkflow.web.app import create_app
from tests.test_web_actions import TOKEN, Fork, fork  # noqa: F401  (the fixture: a real fork with an L3 request)


@pytest.fixture
def client(fork: Fork) -> Iterator[TestClient]:  # noqa: F811
    with TestClient(create_app(fork.ctx, TOKEN, actions_log=fork.log, allowed_hosts=["testserver"])) as c:
        yield c


def _lines(fork: Fork) -> list[str]:
    return fork.log.read_text(encoding="utf-8").splitlines() if fork.log.exists() else []


def _one_more_line(client: TestClient, fork: Fork, path: str, **kw: Any) -> tuple[int, str, dict[str, Any]]:
    """POST once: the status, the one-line message answered, and the one line it added to the log."""
    before = _lines(fork)
    r = client.post(path, **kw)
    after = _lines(fork)
    assert len(after) == len(before) + 1, (r.status_code, r.text, after[len(before):])
    entry = json.loads(after[-1])
    assert entry["client"] == "testclient" and entry["outcome"], entry
    message = (str(r.json().get("error", "")) if r.headers.get("content-type", "").startswith("application/json")
               else r.text)
    assert "\n" not in message.strip(), message
    return r.status_code, message, entry


def _signoff(fork: Fork) -> str:
    return f"/api/validation/l3/{fork.request_id}/signoff"


JSON = {"Content-Type": "application/json", "Accept": "application/json"}


@pytest.mark.security
def test_a_lone_surrogate_in_a_json_token_is_refused_and_logged(client: TestClient, fork: Fork) -> None:
    status, message, entry = _one_more_line(client, fork, _signoff(fork), headers=JSON,
                                            content=b'{"token": "\\ud800", "owner": "x", "verdict": "accept"}')
    assert status == 400 and "surrogate" in message
    assert entry["action"] == "l3-signoff" and entry["outcome"].startswith("refused: the JSON body holds a lone")


@pytest.mark.security
@pytest.mark.parametrize("headers,body,status,reason", [
    (JSON, b"{not json", 400, "not valid JSON"),
    (JSON, b"[" * 100_000 + b"]" * 100_000, 400, "over 64 KiB"),  # cut by size before it is parsed
    (JSON, b"[" * 20_000 + b"]" * 20_000, 400, "nested too deeply"),
    (JSON, b'{"owner": ["a"]}', 400, "must be a string"),
    (JSON, b'{"owner": "\\udfff"}', 400, "surrogate"),
    (JSON, b'{"n": 1' + b"0" * 5000 + b"}", 400, "not valid JSON"),
    (JSON, b'"\xff\xfe"', 400, "not valid JSON"),
    ({"Content-Type": "text/plain", "Accept": "application/json"}, b"token=x", 415, "type 'text/plain'"),
    ({"Content-Type": "multipart/form-data; boundary=x", "Accept": "application/json"}, b"--x--", 415, "form"),
    ({"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}, b"x" * (100 * 1024),
     400, "over 64 KiB"),
    ({"Content-Type": "application/x-www-form-urlencoded"}, b"x" * (300 * 1024), 413, "over 256 KiB"),
], ids=["bad-json", "huge-json", "deep-json", "array-field", "surrogate-field", "long-number",
        "bad-utf8", "text-plain", "multipart", "over-64k", "over-256k"])
def test_malformed_action_bodies_are_4xx_and_logged(client: TestClient, fork: Fork, headers: dict[str, str],
                                                    body: bytes, status: int, reason: str) -> None:
    got, message, entry = _one_more_line(client, fork, _signoff(fork), headers=headers, content=body)
    assert got == status and reason in message, (got, message)
    assert entry["outcome"].startswith("refused") and reason in entry["outcome"], entry


@pytest.mark.security
def test_action_requests_refused_before_a_route_are_logged(client: TestClient, fork: Fork) -> None:
    status, message, entry = _one_more_line(client, fork, _signoff(fork), headers={"Host": "evil.example"},
                                            data={"token": TOKEN})
    assert status == 400 and "unknown Host" in message and "unknown Host" in entry["outcome"]
    status, _, entry = _one_more_line(client, fork, "/api/validation/runs/abc/rerun", headers={"Accept": "application/json"})
    assert status == 400 and entry["action"] == "rerun" and entry["outcome"].startswith("refused: bad request")
    status, _, entry = _one_more_line(client, fork, "/api/no-such-action", headers={"Accept": "application/json"})
    assert status == 404 and entry["target"] == "/api/no-such-action" and entry["outcome"].startswith("refused")
    status, _, entry = _one_more_line(client, fork, "/", headers={"Accept": "application/json"})  # a page, not an action
    assert status == 405 and entry["outcome"] == "refused: Method Not Allowed"


def test_a_done_action_is_one_line(client: TestClient, fork: Fork) -> None:
    status, _, entry = _one_more_line(client, fork, _signoff(fork), headers={"X-Forkflow-Token": TOKEN},
                                      json={"owner": "perf-oncall", "verdict": "accept"})
    assert status == 200 and entry["outcome"] == "done" and entry["owner"] == "perf-oncall"


def test_log_lines_stay_lines_whatever_the_text(client: TestClient, fork: Fork) -> None:
    evil = "a\u2028b\u2029c\x85d\x1ce"
    _, _, entry = _one_more_line(client, fork, _signoff(fork), headers={"X-Forkflow-Token": TOKEN},
                                 json={"owner": evil, "verdict": "accept"})
    assert entry["owner"] == evil  # kept exactly, as JSON escapes on one line


CONTENT_TYPES = st.sampled_from(["application/json", "application/x-www-form-urlencoded", "text/plain", "",
                                 "application/json; charset=latin-1", "APPLICATION/JSON"])
BODIES = st.binary(max_size=300) | st.lists(st.sampled_from(
    [b"{", b"}", b"[", b'"', b"\\ud800", b"\\udc00", b"token", b":", b",", b"=", b"&", b"%ff", b"%ED%A0%80",
     b"\xed\xa0\x80", b"\xff", b"null", b"1e999", b"-"]), max_size=40).map(b"".join)


@pytest.mark.security
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=CONTENT_TYPES, body=BODIES, header_token=st.booleans())
def test_any_body_is_answered_4xx_with_one_log_line(client: TestClient, fork: Fork, kind: str, body: bytes,
                                                    header_token: bool) -> None:
    headers = {"Accept": "application/json", **({"Content-Type": kind} if kind else {}),
               **({"X-Forkflow-Token": TOKEN + "-wrong"} if header_token else {})}
    status, _, entry = _one_more_line(client, fork, _signoff(fork), headers=headers, content=body)
    assert 400 <= status < 500 and entry["outcome"].startswith("refused")
