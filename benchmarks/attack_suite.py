"""Re-run the attacks of docs/security.md and count the ones that hold, with peak memory for the
large inputs.

    python benchmarks/attack_suite.py [--postgres URL] [--skip-tests]

1. Every test marked `security` under tests/ runs under pytest; an attack "holds"
   when its test passes.  The PostgreSQL ones need --postgres (or FORKFLOW_TEST_POSTGRES) and
   are counted as skipped without it.
2. The large-input cases run again in child processes whose peak resident memory (ru_maxrss)
   is measured: a 400 MB POST to `forkflow serve` (sent as Content-Length, then chunked), a
   50 MB agent answer (command and HTTP endpoint), and `conflicts resolve --file /dev/zero`.
   Each prints the child's peak next to its baseline (the same child doing nothing).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MiB = 1024 * 1024


def run_tests(postgres: str | None) -> tuple[int, int, int, list[str]]:
    """(held, broke, skipped, names of the broken) of the `security` tests."""
    report = Path(tempfile.mkdtemp(prefix="forkflow-attacks-")) / "report.xml"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if postgres:
        env["FORKFLOW_TEST_POSTGRES"] = postgres
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "security", "-p", "no:cacheprovider",
                    f"--junitxml={report}", str(ROOT / "tests")],
                   cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import xml.etree.ElementTree as ET

    held = broke = skipped = 0
    broken = []
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name", "")
        if case.find("skipped") is not None:
            skipped += 1
        elif case.find("failure") is not None or case.find("error") is not None:
            broke += 1
            broken.append(name)
        else:
            held += 1
    return held, broke, skipped, broken


LIMIT = 2048 * MiB  # address space of a measured child: an unbounded read stops here, not at the host's RAM


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def child_peak(code: str, *args: str, timeout: float = 300) -> tuple[float, str]:
    """Peak RSS (MiB) of a Python child running `code`, and its last output line."""
    import threading

    proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), preexec_fn=_limit_memory,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    lines = [x for x in out.strip().splitlines() if x.strip()]
    last = lines[-1] if lines else ""
    if proc.returncode not in (0, 1):
        last = f"exit {proc.returncode}: {last[:120]}"
    return usage.ru_maxrss / 1024, last


AGENT_CASE = textwrap.dedent('''
    import sys, time
    from pathlib import Path
    from forkflow.conflicts.engine import resolve_case
    from forkflow.conflicts.resolvers.agent import AgentResolver, CommandBackend, HttpBackend
    from tests.test_conflicts import BASE, OURS, THEIRS, make_case
    tmp = Path(sys.argv[2])
    case = make_case(tmp, BASE, OURS, THEIRS)
    log = []
    if sys.argv[1] == "baseline":
        print("baseline"); raise SystemExit
    if sys.argv[1] == "command":
        script = tmp / "flood.py"
        script.write_text("import sys\\nsys.stdin.read()\\nc = 'y' * 1048576\\n"
                          "for _ in range(50): sys.stdout.write(c)\\n")
        backend = CommandBackend([sys.executable, str(script)], 60)
    else:
        backend = HttpBackend(sys.argv[3], "m", None, 60)
    start = time.monotonic()
    out = resolve_case(case, [AgentResolver(backend, log.append)])
    print(f"resolved={out.resolved} outcome={log[0].outcome} ({log[0].reason}) in {time.monotonic() - start:.1f}s")
''')

FLOOD_SERVER = textwrap.dedent('''
    import sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = b'{"choices": [{"message": {"content": "' + b"z" * (50 * 1048576) + b'"}}]}'
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
            try: self.wfile.write(body)
            except OSError: pass
    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()
''')


def agent_peaks(tmp: Path) -> list[tuple[str, float, str]]:
    base, _ = child_peak(AGENT_CASE, "baseline", str(tmp))
    rows = [("agent baseline (imports, no call)", base, "")]
    peak, line = child_peak(AGENT_CASE, "command", str(tmp))
    rows.append(("agent command answering 50 MB", peak, line))
    srv = subprocess.Popen([sys.executable, "-c", FLOOD_SERVER], stdout=subprocess.PIPE, text=True)
    assert srv.stdout is not None
    port = srv.stdout.readline().strip()
    try:
        peak, line = child_peak(AGENT_CASE, "http", str(tmp), f"http://127.0.0.1:{port}/v1")
        rows.append(("agent HTTP endpoint answering 50 MB", peak, line))
    finally:
        srv.kill()
        srv.wait()
    return rows


def _send(port: int, head: bytes, chunks: int, chunk: bytes) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head)
        try:
            for _ in range(chunks):
                s.sendall(chunk)
        except OSError:
            pass
        try:
            return s.recv(200).decode("latin-1").split("\r\n", 1)[0]
        except OSError:
            return "(closed)"


def _vmhwm(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def dashboard_peaks(tmp: Path) -> list[tuple[str, float, str]]:
    """`forkflow serve` as a user runs it; its peak RSS before and after 400 MB bodies."""
    from forkflow.store.session import Store

    url = f"sqlite:///{tmp / 'ff.db'}"
    Store.open(url).dispose()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = Path(sys.executable).parent / "forkflow"
    serve = subprocess.Popen([str(exe), "serve", "--store", url, "--port", str(port), "--repo", str(tmp)],
                             cwd=tmp, env=dict(os.environ, FORKFLOW_TOKEN="attack-suite-token-123"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        rows = [("dashboard idle", _vmhwm(serve.pid), "")]
        path = b"/api/validation/runs/1/rerun"
        head = (b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                b"application/x-www-form-urlencoded\r\nContent-Length: 400000000\r\n\r\n")
        line = _send(port, head, 400, b"a" * MiB)
        rows.append(("dashboard, 400 MB POST (Content-Length)", _vmhwm(serve.pid), line))
        head = (b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                b"application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n")
        line = _send(port, head, 400, b"%x\r\n%s\r\n" % (MiB, b"a" * MiB))
        rows.append(("dashboard, 400 MB POST (chunked)", _vmhwm(serve.pid), line))
        line = _send(port, b"GET /api/overview HTTP/1.1\r\nHost: rebind.evil.example\r\n\r\n", 0, b"")
        rows.append(("dashboard, DNS-rebinding Host header", _vmhwm(serve.pid), line))
        return rows
    finally:
        serve.terminate()
        serve.wait(30)


RESOLVE_CASE = textwrap.dedent('''
    import sys
    from pathlib import Path
    from forkflow.cli.main import main
    from forkflow.testing.gitrepo import ForkBuilder
    b = ForkBuilder(Path(sys.argv[1]))
    b.upstream_commit({"k.py": "def f():\\n    return 1\\n"}, "Initial (#1)")
    b.branch_fork()
    b.fork_commit({"k.py": "def f():\\n    return 10  # fork\\n"}, "[fork] f")
    b.upstream_commit({"k.py": "def f():\\n    return 100\\n"}, "Tune f (#10)")
    fork = str(b.f.path)
    assert main(["init", "--upstream", "upstream", "--repo", fork]) == 0
    with open(fork + "/forkflow.toml", "a") as f:
        f.write('\\n[ingest]\\nl1_command = "true"\\n')
    assert main(["ingest", "--land", "--repo", fork]) == 4  # the conflict waits for a person
    rc = main(["conflicts", "resolve", "1", "--file", "/dev/zero", "--repo", fork])
    print(f"exit {rc}")
''')


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--postgres", default=os.environ.get("FORKFLOW_TEST_POSTGRES"),
                    help="PostgreSQL URL for the shared-store attacks (else they are skipped)")
    ap.add_argument("--skip-tests", action="store_true", help="only the memory measurements")
    args = ap.parse_args()
    if not args.skip_tests:
        start = time.monotonic()
        held, broke, skipped, broken = run_tests(args.postgres)
        print(f"attacks that hold: {held} of {held + broke} run ({skipped} skipped) "
              f"in {time.monotonic() - start:.0f} s")
        for name in broken:
            print(f"  BROKEN: {name}")
    with tempfile.TemporaryDirectory(prefix="forkflow-attacks-") as d:
        tmp = Path(d)
        for sub in ("agent", "web", "resolve"):
            (tmp / sub).mkdir()
        rows = agent_peaks(tmp / "agent")
        rows += dashboard_peaks(tmp / "web")
        peak, line = child_peak(RESOLVE_CASE, str(tmp / "resolve"))
        rows.append(("conflicts resolve --file /dev/zero (whole CLI run)", peak, line))
    print(f"{'large input':56} {'peak RSS':>10}  outcome")
    for name, mib, outcome in rows:
        print(f"{name:56} {mib:7.0f} MiB  {outcome}")
    print(json.dumps({"peaks_mib": {name: round(mib) for name, mib, _ in rows}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
