"""Smaller points of issue 12: status filters, plan progress, conflicts grouped with an owner."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from forkflow.conflicts.owners import codeowners_globs as _codeowners_globs
from forkflow.render import group_conflicts
from forkflow.conflicts.records import ConflictInfo
from forkflow.demo import build_sample, demo_config
from forkflow.models import Sha
from forkflow.tiers.selection import matches
from forkflow.testing.gitrepo import ForkBuilder


def test_status_commits_filter_by_disposition_and_text(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"README": "hello\n"}, "Initial")
    builder.branch_fork()
    a = builder.upstream_commit({"lib/a.py": "A = 1\n"}, "Add a (#1)")
    builder.upstream_commit({"lib/b.py": "B = 1\n"}, "Tune b (#2)")
    builder.upstream_commit({"lib/c.py": "C = 1\n"}, "Tune c (#3)")
    builder.pick(a)
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    doc = cli("status", "--json", "--only", "pending", repo=fork).json()
    assert [c["subject"] for c in doc["commits"]] == ["Tune b (#2)", "Tune c (#3)"]
    doc = cli("status", "--json", "--only", "PICKED,PENDING", "--grep", "TUNE C", repo=fork).json()
    assert [c["subject"] for c in doc["commits"]] == ["Tune c (#3)"]
    assert doc["counts"]["pending"] == 2  # the summary still counts everything
    r = cli("status", "--only", "LATER", repo=fork)
    assert r.rc == 1 and "not a disposition" in r.err
    assert "Tune b" not in cli("status", "--grep", "add a", repo=fork).out


def test_plan_reports_progress_and_keeps_json_clean(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    from forkflow.context import open_context
    from forkflow.landing.plan import make_plan
    from forkflow.landing.settings import ingest_settings
    from forkflow import wiring

    sample = build_sample(tmp_path / "sample")
    assert cli("init", "--upstream", "upstream", repo=sample.fork).rc == 0
    with (sample.fork / "forkflow.toml").open("a") as f:
        f.write(demo_config(sys.executable))
    ctx = open_context(sample.fork)
    seen: list[str] = []
    make_plan(ctx.repo, ctx.store, wiring.ledger(ctx), ingest_settings(ctx.config),
              progress=lambda what, d, t: seen.append(what))
    assert "reading changes" in seen and "probing bundles" in seen
    r = cli("plan", "--json", repo=sample.fork)
    assert r.rc == 0 and json.loads(r.out)["units"]


def test_conflicts_grouped_per_commit_with_owner(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    sample = build_sample(tmp_path / "sample")
    assert cli("init", "--upstream", "upstream", repo=sample.fork).rc == 0
    with (sample.fork / "forkflow.toml").open("a") as f:
        f.write(demo_config(sys.executable))
    (sample.fork / "CODEOWNERS").write_text("* @fork-maintainers\n/mini/ @compiler-team\n")
    cli("ingest", "--land", repo=sample.fork)
    listed = cli("conflicts", "--json", repo=sample.fork).json()["conflicts"]
    assert listed and {c["owner"] for c in listed} <= {"@compiler-team", "@kernels-team"}
    out = cli("conflicts", repo=sample.fork).out
    assert "by upstream commit" in out and len({c["upstream_sha"] for c in listed}) <= out.count("\n")
    shown = " ".join(cli("conflicts", "show", str(listed[0]["id"]), repo=sample.fork).out.split())
    assert f"forkflow decide {listed[0]['upstream_sha'][:12]} --skip|--wont-port|--defer" in shown


def test_group_conflicts_and_codeowners_globs() -> None:
    def info(i: int, sha: str, path: str) -> ConflictInfo:
        from datetime import datetime, timezone
        return ConflictInfo(i, Sha(sha * 40), "s", path, "content", "", Sha("0" * 40), "", "", (), "open", 1,
                            datetime.now(timezone.utc))
    groups = group_conflicts([info(1, "a", "x"), info(2, "b", "y"), info(3, "a", "z")])
    assert [[g.id for g in grp] for grp in groups] == [[1, 3], [2]]
    assert matches("deep/dir/setup.py", _codeowners_globs("setup.py"))
    assert matches("mini/ops.py", _codeowners_globs("/mini/"))
    assert not matches("other/mini/ops.py", _codeowners_globs("/mini/"))
    assert matches("lib/x/y.cpp", _codeowners_globs("lib/x"))


def test_requires_python_matches_what_runs() -> None:
    import re
    import tomllib

    root = Path(__file__).resolve().parent.parent
    meta = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    low = tuple(int(x) for x in re.match(r">=\s*(\d+)\.(\d+)", meta["requires-python"]).groups())  # type: ignore[union-attr]
    uses_tomllib = any("import tomllib" in p.read_text() for p in (root / "forkflow").rglob("*.py"))
    assert not uses_tomllib or low >= (3, 11), "tomllib is Python 3.11+: raise requires-python or add tomli"


def test_cli_completion_on_and_no_private_typer_import(cli) -> None:  # type: ignore[no-untyped-def]
    root = Path(__file__).resolve().parent.parent
    assert "typer._" not in (root / "forkflow" / "cli" / "main.py").read_text()
    r = cli("--help")
    assert r.rc == 0 and "--install-completion" in r.out


def test_demo_serve_removes_its_temp_folder_on_sigterm(tmp_path: Path) -> None:
    import os
    import signal
    import socket
    import subprocess
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), BROWSER="true")
    exe = Path(sys.executable).parent / "forkflow"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "forkflow"]
    proc = subprocess.Popen([*cmd, "demo", "--serve", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with socket.socket() as c:
                if c.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.2)
        assert any(p.name.startswith("forkflow-demo-") for p in tmp.iterdir())
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not any(p.name.startswith("forkflow-demo-") for p in tmp.iterdir())


def test_triage_rerun_missing_or_skipped_test_is_not_a_pass() -> None:
    from forkflow.tiers.reports import TestOutcome
    from forkflow.triage.triage import rerun_passes

    got = {"t::a": TestOutcome.PASS, "t::b": TestOutcome.FAIL, "t::s": TestOutcome.SKIP}
    assert rerun_passes(["t::a", "t::b", "t::gone", "t::s"], got) == {
        "t::a": True, "t::b": False, "t::gone": False, "t::s": False}


def test_unit_rerun_refuses_a_dirty_checkout_of_the_fork_branch(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    from forkflow.git.run import run_git

    sample = build_sample(tmp_path / "sample")
    assert cli("init", "--upstream", "upstream", repo=sample.fork).rc == 0
    with (sample.fork / "forkflow.toml").open("a") as f:
        f.write(demo_config(sys.executable))
    doc = cli("ingest", "--json", repo=sample.fork).json()  # validate: stored units, nothing landed
    unit = next(u["id"] for u in doc["units"] if u["id"])
    run_git("checkout", "-q", "main", cwd=sample.fork)
    (sample.fork / "README.md").write_text("a local edit\n")
    r = cli("ingest", "--unit", str(unit), repo=sample.fork)
    assert r.rc == 1 and "checked out in" in r.err and "README.md" in r.err
