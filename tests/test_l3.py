"""L3: request, run, sign-off by a listed owner only, and the list."""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.test_tiers_support import PY, make_repo, suite_toml

TOKENS = {"tok-alice": "alice", "tok-mallory": "mallory"}


@contextmanager
def forge_users() -> Iterator[str]:
    """A forge that answers GitHub's `GET /user` with the login of the bearer token."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            token = self.headers.get("Authorization", "").removeprefix("Bearer ")
            login = TOKENS.get(token)
            body = json.dumps({"login": login} if login else {"message": "Bad credentials"}).encode()
            self.send_response(200 if login and self.path == "/user" else 401)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _identity(repo: Path, api: str) -> None:
    cfg = repo / "forkflow.toml"
    cfg.write_text(cfg.read_text() + f'\n[l3]\nidentity = "github"\napi = "{api}"\ntoken_env = "L3_TOKEN"\n')

BENCH = 'import json, sys\njson.dump({"metrics": [{"name": "fsdp.loss", "value": 1.25, "unit": "", "better": "lower"}]}, open(sys.argv[1], "w"))\n'


@pytest.mark.security
def test_l3_request_run_signoff_list(tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    toml = suite_toml("fsdp", f"{PY} bench.py {{report}}", tier="L3", report="metrics",
                      owners=["training-oncall", "alice"]) + suite_toml("unit", "true")
    repo, sha = make_repo(tmp_path / "fork", toml, {"bench.py": BENCH})
    r = cli("l3", "request", "fsdp", "--rev", "HEAD", "--by", "bob", "--json", repo=repo)
    assert r.rc == 0, r.err
    rid = r.json()["request_id"]
    # a typed name is no identity: without [l3] identity nothing signs off
    r = cli("l3", "signoff", str(rid), "--owner", "alice", "--verdict", "accept", repo=repo)
    assert r.rc == 1 and "not a typed name" in r.err
    with forge_users() as api:
        _identity(repo, api)
        monkeypatch.setenv("L3_TOKEN", "tok-alice")
        r = cli("l3", "signoff", str(rid), "--verdict", "accept", repo=repo)
        assert r.rc == 1 and f"has no finished run to sign off; run: forkflow l3 run {rid}" in r.err
        r = cli("l3", "run", str(rid), "--json", repo=repo)
        assert r.rc == 0, r.out + r.err
        run_id = r.json()["run_id"]
        monkeypatch.setenv("L3_TOKEN", "tok-mallory")
        r = cli("l3", "signoff", str(rid), "--verdict", "accept", repo=repo)
        assert r.rc == 1 and "'mallory' (github account of the token) is not an owner of suite 'fsdp'" in r.err
        # mallory's token cannot sign as alice by typing her name
        r = cli("l3", "signoff", str(rid), "--owner", "alice", "--verdict", "accept", repo=repo)
        assert r.rc == 1 and "--owner 'alice' is not who signs off" in r.err
        monkeypatch.setenv("L3_TOKEN", "tok-forged")
        r = cli("l3", "signoff", str(rid), "--verdict", "accept", repo=repo)
        assert r.rc == 1 and "github refused the token (401)" in r.err
        monkeypatch.setenv("L3_TOKEN", "tok-alice")
        r = cli("l3", "signoff", str(rid), "--verdict", "maybe", repo=repo)
        assert r.rc == 1 and "must be accept or reject" in r.err
        r = cli("l3", "signoff", str(rid), "--verdict", "accept", "--note", "loss ok", repo=repo)
        assert r.rc == 0, r.err
    doc = cli("l3", "list", "--json", repo=repo).json()["requests"]
    assert len(doc) == 1 and doc[0]["state"] == "ACCEPTED" and doc[0]["rev"] == sha
    assert doc[0]["runs"][0]["run_id"] == run_id and doc[0]["runs"][0]["status"] == "PASS"
    assert [(x["owner"], x["verdict"], x["note"], x["run_id"]) for x in doc[0]["signoffs"]] == \
        [("alice", "accept", "loss ok", run_id)]
    assert "ACCEPTED" in cli("l3", "list", repo=repo).out


def test_l3_bad_requests(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    toml = suite_toml("fsdp", "true", tier="L3", report="metrics", owners=["alice"]) + suite_toml("unit", "true")
    repo, _ = make_repo(tmp_path / "fork", toml)
    assert "no suite named 'nope'" in cli("l3", "request", "nope", repo=repo).err
    assert "suite 'unit' is L1, not L3" in cli("l3", "request", "unit", repo=repo).err
    assert "--rev 'zzz' is not a commit" in cli("l3", "request", "fsdp", "--rev", "zzz", repo=repo).err
    assert "no L3 request 42" in cli("l3", "run", "42", repo=repo).err
    assert "no L3 requests yet" in cli("l3", "list", repo=repo).out
