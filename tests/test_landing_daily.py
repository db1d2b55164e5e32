"""Landing in daily use: each unit names the L1 run that gated it (`forkflow triage RUN`), and a
unit that failed L1 is held with its failure while the queue moves on to the next units."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from forkflow.context import open_context
from forkflow.git.run import run_git
from forkflow.landing import records
from forkflow.models import Sha, UnitState
from forkflow.testing.gitrepo import ForkBuilder
from forkflow.web import reads
from tests.test_merge_queue import behind_upstream

PYTEST = (f"{sys.executable} -m pytest -q -p no:cacheprovider -o junit_family=xunit1 "
          "--junitxml={report} tests")
L1_SUITE = (f"\n[[suite]]\nname = \"unit\"\ntier = \"L1\"\ncommand = '{PYTEST}'\nreport = \"junit\"\n"
            "env = { PYTEST_DISABLE_PLUGIN_AUTOLOAD = \"1\" }\n")


def _git(repo: Path, *args: str) -> str:
    return run_git(*args, cwd=repo).strip()


def _fork(cli, builder: ForkBuilder, commits: dict[int, dict[str, str]], toml: str) -> Path:  # type: ignore[no-untyped-def]
    """A fork behind upstream commits #n (files each), with `toml` added to its forkflow.toml."""
    return behind_upstream(cli, builder, {"lib.py": "def value():\n    return 2\n",
                                          "tests/test_lib.py": "from lib import value\n\n\ndef test_value():\n"
                                                               "    assert value() == 2\n"}, commits, toml)


def test_ingest_prints_each_units_l1_run_and_the_unit_links_it(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork = _fork(cli, builder, {10: {"m10.py": "A = 1\n"}, 11: {"m11.py": "B = 1\n"}},
                 "\n[ingest]\nmax_bundle = 1\n" + L1_SUITE)
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    assert [u["status"] for u in doc["units"]] == ["landed", "landed"]
    runs = {u["l1_run"] for u in doc["units"]}
    assert len(runs) == 1 and isinstance(next(iter(runs)), int)  # one gate run validated both together
    [run] = runs
    ctx = open_context(fork)
    with ctx.store.session_scope() as s:
        stored = [records.unit(s, ctx.fork_id, u["id"]) for u in doc["units"]]
        top = doc["units"][-1]["fork_sha"]
        [gate] = reads.runs_at(s, ctx.fork_id, [top])[Sha(top)]
    assert [u.l1_run if u else None for u in stored] == [run, run]  # the lower unit too, whose candidate ran no L1
    assert gate.id == run and gate.tier == "L1"  # the dashboard's unit L1: the gate run itself
    assert f"L1 run {run}" in doc["units"][0]["summary"]
    # the dashboard shows every unit of the batch with the batch's gate run, the lower one included
    from fastapi.testclient import TestClient

    from forkflow.web.app import create_app
    with TestClient(create_app(ctx)) as client:
        page = client.get("/api/ingestion").json()
        shown = {u["id"]: (u["l1"] or {}).get("run_id") for u in page["units"]}
        assert shown == {u["id"]: run for u in doc["units"]}
        lower = doc["units"][0]["id"]
        assert [r["id"] for r in client.get(f"/api/ingestion/units/{lower}").json()["runs"]][:1] == [run]

    builder.upstream_commit({"m12.py": "C = 1\n"}, "Change 12 (#12)")
    builder.fetch()
    r = cli("ingest", "--land", repo=fork)
    assert r.rc == 0, r.out
    with ctx.store.session_scope() as s:
        newest = records.units(s, ctx.fork_id)[-1]
    assert newest.status is UnitState.LANDED and newest.l1_run is not None and newest.l1_run != run
    assert f"L1 run {newest.l1_run}: " in r.out and f"forkflow triage {newest.l1_run}" in r.out
    assert cli("triage", str(newest.l1_run), repo=fork).rc == 0  # the id printed is one triage takes


def test_a_failed_l1_run_is_named_and_linked_on_the_held_unit(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork = _fork(cli, builder, {10: {"lib.py": "def value():\n    return 3\n"}},
                 "\n[ingest]\nmax_bundle = 1\n" + L1_SUITE)
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    [u] = doc["units"]
    assert u["status"] == "failed" and isinstance(u["l1_run"], int)
    ctx = open_context(fork)
    with ctx.store.session_scope() as s:
        rec = records.unit(s, ctx.fork_id, u["id"])
    assert rec is not None and rec.status is UnitState.FAILED and rec.l1_run == u["l1_run"]


GATE = ('tree=$(git rev-parse "HEAD^{{tree}}"); '
        'if ls bad*.flag >/dev/null 2>&1; then echo "$tree $FORKFLOW_BASE red" >> {log}; exit 1; fi; '
        'echo "$tree $FORKFLOW_BASE ok" >> {log}')


def _runs(log: Path) -> list[tuple[str, str, str]]:
    if not log.exists():
        return []
    return [(a, b, c) for a, b, c in (line.split() for line in log.read_text().splitlines())]


def _picked(cli, fork: Path) -> set[str]:  # type: ignore[no-untyped-def]
    doc = cli("status", "--json", "--commits", repo=fork).json()
    return {c["subject"].rsplit("(#", 1)[-1].rstrip(")") for c in doc["commits"] if c["disposition"] == "PICKED"}


def test_max_units_1_three_times_moves_past_a_failing_first_unit(cli, builder: ForkBuilder,  # type: ignore[no-untyped-def]
                                                                  tmp_path: Path) -> None:
    log = tmp_path / "runs"
    commits = {10 + i: {f"m{10 + i}.py": f"M = {i}\n"} for i in range(4)}
    commits[10]["bad10.flag"] = "breaks L1\n"
    fork = _fork(cli, builder, commits, f"\n[ingest]\nmax_bundle = 1\nl1_command = {json.dumps(GATE.format(log=log))}\n")
    start = _git(fork, "rev-parse", "main")
    docs = [cli("ingest", "--land", "--max-units", "1", "--json", repo=fork).json() for _ in range(3)]

    first = docs[0]["units"][0]
    assert first["status"] == "failed" and first["picked"] == []
    # the next run holds it with its failure (same tip, same commits), the one after tries fresh units first
    [held] = [u for u in docs[1]["units"] if u["status"] == "failed"]
    assert held["id"] == first["id"] and f"unit {first['id']}" in held["summary"] and held["picked"] == []
    assert [u["status"] for u in docs[1]["units"] if u is not held] == ["landed"]
    assert [u["status"] for u in docs[2]["units"]] == ["landed"]
    assert any(f"unit {first['id']}" in h["why"] for h in docs[2]["held_back"])
    assert {"11", "12"} <= _picked(cli, fork)  # the queue moved on: a unit landed in each later run
    runs = _runs(log)
    assert [v for _, _, v in runs] == ["red", "ok", "ok", "ok"]  # the failing unit ran once in three runs
    # ... and before it was held, L1 ran once on the fork tip alone (it passes: the unit is to blame)
    assert runs[1][:2] == (_git(fork, "rev-parse", f"{start}^{{tree}}"), start)

    # `ingest --unit ID` still re-runs a failed unit on demand
    ctx = open_context(fork)
    with ctx.store.session_scope() as s:
        failed = [u for u in records.units(s, ctx.fork_id, [UnitState.FAILED])]
    before = len(_runs(log))
    assert cli("ingest", "--unit", str(failed[-1].id), repo=fork).rc != 0
    assert len(_runs(log)) == before + 1


def test_a_held_failure_lets_what_depends_on_it_wait(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "runs"
    commits = {10: {"m10.py": "X = 1\n", "bad10.flag": "breaks L1\n"}, 11: {"m10.py": "X = 2\n"},
               12: {"m12.py": "Y = 1\n"}}
    fork = _fork(cli, builder, commits, f"\n[ingest]\nmax_bundle = 1\nl1_command = {json.dumps(GATE.format(log=log))}\n")
    cli("ingest", "--land", "--max-units", "1", repo=fork)
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    assert "11" not in _picked(cli, fork) and "12" in _picked(cli, fork)
    held = {h["sha"]: h for h in doc["held_back"]}
    assert any("failed L1 in unit" in h["why"] for h in held.values())
    assert len([1 for _, _, v in _runs(log) if v == "red"]) == 1


def test_a_merge_intake_names_the_l1_run_of_its_merge(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"lib.py": "def value():\n    return 2\n",
                             "tests/test_lib.py": "from lib import value\n\n\ndef test_value():\n"
                                                  "    assert value() == 2\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"mine.py": "M = 1\n"}, "[fork] ours")
    builder.upstream_commit({"m10.py": "A = 1\n"}, "Change 10 (#10)")
    builder.fetch()
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    cfg = fork / "forkflow.toml"
    cfg.write_text(cfg.read_text().replace('intake = "pick"', 'intake = "merge"') + L1_SUITE)
    r = cli("ingest", "--land", "--json", repo=fork)
    doc = r.json()
    assert doc["intake"] == "merge" and doc["landed"], r.out
    assert isinstance(doc["l1_run"], int) and doc["gate"].startswith(f"L1 run {doc['l1_run']}")
    builder.upstream_commit({"m11.py": "B = 1\n"}, "Change 11 (#11)")
    builder.fetch()
    text = cli("ingest", "--land", repo=fork).out
    assert re.search(r"L1 run (\d+): the merge; forkflow triage \1", text), text
