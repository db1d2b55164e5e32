from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from forkflow.testing.gitrepo import ForkBuilder

# Deterministic git everywhere (pre-commit pins these in tox.ini).
for _k, _v in {
    "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}.items():
    os.environ.setdefault(_k, _v)
os.environ.pop("FORKFLOW_STORE", None)


@dataclass
class CliResult:
    rc: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture(autouse=True, scope="session")
def _temporary_files_inside_pytests_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """forkflow's temporary files, and its child processes' (the L1 work trees of a run a test
    kills with SIGKILL), go under pytest's own folder, which pytest rotates, not into /tmp."""
    import tempfile

    folder = tmp_path_factory.getbasetemp() / "tmp"
    folder.mkdir(exist_ok=True)
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None  # read TMPDIR again
    yield
    if before is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = before
    tempfile.tempdir = None


@pytest.fixture
def builder(tmp_path: Path) -> ForkBuilder:
    return ForkBuilder(tmp_path / "repos")


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """Run the real CLI in-process: cli("status", "--json", repo=path)."""
    from forkflow.cli.main import main

    def run(*args: str, repo: Path | None = None) -> CliResult:
        argv = list(args)
        if repo is not None:
            argv += ["--repo", str(repo)]
        capsys.readouterr()
        rc = main(argv)
        cap = capsys.readouterr()
        return CliResult(rc, cap.out, cap.err)

    return run


def run_forkflow(*args: str, cwd: Path, env: dict[str, str] | None = None,
                 timeout: float = 120) -> CliResult:
    """Run the installed `forkflow` entry point as a user would, in a subprocess."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    exe = Path(sys.executable).parent / "forkflow"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "forkflow"]
    p = subprocess.run([*cmd, *args], cwd=cwd, capture_output=True, text=True, env=full_env,
                       timeout=timeout)
    return CliResult(p.returncode, p.stdout, p.stderr)


def service(env_name: str, what: str) -> str:
    """The address of a service CI starts (.ci/run); skip locally without it, fail in CI."""
    value = os.environ.get(env_name)
    if value:
        return value
    if os.environ.get("FORKFLOW_REQUIRE_SERVICES"):
        pytest.fail(f"{env_name} is not set: .ci/run should have started {what}")
    pytest.skip(f"{what} not available (set {env_name}; .ci/run starts it)")


@pytest.fixture
def postgres_url():  # type: ignore[no-untyped-def]
    """A fresh, empty database on the PostgreSQL server .ci/run starts; dropped afterwards."""
    import uuid

    from sqlalchemy import create_engine, text

    base = service("FORKFLOW_TEST_POSTGRES", "a PostgreSQL server")
    name = f"ff_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield base.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
