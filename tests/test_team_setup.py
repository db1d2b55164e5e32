"""Setup of the team tests (no tests here): an upstream, a shared bare fork remote, clones of it in folders of
any name, one store; and what the invariant "landed means on the shared branch" checks."""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, text

from forkflow.git.run import run_git
from forkflow.models import Sha
from forkflow.testing.gitrepo import ForkBuilder


def git(path: Path, *args: str) -> str:
    return run_git(*args, cwd=path).strip()


@dataclass
class Team:
    root: Path
    upstream: Path
    shared: Path  # the bare remote every clone pushes to
    store: str
    commits: list[Sha]  # upstream commits after the fork point, oldest first


def make_team(root: Path, store: str, n: int = 10, files_per_commit: int = 1) -> Team:
    """Upstream with `n` independent commits after the fork point; the fork is upstream's first
    commit, published as the bare `shared.git`."""
    b = ForkBuilder(root / "b")
    b.upstream_commit({"README": "base\n"}, "base")
    b.branch_fork()
    shared = root / "shared.git"
    run_git("clone", "-q", "--bare", str(b.f.path), str(shared), cwd=root)
    commits = [b.upstream_commit({f"f{i}_{k}.txt": f"{i}\n" for k in range(files_per_commit)}, f"change {i} (#{i + 1})")
               for i in range(n)]
    return Team(root, b.upstream.path, shared, store, commits)


def clone(team: Team, folder: str, l1: str = "true", extra: str = "", detach: bool = True) -> Path:
    """A clone of the shared remote in `folder`, set up with `forkflow init` against the store."""
    path = team.root / folder
    run_git("clone", "-q", str(team.shared), str(path), cwd=team.root)
    git(path, "config", "user.name", "Cron")
    git(path, "config", "user.email", "cron@example.com")
    if detach:  # as automation does: a run killed mid-way leaves no checked-out files behind its branch
        git(path, "checkout", "-q", "--detach")
    r = forkflow("init", "--upstream", str(team.upstream), "--store", team.store, cwd=path)
    assert r.returncode == 0, r.stderr
    with (path / "forkflow.toml").open("a") as f:
        f.write(f'\n[ingest]\nl1_command = "{l1}"\nmax_batch = 1\nmax_bundle = 1\n{extra}')
    return path


def forkflow(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
             ) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "forkflow"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "forkflow"]
    return subprocess.run([*cmd, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def store_picked(store: str, fork_name: str | None = None) -> set[str]:
    """Upstream commits the store records PICKED (for every fork, or the one named)."""
    engine = create_engine(store)
    try:
        with engine.connect() as c:
            q = ("SELECT d.upstream_sha FROM dispositions d JOIN forks f ON f.id = d.fork_id "
                 "WHERE d.disposition = 'PICKED'")
            params: dict[str, str] = {}
            if fork_name is not None:
                q += " AND f.name = :n"
                params["n"] = fork_name
            return {r[0] for r in c.execute(text(q), params)}
    finally:
        engine.dispose()


def trailers_on_shared(team: Team, branch: str = "main") -> list[str]:
    """Every `Upstream-Commit:` trailer value on the shared branch, in order (duplicates kept)."""
    out = git(team.shared, "log", "--format=%(trailers:key=Upstream-Commit,valueonly)", branch)
    return [line.strip() for line in out.splitlines() if line.strip()]


def check_invariant(team: Team) -> tuple[set[str], list[str]]:
    """Every commit the store calls PICKED is on the shared branch; no trailer appears twice."""
    picked = store_picked(team.store)
    on_shared = trailers_on_shared(team)
    missing = picked - set(on_shared)
    assert not missing, f"{len(missing)} commit(s) recorded PICKED that the shared branch lacks"
    assert len(on_shared) == len(set(on_shared)), "an Upstream-Commit trailer appears twice on the shared branch"
    return picked, on_shared


PG_BIN = Path(os.environ.get("FORKFLOW_PG_BIN", "/usr/lib/postgresql/15/bin"))


class Cluster:
    """A throwaway PostgreSQL cluster on its own port, for tests that stop or restart the database
    (never the shared dev server).  Run as the `postgres` user when the tests run as root."""

    def __init__(self, root: Path, port: int) -> None:
        self.data, self.port = root / "pgdata", port
        self.sock = root / "pgsock"
        self.log = root / "pg.log"

    def _run(self, *args: str, check: bool = True) -> None:
        cmd = [str(PG_BIN / args[0]), *args[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=check, capture_output=True, timeout=60)

    def init(self) -> Cluster:
        self.sock.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", "postgres", str(self.data.parent)], check=True)
        self._run("initdb", "-D", str(self.data), "-U", "forkflow", "--auth=trust", "-E", "UTF8")
        self.start()
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "forkflow", "team")
        return self

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://forkflow@127.0.0.1:{self.port}/team"

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-o",
                  f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1", "start")

    def stop(self, check: bool = True) -> None:
        """Stop the server; with `check` False, one already stopped (by a test's fault) is no error."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop", check=check)

    def ctl_command(self, action: str) -> str:
        """The shell line that stops or restarts this cluster (for an L1 command to run mid-ingest)."""
        ctl = f"{PG_BIN}/pg_ctl -D {self.data} -m fast -w"
        if action == "restart":
            ctl += f" -l {self.log} -o '-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1'"
        ctl += f" {action}"
        return f"runuser -u postgres -- {ctl}" if os.geteuid() == 0 else ctl


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
