"""Run the dashboard under uvicorn: `forkflow serve` and `forkflow demo --serve` call `serve_store`."""
from __future__ import annotations

import errno
import logging
import socket
import sys
import threading
import time
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from forkflow.context import Context
from forkflow.errors import UserError
from forkflow.state import state_dir

if TYPE_CHECKING:  # both are imported only when the dashboard runs
    import uvicorn
    from fastapi import FastAPI

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def check_port(host: str, port: int) -> None:
    """Fail early, with what to do, when the address cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise UserError(f"port {port} on {host} is in use; pass another --port "
                                "(or stop the dashboard already running there)") from None
            raise UserError(f"cannot listen on {host}:{port} ({e.strerror}); check --host and --port") from None


def actions_log_for(target: str | Context) -> Path | None:
    """Where actions are logged: the fork's state folder (`<git-common-dir>/forkflow/`), or next to a
    SQLite store file."""
    if isinstance(target, Context):
        return state_dir(target.repo) / "actions.log"
    if target.startswith("sqlite:///") and not target.endswith(":memory:"):
        return Path(target.split("///", 1)[1]).parent / "actions.log"
    return None


def allowed_hosts_for(host: str, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The Host header names the dashboard answers: the loopback names, and when it listens on
    another address that address and this machine's names and addresses; plus `extra` (the
    names a reverse proxy forwards, or `*` for any)."""
    names = {"localhost", "127.0.0.1", "::1"}
    if host not in LOCAL_HOSTS:
        names |= {host, socket.gethostname(), socket.getfqdn()}
        try:
            names |= set(socket.gethostbyname_ex(socket.gethostname())[2])
        except OSError:
            pass
    names |= set(extra)
    names -= {"0.0.0.0", "::", ""}
    return tuple(sorted(names))


def uvicorn_config(app: FastAPI, host: str, port: int, quiet: bool = False) -> uvicorn.Config:
    """uvicorn's settings for the dashboard.  proxy_headers is off: X-Forwarded-For from any
    local process would otherwise replace the client the actions log records (issue 13)."""
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, log_level="warning" if quiet else "info",
                          access_log=not quiet, lifespan="off", proxy_headers=False)


def serve_store(target: str | Context, host: str = "127.0.0.1", port: int = 8040, *,
                open_browser: bool = False, token: str | None = None, fork: str | None = None,
                demo: bool = False, quiet: bool = False, allowed_hosts: tuple[str, ...] = ()) -> int:
    """Serve the dashboard over a store URL or a Context until interrupted; returns an exit code."""
    import uvicorn

    from forkflow.web.app import create_app

    check_port(host, port)
    app = create_app(target, token, fork=fork, actions_log=actions_log_for(target), demo=demo,
                     allowed_hosts=allowed_hosts_for(host, allowed_hosts))
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/"
    if host not in LOCAL_HOSTS:
        print(f"warning: listening on {host}: anyone who reaches this machine can read the dashboard",
              file=sys.stderr)
    print(f"forkflow dashboard on {url} ({'actions need the token' if token else 'read-only'}); "
          "Ctrl-C stops it", file=sys.stderr, flush=True)
    actions = logging.getLogger("forkflow.web.actions")
    actions.setLevel(logging.INFO)
    if not actions.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("action: %(message)s"))
        actions.addHandler(handler)
    server = uvicorn.Server(uvicorn_config(app, host, port, quiet))
    if open_browser:
        threading.Timer(0.8, lambda: webbrowser.open(url)).start()
    server.run()
    return 0


def serve_demo(keep: Path | None, console: Console, host: str = "127.0.0.1", port: int = 8040, *,
               open_browser: bool = True) -> int:
    """`forkflow demo --serve`: run the demo, add a simulated year of nightly history, serve it all."""
    import shutil
    import tempfile

    from forkflow.context import open_context
    from forkflow.demo import check_keep, run_demo
    from forkflow import wiring
    from forkflow.testing.seed import DAY, SeedSize, seed_store

    check_port(host, port)
    check_keep(keep)
    root = keep if keep is not None else Path(tempfile.mkdtemp(prefix="forkflow-demo-"))
    try:
        rc = run_demo(root, console)
        if rc != 0:
            return rc
        ctx = open_context(root / "sample" / "fork")
        picked = [e for e in wiring.ledger(ctx).entries if e.fork_shas]
        culprit = (picked[-1].commit.sha, picked[-1].commit.subject) if picked else None
        # the simulated year ends yesterday, so the demo's own `status` snapshots end the history
        today = int(time.time()) // DAY * DAY
        seed_store(ctx.store, ctx.fork_name, SeedSize(days=365, metrics=16, upstream_commits=0),
                   ingestion=False, culprit=culprit, start=today - 365 * DAY)
        console.rule("[bold]8. forkflow serve")
        console.print("the landing units and conflicts above, plus a simulated year of days behind upstream, "
                      "nightly L2 metrics, alerts, a bisection, validation runs and triaged failures")
        return serve_store(ctx, host, port, open_browser=open_browser, demo=True)
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
