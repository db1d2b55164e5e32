"""`forkflow serve`: the dashboard.  FastAPI and uvicorn are imported only when it runs."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from forkflow.cli.common import RepoOpt, StoreOpt, err_console
from forkflow.errors import UserError


def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Address to listen on; keep 127.0.0.1 unless "
                                                     "behind a proxy that authenticates.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")] = 8040,
    token: Annotated[str | None, typer.Option(
        "--token", envvar="FORKFLOW_TOKEN", show_envvar=True,
        help="Operator token that actions (L3 sign-off, re-runs, approvals) must carry; without it "
             "the dashboard is read-only.  Pass it by FORKFLOW_TOKEN or --token-file: on the "
             "command line every user of the machine sees it in `ps`.")] = None,
    token_file: Annotated[Path | None, typer.Option(
        "--token-file", help="Read the operator token from this file (its first line).")] = None,
    fork: Annotated[str | None, typer.Option("--fork", help="Which fork of a shared store to show.")] = None,
    allowed_host: Annotated[list[str] | None, typer.Option(
        "--allowed-host", help="A Host name the dashboard answers besides its own (the name a reverse "
        "proxy forwards; repeat it for more, `*` for any).  Other Host headers get 400, which stops "
        "DNS-rebinding pages.")] = None,
    open_browser: Annotated[bool, typer.Option("--open", help="Open it in a browser.")] = False,
    repo: RepoOpt = Path("."),
    store: StoreOpt = None,
) -> int:
    """Serve the dashboard: overview, ingestion, validation, L2 and triage pages (and JSON)."""
    from forkflow.config import find_config
    from forkflow.context import Context, open_context
    from forkflow.web.serve import serve_store

    if token_file is not None:
        token = _read_token_file(token_file)
    elif token is not None and getattr(ctx.get_parameter_source("token"), "name", "") == "COMMANDLINE":
        err_console.print("warning: --token on the command line is visible to every user of this "
                          "machine (ps); pass it by FORKFLOW_TOKEN or --token-file instead")
    if token is not None and len(token) < 8:
        raise UserError("--token is shorter than 8 characters; use a long random one "
                        "(python -c 'import secrets; print(secrets.token_urlsafe())')")
    explicit = store or os.environ.get("FORKFLOW_STORE")
    if explicit and explicit.startswith("sqlite:///"):  # a viewer never creates a store: a typo is an error
        db = Path(explicit.removeprefix("sqlite:///"))
        if not db.is_file():
            raise UserError(f"no forkflow store at {db}; check the path (a fork's store is its "
                            ".git/forkflow/forkflow.db), or run `forkflow status` in the fork first")
    target: str | Context
    if find_config(repo.resolve()) is not None:
        target = open_context(repo, store)
    elif store is not None or os.environ.get("FORKFLOW_STORE"):
        target = store or os.environ["FORKFLOW_STORE"]
    else:
        raise UserError(f"no forkflow.toml in {repo.resolve()} and no --store; run it in the fork's "
                        "checkout (forkflow init first) or pass --store URL")
    return serve_store(target, host, port, open_browser=open_browser, token=token, fork=fork,
                       allowed_hosts=tuple(allowed_host or ()))


def _read_token_file(path: Path) -> str:
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise UserError(f"cannot read --token-file {path}: {e.strerror}") from None
    lines = head.decode("utf-8", "replace").splitlines()
    return lines[0].strip() if lines else ""


def register(app: typer.Typer) -> None:
    app.command()(serve)
