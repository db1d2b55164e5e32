"""`forkflow plan`, `forkflow ingest` and `forkflow conflicts` end to end on the demo's sample fork."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from forkflow.demo import build_sample, demo_config
from forkflow.errors import UserError
from forkflow.git.run import run_git
from forkflow.models import UnitState
from forkflow.testing.gitrepo import ForkBuilder

WAITS = (4, 5)  # the sample fork has conflicts and a failing unit: ingest says a person is needed


def _git(repo: Path, *args: str) -> str:
    return run_git(*args, cwd=repo).strip()


def _refs(repo: Path) -> str:
    return _git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


def _demo_fork(tmp_path: Path, cli) -> Path:  # type: ignore[no-untyped-def]
    """The demo's sample fork in `tmp_path`, set up with the demo's config (its L1 command)."""
    sample = build_sample(tmp_path / "sample")
    assert cli("init", "--upstream", "upstream", repo=sample.fork).rc == 0
    with (sample.fork / "forkflow.toml").open("a") as f:
        f.write(demo_config(sys.executable))
    return sample.fork


@pytest.fixture
def fork(tmp_path: Path, cli) -> Path:  # type: ignore[no-untyped-def]
    return _demo_fork(tmp_path, cli)


def _status(cli, fork: Path) -> dict:  # type: ignore[no-untyped-def,type-arg]
    r = cli("status", "--json", "--commits", repo=fork)
    assert r.rc == 0, r.err
    return r.json()  # type: ignore[no-any-return]


def _pr_full(fork: Path, pr: int) -> str:
    return _git(fork, "log", "--format=%H", "--fixed-strings", "--grep", f"(#{pr})", "upstream/main").split()[-1]


def _pr(fork: Path, pr: int) -> str:
    """The upstream commit of PR `pr` (its first ten digits name its plan units: `resolve-<sha10>`)."""
    return _git(fork, "log", "--format=%H", "--fixed-strings", "--grep", f"(#{pr})", "upstream/main").split()[-1][:10]


def _rows(doc: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {c["subject"].rsplit("(#", 1)[-1].rstrip(")"): c for c in doc["commits"]}


def _link(units: dict, chain: str, n: int) -> str:  # type: ignore[type-arg]
    """The name of the n-th link (1-based, in report order) of `chain` among `units` (name -> unit):
    links are named `chain#<sha10>` (planning/model.py `link_name`)."""
    names: list[str] = [name for name in units if name.startswith(f"{chain}#")]
    return names[n - 1]


def _unit_with(doc: dict, sha: str) -> dict:  # type: ignore[type-arg]
    """The unit of an `ingest --json` report that picked, skipped or left out `sha`."""
    return next(u for u in doc["units"] if sha in u["picked"] + u["skipped"] + u["deferred"])


def test_ingest_plan_json_routes_every_pending_commit_once(cli, fork: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("plan", "--json", repo=fork)
    assert r.rc == 0, r.err
    units = r.json()["units"]
    shas = [s for u in units for s in u["commits"]]
    pending = [c["sha"] for c in _status(cli, fork)["commits"] if c["disposition"] == "PENDING"]
    assert sorted(shas) == sorted(pending) and len(shas) == len(set(shas))
    by = {u["name"]: u for u in units}
    assert by["ops-api"]["kind"] == "chain"
    assert "declared in chain ops-api" in next(iter(by["ops-api"]["reasons"].values()))
    assert by["pin:third_party/llvm-hash.txt"]["kind"] == "chain"
    # each meets the fork's lines: a unit alone (one that conflicts keeps the name as a chain, below)
    risky = [u for u in units if u["name"].startswith("fork-") and u["kind"] == "bundle"]
    assert risky and all(len(u["commits"]) == 1 for u in risky)
    assert all(u["reasons"][u["commits"][0]].startswith("meets the fork's own lines: ") for u in risky)
    # the kernels.py conflict holds back only the commit that rewrites its lines, naming them
    kernels = next(u for u in units if u["name"].startswith(("resolve-", "fork-")) and len(u["commits"]) == 2)
    first, second = kernels["commits"]
    assert kernels["reasons"][second].startswith(f"waits for {first[:12]} (lines mini/kernels.py:")
    held = {h["sha"]: h for h in r.json()["held_back"]}
    assert held[second]["waits_for"] == first and held[second]["evidence"]["kind"] == "lines"
    assert held[first]["why"] == "conflict in mini/kernels.py"
    assert any(u["kind"] == "bundle" for u in units)
    assert all(u["reasons"][s] for u in units for s in u["commits"])


def test_ingest_dry_run_writes_nothing(cli, fork: Path) -> None:  # type: ignore[no-untyped-def]
    before_refs, before = _refs(fork), _status(cli, fork)["counts"]
    r = cli("ingest", "--dry-run", "--json", repo=fork)
    assert r.rc == 0, r.err
    doc = r.json()
    assert {u["status"] for u in doc["units"]} <= {"would-pick", "conflict", "empty", "waiting"}
    assert _refs(fork) == before_refs
    assert _status(cli, fork)["counts"] == before


def test_ingest_validate_keeps_candidates_and_lands_nothing(cli, fork: Path) -> None:  # type: ignore[no-untyped-def]
    main = _git(fork, "rev-parse", "main")
    r = cli("ingest", "--json", repo=fork)
    assert r.rc in WAITS, r.err
    statuses = {u["name"]: u["status"] for u in r.json()["units"]}
    assert statuses[_link(statuses, "ops-api", 1)] == "failed" and "validated" in statuses.values()
    assert _git(fork, "rev-parse", "main") == main
    cands = _git(fork, "for-each-ref", "--format=%(refname)", "refs/forkflow/candidates/")
    assert any(c.startswith("refs/forkflow/candidates/pin-third_party-llvm-hash.txt-") for c in cands.splitlines())
    assert _status(cli, fork)["counts"]["deferred"] == 0


def test_ingest_land_end_to_end(cli, fork: Path) -> None:  # type: ignore[no-untyped-def]
    start = _git(fork, "rev-parse", "main")
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc in WAITS, r.err
    doc = r.json()
    st = {u["name"]: u for u in doc["units"]}
    assert st[_link(st, "ops-api", 1)]["status"] == "failed"  # breaks the fork's tests: stays out ...
    assert st[_link(st, "pin:third_party/llvm-hash.txt", 1)]["status"] == "landed"  # ... without blocking later units
    # the landing is the probe: a conflict leaves its unit as the pick meets it
    kernels, ops_h, ops_cpp = (_unit_with(doc, _pr_full(fork, n)) for n in (103, 105, 107))
    assert kernels["status"] == "conflict" and kernels["deferred"] == [_pr_full(fork, 103)]
    waiting = _unit_with(doc, _pr_full(fork, 104))  # rewrites #103's lines: waits for it, saying so
    assert waiting["deferred"] == [_pr_full(fork, 104)] and waiting["status"] == "landed"
    assert waiting["held_back"] == {
        _pr_full(fork, 104): f"waits for {_pr(fork, 103)}{_pr_full(fork, 103)[10:12]} (lines mini/kernels.py:14-15)"}
    assert ops_h["status"] == "landed" and list(ops_h["resolved_by"].values()) == ["trivial"]
    assert ops_cpp["status"] == "empty"
    log = _git(fork, "log", "--format=%H%x1f%B%x1e", f"{start}..main")
    commits = [c.strip("\n").split("\x1f") for c in log.split("\x1e") if c.strip()]
    bundles = sorted(body.splitlines()[0] for _, body in commits if body.startswith("Cherry-pick"))
    assert bundles == ["Cherry-pick 2 upstream (#101 #102)", "Cherry-pick 3 upstream (#110 #111 #112)"]
    trailers = [line for _, body in commits for line in body.splitlines() if line.startswith("Upstream-Commit: ")]
    assert len(trailers) == len(set(trailers)) == 7
    rows = _rows(_status(cli, fork))
    assert rows["103"]["disposition"] == "DEFERRED" and "conflict in mini/kernels.py" in rows["103"]["evidence"][0]
    assert rows["104"]["disposition"] == "DEFERRED"
    assert rows["107"]["disposition"] == "SKIPPED" and "already applied" in rows["107"]["evidence"][0]
    assert rows["109"]["disposition"] == "DEFERRED" and "L1 failed" in rows["109"]["evidence"][0]
    assert rows["101"]["disposition"] == "PICKED" and rows["101"]["evidence"][0].startswith("trailer")
    doc2 = _status(cli, fork)
    # forkflow's ref counts its holds; days behind does not: #103, #104, #109 wait for a person
    assert doc2["recorded_point"]["sha"] == doc2["upstream_tip"]["sha"]
    assert _git(fork, "rev-parse", "refs/forkflow/ingestion-point/main") == doc2["upstream_tip"]["sha"]
    assert doc2["days_behind"] > 0 and doc2["headline"]["held_commits"] >= 3
    assert doc2["headline"]["open_conflicts"]["commits"] >= 1
    tip = _git(fork, "rev-parse", "main")
    again = cli("ingest", "--land", "--json", repo=fork).json()  # a rerun lands nothing twice
    assert not [u for u in again["units"] if u["status"] == "landed"]
    assert _git(fork, "rev-parse", "main") == tip
    conflicts = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    assert [(c["path"], c["seen"]) for c in conflicts] == [("mini/kernels.py", 2)]


def test_ingest_stores_every_routing_reason_with_its_unit(cli, fork: Path) -> None:  # type: ignore[no-untyped-def]
    planned = cli("plan", "--json", repo=fork).json()["units"]
    reasons = {sha: why for u in planned for sha, why in u["reasons"].items()}
    assert cli("ingest", "--land", repo=fork).rc in WAITS
    from forkflow.context import open_context
    from forkflow.landing import records

    ctx = open_context(fork)
    with ctx.store.session_scope() as s:
        units = records.units(s, ctx.fork_id)
        by_id = records.routing_reasons(s, [u.id for u in units])
    statuses = {u.name: u.status for u in units if u.status != "abandoned"}
    # every outcome is a stored unit: landed, failed, conflict and empty
    assert statuses[_link(statuses, "ops-api", 1)] == "failed" and statuses[f"fork-{_pr(fork, 103)}"] == "conflict"
    assert statuses[f"fork-{_pr(fork, 107)}"] == "empty"
    assert "landed" in statuses.values()
    # the landing queue records a unit staged on a stack it then dropped (a red batch split) as abandoned
    waits = [u for u in units if (_pr_full(fork, 104), "waiting") in u.members][-1]
    assert waits.status is UnitState.LANDED  # #104 waits for #103 inside the unit that landed the rest
    stored = {sha: why for u in units for sha, why in by_id[u.id].items()}
    assert set(stored) == set(reasons)  # each upstream commit once, with a reason
    probed = {sha for sha, why in reasons.items() if why.startswith(("conflicts when picked", "waits for"))}
    assert probed == {_pr_full(fork, n) for n in (103, 104, 105)}
    # the plan's reason where its probe changed nothing (the landing meets the conflicts itself)
    assert {sha: why for sha, why in stored.items() if sha not in probed} == {
        sha: why for sha, why in reasons.items() if sha not in probed}
    for u in units:
        assert u.reasons == by_id[u.id] and set(u.reasons) == {sha for sha, _ in u.members}
    pin = next(u for u in units if u.name.startswith("pin:"))
    assert list(pin.reasons.values()) == ["updates pin file third_party/llvm-hash.txt"]


def test_ingest_person_resolution_lands_next_time(cli, fork: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("ingest", "--land", repo=fork).rc in WAITS
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    shown = cli("conflicts", "show", str(c["id"]), "--json", repo=fork).json()
    marked = shown["conflicted"]
    head, rest = marked.split("<<<<<<< fork\n")
    tail = rest.split(">>>>>>> upstream\n")[1]
    resolved = tmp_path / "kernels.py"
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n" + head + "        return {}\n" + tail)
    r = cli("conflicts", "resolve", str(c["id"]), "--file", str(bad), repo=fork)
    assert r.rc == 1 and "outside the conflicted regions" in r.err
    bad.write_text(marked)
    assert "conflict markers" in cli("conflicts", "resolve", str(c["id"]), "--file", str(bad), repo=fork).err
    resolved.write_text(head + '        spec = self.num_warps >= 8  # fork: warp specialization\n'
                        '        return {"kernel": self.name, "blocks": blocks, "warps": self.num_warps,\n'
                        '                "stages": 2, "warp_specialized": spec}\n' + tail)
    assert cli("conflicts", "resolve", str(c["id"]), "--file", str(resolved), repo=fork).rc == 0
    assert cli("conflicts", "--json", repo=fork).json()["conflicts"] == []
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    link = _unit_with(doc, _pr_full(fork, 103))
    assert link["status"] == "landed" and list(link["resolved_by"].values()) == ["recorded"]
    rows = _rows(_status(cli, fork))
    assert rows["103"]["disposition"] == "PICKED"
    assert rows["104"]["disposition"] in ("PICKED", "DEFERRED")  # #104 retried after #103 landed
    assert '"stages": 2, "warp_specialized": spec' in _git(fork, "show", "main:mini/kernels.py") or \
        '"stages": 3, "warp_specialized": spec' in _git(fork, "show", "main:mini/kernels.py")


AGENT = r'''
import json, sys
req = json.load(sys.stdin)
marked = req["conflicted"]
head, rest = marked.split("<<<<<<< fork\n")
tail = rest.split(">>>>>>> upstream\n")[1]
sys.stdout.write(head + '        spec = self.num_warps >= 8  # fork: warp specialization\n'
                 '        return {"kernel": self.name, "blocks": blocks, "warps": self.num_warps,\n'
                 '                "stages": 2, "warp_specialized": spec}\n' + tail)
'''


def test_ingest_agent_resolves_and_every_attempt_is_logged(cli, fork: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    with (fork / "forkflow.toml").open("a") as f:
        f.write(f"\n[ingest.agent]\ncommand = {json.dumps([sys.executable, str(script)])}\ntimeout = 30\n"
                "autoland = true\n")  # no person in the loop (tests/test_security.py: the default)
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    link = _unit_with(doc, _pr_full(fork, 103))
    assert link["status"] == "landed" and list(link["resolved_by"].values()) == ["agent"]
    from forkflow.conflicts import records
    from forkflow.context import open_context

    ctx = open_context(fork)
    from sqlalchemy import select

    from forkflow.store.schema_ingest import ResolutionRow

    with ctx.store.session_scope() as s:
        attempts = records.attempts(s, ctx.fork_id)
        sources = sorted(s.scalars(select(ResolutionRow.source)).all())
    # #103 accepted; #104 then conflicts with it, and the same canned answer is rejected there
    assert [a.outcome for a in attempts] == ["accepted", "rejected"] and attempts[0].backend == "command"
    assert attempts[1].reason == "mini/kernels.py no longer parses"
    assert sources == ["agent", "trivial"]  # both kept for reuse once L1 passed


def test_ingest_branch_moving_during_l1_retries_on_the_new_tip(cli, fork: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    flag = tmp_path / "moved"
    racer = tmp_path / "race.sh"
    racer.write_text(f'''#!/bin/sh
if [ ! -e {flag} ]; then
  touch {flag}
  tip=$(git rev-parse refs/heads/main)
  new=$(git commit-tree -p "$tip" -m "someone else landed first" "$tip^{{tree}}")
  git update-ref refs/heads/main "$new" "$tip"
fi
exec {sys.executable} -m unittest discover -s tests -q
''')
    text = (fork / "forkflow.toml").read_text()
    line = next(x for x in text.splitlines() if x.startswith("l1_command"))
    (fork / "forkflow.toml").write_text(text.replace(line, f'l1_command = "sh {racer}"'))
    doc = cli("ingest", "--land", "--json", "--max-units", "1", repo=fork).json()
    (u,) = doc["units"]
    assert u["status"] == "landed"
    assert _git(fork, "log", "-1", "--format=%s", "main~1") == "someone else landed first"
    assert _git(fork, "rev-parse", "main") == u["fork_sha"]
    from forkflow.context import open_context
    from forkflow.landing import records

    ctx = open_context(fork)
    with ctx.store.session_scope() as s:
        statuses = [x.status for x in records.units(s, ctx.fork_id)]
    assert statuses == ["abandoned", "landed"]


def test_ingest_never_touches_a_dirty_work_tree(cli, fork: Path) -> None:  # type: ignore[no-untyped-def]
    _git(fork, "checkout", "-q", "main")
    (fork / "mini/kernels.py").write_text("my local edit\n")
    (fork / "scratch.txt").write_text("untracked\n")
    before = {p: (fork / p).read_bytes() for p in ("mini/kernels.py", "scratch.txt", "README.md")}
    refs = _refs(fork)
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc == 1 and "checked out in" in r.err and "mini/kernels.py" in r.err
    assert len(r.err.strip().splitlines()) == 1
    assert {p: (fork / p).read_bytes() for p in before} == before and _refs(fork) == refs
    assert not _git(fork, "stash", "list")


def test_ingest_lands_on_a_clean_checkout_and_updates_it(cli, fork: Path) -> None:  # type: ignore[no-untyped-def]
    _git(fork, "checkout", "-q", "main")
    (fork / "scratch.txt").write_text("untracked\n")
    old = _git(fork, "rev-parse", "main")
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc in WAITS, r.err
    assert _git(fork, "rev-parse", "main") != old
    # index and files follow the landing (as git's updateInstead): nothing staged undoes it
    assert _git(fork, "status", "--porcelain") == "?? forkflow.toml\n?? scratch.txt"
    assert any("updated the checkout" in n for n in r.json()["notes"])


def test_ingest_needs_an_l1_gate(cli, fork: Path) -> None:  # type: ignore[no-untyped-def]
    text = (fork / "forkflow.toml").read_text()
    line = next(x for x in text.splitlines() if x.startswith("l1_command"))
    (fork / "forkflow.toml").write_text(text.replace(line, ""))
    before = _refs(fork)
    r = cli("ingest", "--land", repo=fork)
    assert r.rc == 1 and "no L1 gate" in r.err and "l1_command" in r.err
    assert _refs(fork) == before
    assert cli("ingest", "--dry-run", repo=fork).rc == 0  # a dry run needs no gate


@pytest.mark.parametrize("snippet, key", [
    ("[ingest]\nmax_bundle = 0\n", "ingest.max_bundle"),
    ("[ingest]\nmax_bundle = \"big\"\n", "ingest.max_bundle"),
    ("[ingest]\nresolvers = [\"magic\"]\n", "ingest.resolvers"),
    ("[[ingest.chain]]\nname = \"x\"\n", "ingest.chain.name"),
    ("[ingest]\nl1_timeout = -1\n", "ingest.l1_timeout"),
    ("[ingest.agent]\nurl = \"ftp://x\"\n", "ingest.agent.url"),
    ("[ingest.agent]\nurl = \"http://127.0.0.1:1/v1\"\n", "ingest.agent.url"),
    ("[ingest]\nsplit_failed_bundles = \"yes\"\n", "ingest.split_failed_bundles"),
    ("[ingest]\nsplit_max_gate_runs = 0\n", "ingest.split_max_gate_runs"),
    ("[ingest]\nsplit_max_gate_runs = true\n", "ingest.split_max_gate_runs"),
])
def test_ingest_bad_config_names_the_key(cli, builder: ForkBuilder, snippet: str, key: str) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"a.py": "A = 1\n"}, "Initial")
    builder.branch_fork()
    builder.upstream_commit({"b.py": "B = 1\n"}, "More (#1)")
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write("\n" + snippet)
    r = cli("plan", repo=fork)
    assert r.rc == 1 and f"key '{key}'" in r.err and "forkflow.toml:" in r.err


@pytest.mark.parametrize("args, text", [
    (("--dry-run", "--land"), "--dry-run writes nothing"),
    (("--push",), "add --land"),
    (("--until", "deadbeef"), "is not an upstream commit"),
])
def test_ingest_bad_flags(cli, fork: Path, args: tuple[str, ...], text: str) -> None:  # type: ignore[no-untyped-def]
    before = _refs(fork)
    r = cli("ingest", *args, repo=fork)
    assert r.rc in (1, 2) and text in r.err
    assert _refs(fork) == before


def test_ingest_until_and_max_units(cli, fork: Path) -> None:  # type: ignore[no-untyped-def]
    rows = _status(cli, fork)["commits"]
    second = [c["sha"] for c in rows if c["disposition"] == "PENDING"][1]
    units = cli("plan", "--json", "--until", second, repo=fork).json()["units"]
    assert sum(len(u["commits"]) for u in units) == 2
    doc = cli("ingest", "--land", "--json", "--max-units", "1", repo=fork).json()
    assert len(doc["units"]) == 1


def test_ingest_push_to_the_fork_remote(cli, fork: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    origin = tmp_path / "origin.git"
    run_git("clone", "-q", "--bare", str(fork), str(origin), cwd=tmp_path)
    _git(fork, "remote", "add", "origin", str(origin))
    r = cli("ingest", "--land", "--push", repo=fork)
    assert r.rc in WAITS, r.err
    assert _git(origin, "rev-parse", "main") == _git(fork, "rev-parse", "main")
    _git(fork, "remote", "remove", "origin")
    r = cli("ingest", "--land", "--push", repo=fork)
    assert r.rc == 1 and "no remote 'origin'" in r.err


def test_ingest_push_that_git_refuses_is_an_error_not_a_success(cli, fork: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    origin = tmp_path / "origin.git"
    run_git("clone", "-q", "--bare", str(fork), str(origin), cwd=tmp_path)
    _git(fork, "remote", "add", "origin", str(origin))
    other = tmp_path / "other"  # someone else pushes to origin's main first
    run_git("clone", "-q", str(origin), str(other), cwd=tmp_path)
    (other / "theirs.txt").write_text("x\n")
    _git(other, "add", "theirs.txt")
    _git(other, "-c", "user.name=o", "-c", "user.email=o@x", "commit", "-qm", "theirs")
    _git(other, "push", "-q", "origin", "HEAD:main")
    theirs = _git(origin, "rev-parse", "main")
    r = cli("ingest", "--land", "--push", repo=fork)  # fetched first: lands on theirs, never rejected (docs/team.md)
    assert r.rc in WAITS and "fast-forwarded main to origin/main" in r.out, r.out + r.err
    assert theirs in _git(origin, "rev-list", "main") and _git(origin, "rev-parse", "main") == _git(fork, "rev-parse", "main")
    _git(fork, "remote", "set-url", "origin", str(tmp_path / "gone.git"))  # a remote that fails outright
    r = cli("ingest", "--push", "--land", repo=fork)
    assert r.rc == 1 and "cannot fetch the shared branch from 'origin'" in r.err and "pushed" not in r.out, r.out + r.err
    assert f"('{tmp_path / 'gone.git'}' does not appear to be a git repository);" in r.err, r.err
    assert "the repository exists" not in r.err  # git's advice after the reason is not the reason


@pytest.mark.parametrize("tier", ['tier = "L1"\n', "", 'tier = "L2"\n'])
def test_ingest_selects_the_tier_gate_when_l1_suites_exist(fork: Path, tier: str) -> None:
    from forkflow.context import open_context
    from forkflow.landing.gate import CommandGate
    from forkflow.landing.wired import select_gate
    from forkflow.landing.settings import ingest_settings
    from forkflow.tiers.tiers import Tier, load_suites

    with (fork / "forkflow.toml").open("a") as f:
        f.write(f'\n[[suite]]\nname = "unit"\n{tier}command = "true"\n')
    ctx = open_context(fork)
    settings = ingest_settings(ctx.config)
    is_l1 = load_suites(ctx.config)[0].tier is Tier.L1  # a suite without a tier is L1, for `validate` too
    assert settings.has_l1_suites is is_l1 is (tier != 'tier = "L2"\n')
    gate = select_gate(ctx, settings)
    assert type(gate).__name__ == "TierGate" if is_l1 else isinstance(gate, CommandGate)


# -- re-running one stored unit: `forkflow ingest --unit ID` -----------------------------------------

def _blocked_fork(cli, builder: ForkBuilder, block: Path) -> Path:  # type: ignore[no-untyped-def]
    """A bundle of one commit and a declared chain of two; L1 fails on their picks while `block`
    exists (the fork tip alone passes: a gate red on every tree stops the run, holding nothing)."""
    builder.upstream_commit({"a.py": "A = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"mine.py": "M = 1\n"}, "[fork] ours")
    builder.upstream_commit({"x.py": "X = 1\n"}, "Add x (#10)")
    builder.upstream_commit({"ops/o.py": "O = 1\n"}, "Ops (#11)")
    builder.upstream_commit({"ops/o.py": "O = 2\n"}, "Ops again (#12)")
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write(f'\n[ingest]\nl1_command = "test ! -e {block} || test ! -e x.py -a ! -e ops"\n'
                '\n[[ingest.chain]]\nname = "ops"\npaths = ["ops/**"]\n')
    block.write_text("L1 is red\n")
    return fork


def _units(fork: Path) -> dict[str, list]:  # type: ignore[type-arg]
    from forkflow.context import open_context
    from forkflow.landing import records

    ctx = open_context(fork)
    with ctx.store.session_scope() as s:
        out: dict[str, list] = {}  # type: ignore[type-arg]
        for u in records.units(s, ctx.fork_id):
            out.setdefault(u.name, []).append(u)
    return out


def test_ingest_unit_rerun_fails_again_then_lands_once_l1_passes(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    block = tmp_path / "block"
    fork = _blocked_fork(cli, builder, block)
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    st = {u["name"]: u for u in doc["units"]}
    bundle = next(u for u in doc["units"] if u["kind"] == "bundle")
    assert bundle["status"] == "failed" and st[_link(st, "ops", 1)]["status"] == "failed" and st[_link(st, "ops", 2)]["status"] == "waiting"
    assert all(isinstance(u["id"], int) for u in doc["units"])
    main = _git(fork, "rev-parse", "main")

    again = cli("ingest", "--unit", str(bundle["id"]), "--json", repo=fork)  # the cause is still there
    assert again.rc in WAITS, again.err
    (u,) = again.json()["units"]
    assert u["status"] == "failed" and u["id"] != bundle["id"] and u["failed"] == bundle["failed"]
    assert "forkflow-l1-" not in _git(fork, "worktree", "list")  # the re-run's L1 work tree is removed
    assert _git(fork, "rev-parse", "main") == main
    assert _rows(_status(cli, fork))["10"]["disposition"] == "DEFERRED"
    # first staged in the queue's batch with the chain (abandoned when that batch split), then failed alone
    retried = _units(fork)[bundle["name"]]
    assert [(x.status, x.retry_of) for x in retried] == [("abandoned", None), ("failed", None), ("failed", bundle["id"])]

    block.unlink()
    landed = cli("ingest", "--unit", str(bundle["id"]), "--json", repo=fork)
    assert landed.rc == 0, landed.err
    (u,) = landed.json()["units"]
    assert u["status"] == "landed" and _git(fork, "rev-parse", "main") == u["fork_sha"]
    assert _git(fork, "rev-parse", "main~1") == main
    assert _rows(_status(cli, fork))["10"]["disposition"] == "PICKED"
    r = cli("ingest", "--unit", str(bundle["id"]), repo=fork)
    assert r.rc == 1 and "nothing left to pick" in r.err
    r = cli("ingest", "--unit", str(u["id"]), repo=fork)
    assert r.rc == 1 and "already landed" in r.err


def test_ingest_unit_rerun_keeps_chain_order(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    block = tmp_path / "block"
    fork = _blocked_fork(cli, builder, block)
    st = {u["name"]: u for u in cli("ingest", "--land", "--json", repo=fork).json()["units"]}
    block.unlink()
    before, stored = _refs(fork), len(_units(fork)[_link(st, "ops", 2)])
    r = cli("ingest", "--unit", str(st[_link(st, "ops", 2)]["id"]), repo=fork)
    assert r.rc == 1 and "waits for" in r.err and "re-run the unit holding that commit first" in r.err
    assert _refs(fork) == before and len(_units(fork)[_link(st, "ops", 2)]) == stored
    first = cli("ingest", "--unit", str(st[_link(st, "ops", 1)]["id"]), "--json", repo=fork).json()["units"]
    assert [u["status"] for u in first] == ["landed"]
    second = cli("ingest", "--unit", str(st[_link(st, "ops", 2)]["id"]), "--json", repo=fork).json()
    assert [u["status"] for u in second["units"]] == ["landed"]
    assert _git(fork, "show", "main:ops/o.py") == "O = 2"
    rows = _rows(_status(cli, fork))
    assert rows["11"]["disposition"] == rows["12"]["disposition"] == "PICKED"
    assert rows["10"]["disposition"] == "DEFERRED"  # the bundle was not re-run


@pytest.mark.parametrize("args, text", [
    (("--unit", "1", "--dry-run"), "--dry-run writes nothing"),
    (("--unit", "1", "--until", "main"), "--unit re-runs one stored unit"),
    (("--unit", "999"), "no landing unit 999"),
    (("--unit", "0"), "Invalid value for '--unit'"),
])
def test_ingest_unit_rerun_bad_input(cli, fork: Path, args: tuple[str, ...], text: str) -> None:  # type: ignore[no-untyped-def]
    before = _refs(fork)
    r = cli("ingest", *args, repo=fork)
    assert r.rc in (1, 2) and text in r.err
    assert _refs(fork) == before


# -- a bundle that fails L1 bisects itself within the run ------------------------------------------

def _six_bundle(cli, builder: ForkBuilder, runs: Path, extra: str = "") -> Path:  # type: ignore[no-untyped-def]
    """Six low-risk upstream commits (one bundle); the fourth breaks L1. Every L1 run leaves a line in `runs`:
    the revision it validated."""
    builder.upstream_commit({"a.py": "A = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"mine.py": "M = 1\n"}, "[fork] ours")
    for i in range(1, 7):
        files = {f"m{i}.py": f"M{i} = {i}\n"}
        if i == 4:
            files["broken.flag"] = "this commit breaks L1\n"
        builder.upstream_commit(files, f"Add m{i} (#{20 + i})")
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write(f'\n[ingest]\nl1_command = "echo $FORKFLOW_REV >> {runs}; test ! -e broken.flag"\n{extra}')
    return fork


def _gate_runs(runs: Path) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def _gated(runs: Path) -> list[str]:
    return runs.read_text().split() if runs.exists() else []


def test_ingest_failed_bundle_bisects_and_lands_the_other_five(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs"
    fork = _six_bundle(cli, builder, runs)
    (bundle,) = cli("plan", "--json", repo=fork).json()["units"]
    assert bundle["kind"] == "bundle" and len(bundle["commits"]) == 6
    start = _git(fork, "rev-parse", "main")
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    name = bundle["name"]
    assert [(u["name"], u["status"]) for u in doc["units"]] == [
        (name, "failed"), (f"{name}[1-3]", "landed"), (f"{name}[4-6]", "failed"), (f"{name}[4]", "failed"),
        (f"{name}[5-6]", "landed")]
    # [4-6] on top of the landed [1-3] is the very tree that failed: failed again without a run;
    # the one run more is L1 on the fork tip alone, once, before the first unit is held as failing
    assert _gate_runs(runs) == 5 and "not run again" in doc["units"][2]["summary"]
    assert _gated(runs)[1] == start and _gated(runs).count(start) == 1
    culprit = bundle["commits"][3]
    assert doc["units"][3]["failed"] == [culprit]
    log = _git(fork, "log", "--format=%B", f"{start}..main")
    picked = sorted(line.split(": ")[1] for line in log.splitlines() if line.startswith("Upstream-Commit: "))
    assert picked == sorted(bundle["commits"][:3] + bundle["commits"][4:])  # in upstream order, once each
    assert _git(fork, "log", "--format=%s", f"{start}..main").splitlines() == [
        "Cherry-pick 2 upstream (#25 #26)", "Cherry-pick 3 upstream (#21 #22 #23)"]
    assert "broken.flag" not in _git(fork, "ls-tree", "--name-only", "main")
    rows = _rows(_status(cli, fork))
    assert [rows[str(20 + i)]["disposition"] for i in range(1, 7)] == ["PICKED"] * 3 + ["DEFERRED"] + ["PICKED"] * 2
    assert f"L1 failed in {name}[4]: l1_command failed" in rows["24"]["evidence"][0]
    assert _git(fork, "rev-parse", "refs/forkflow/ingestion-point/main") == _git(fork, "rev-parse", "upstream/main")
    stored = _units(fork)
    assert stored[f"{name}[4]"][0].status is UnitState.FAILED
    assert stored[f"{name}[5-6]"][0].reasons[bundle["commits"][4]].endswith(f"split out of {name}, which failed L1")
    again = cli("ingest", "--land", "--json", repo=fork).json()  # the culprit is a chain now: one more L1 run
    assert [(u["name"], u["status"]) for u in again["units"]] == [(f"{name}#{culprit[:10]}", "failed")]
    tip = _git(fork, "rev-parse", "main")  # ... and, on this run's fork tip, the check of that tip alone
    assert _gate_runs(runs) == 7 and _gated(runs)[-1] == tip


def test_ingest_bundle_bisection_is_bounded_and_can_be_turned_off(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs"
    fork = _six_bundle(cli, builder, runs, "split_max_gate_runs = 1\n")
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    assert [u["status"] for u in doc["units"]] == ["failed", "landed", "failed"]
    # [4-6] failed without a run: the tree that failed whole; the one run more is L1 on the fork
    # tip alone (before the bundle was held), which the bisection's budget does not count
    assert _gate_runs(runs) == 3
    assert any("bisection stopped after 1 L1 runs" in n and "3 commit(s) stay DEFERRED" in n for n in doc["notes"])
    rows = _rows(_status(cli, fork))
    assert [rows[str(20 + i)]["disposition"] for i in range(1, 7)] == ["PICKED"] * 3 + ["DEFERRED"] * 3


def test_ingest_bundle_bisection_off_defers_the_whole_bundle(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs"
    fork = _six_bundle(cli, ForkBuilder(tmp_path / "b"), runs, "split_failed_bundles = false\n")
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    # one run for the bundle, one on the fork tip alone before it is held (the tip passes)
    assert [u["status"] for u in doc["units"]] == ["failed"] and _gate_runs(runs) == 2
    assert {c["disposition"] for c in _status(cli, fork)["commits"]} == {"DEFERRED"}


def test_ingest_folds_its_packs_like_git_does_after_a_fetch(cli, fork: Path) -> None:  # type: ignore[no-untyped-def]
    packs = fork / ".git" / "objects" / "pack"
    _git(fork, "config", "gc.autoPackLimit", "3")  # git's own threshold, low enough for this fork
    before = len(list(packs.glob("*.pack")))
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc in WAITS, r.err
    landed = [u for u in r.json()["units"] if u["status"] == "landed"]
    assert len(landed) >= 3  # a pack each, and then some: past the limit, so git folded them
    assert len(list(packs.glob("*.pack"))) <= 2 < before + len(landed)
    assert _git(fork, "fsck", "--no-dangling") == ""


# -- one writing run per repository ---------------------------------------------------------------

def _small_fork(cli, builder: ForkBuilder, l1: str) -> Path:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"a.py": "A = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"mine.py": "M = 1\n"}, "[fork] ours")
    for i in range(3):
        builder.upstream_commit({f"x{i}.py": f"X = {i}\n"}, f"Add x{i} (#{10 + i})")
    fork = builder.f.path
    builder.f.git("checkout", "-q", "--detach")
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write(f"\n[ingest]\nl1_command = {json.dumps(l1)}\n")
    return fork


def test_ingest_second_run_on_the_same_repository_refuses_at_once(cli, builder: ForkBuilder,  # type: ignore[no-untyped-def]
                                                                  tmp_path: Path) -> None:
    import subprocess
    import time

    started = tmp_path / "started"
    fork = _small_fork(cli, builder, f"touch {started} && sleep 2 && true")
    start = _git(fork, "rev-parse", "main")
    exe = Path(sys.executable).parent / "forkflow"
    first = subprocess.Popen([str(exe), "ingest", "--land", "--repo", str(fork)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    try:
        while not started.exists() and first.poll() is None:
            time.sleep(0.02)
        t0 = time.monotonic()
        second = cli("ingest", "--land", repo=fork)
        assert time.monotonic() - t0 < 1.5  # at once, not after the first run's L1
        assert second.rc == 1 and len(second.err.strip().splitlines()) == 1, second.err
        assert f"another `forkflow ingest` is running on this repository (pid {first.pid})" in second.err
        assert cli("ingest", "--dry-run", repo=fork).rc == 0  # reads only: no lock needed
    finally:
        _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err.decode()
    trailers = [line for line in _git(fork, "log", "--format=%B", f"{start}..main").splitlines()
                if line.startswith("Upstream-Commit: ")]
    assert len(trailers) == len(set(trailers)) == 3
    assert cli("ingest", "--land", repo=fork).rc == 0  # the lock went with the first run


def test_ingest_lock_covers_every_writing_mode(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    import os
    import signal
    import subprocess

    from forkflow.git.repo import Repo
    from forkflow.landing.lock import LOCK_NAME, ingest_lock

    fork = _small_fork(cli, builder, "true")
    assert cli("ingest", repo=fork).rc == 0  # validate: a stored unit to re-run
    before = _refs(fork)
    with ingest_lock(Repo(fork)):
        for args in (("ingest",), ("ingest", "--land"), ("ingest", "--unit", "1")):
            r = cli(*args, repo=fork)
            assert r.rc == 1 and f"running on this repository (pid {os.getpid()})" in r.err, (args, r.err)
        assert _refs(fork) == before
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom pathlib import Path\n"
                               "from forkflow.git.repo import Repo\nfrom forkflow.landing.lock import ingest_lock\n"
                               "with ingest_lock(Repo(Path(sys.argv[1]))):\n print('held', flush=True)\n"
                               " time.sleep(60)\n", str(fork)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    assert cli("ingest", "--land", repo=fork).rc == 1
    holder.send_signal(signal.SIGKILL)  # the OS drops a killed holder's lock
    holder.wait(timeout=10)
    assert (fork / ".git" / LOCK_NAME).exists()
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc == 0, r.err
    assert [u["status"] for u in r.json()["units"]] == ["landed"]


def test_ingest_unit_rerun_of_a_unit_a_killed_run_left_picking(cli, builder: ForkBuilder,  # type: ignore[no-untyped-def]
                                                               tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import time

    from forkflow.context import open_context
    from forkflow.git.repo import Repo
    from forkflow.landing.lock import ingest_lock
    from forkflow.landing.wired import check_retry

    started, gate = tmp_path / "started", tmp_path / "gate.sh"
    gate.write_text(f"touch {started}\nsleep 60\n")  # L1 hangs until the run is killed
    fork = _small_fork(cli, builder, f"sh {gate}")
    exe = Path(sys.executable).parent / "forkflow"
    run = subprocess.Popen([str(exe), "ingest", "--land", "--repo", str(fork)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        while not started.exists() and run.poll() is None:
            time.sleep(0.02)
        assert run.poll() is None
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # the run and its L1, as a crash or an OOM kill would
        run.wait(timeout=10)
    ((unit,),) = _units(fork).values()
    assert unit.status is UnitState.PICKING
    with ingest_lock(Repo(fork)):  # while a run holds the lock, `picking` is that run's
        with pytest.raises(UserError, match="is being picked by a running ingest"):
            check_retry(open_context(fork), unit.id)
    check_retry(open_context(fork), unit.id)  # the dashboard's pre-check: nothing runs, so it may re-run
    gate.write_text("true\n")
    r = cli("ingest", "--unit", str(unit.id), "--json", repo=fork)
    assert r.rc == 0, r.err
    assert [u["status"] for u in r.json()["units"]] == ["landed"]
    assert [(x.status, x.retry_of) for x in _units(fork)[unit.name]] == [("abandoned", None), ("landed", unit.id)]


# -- never a commit twice, never an empty commit ---------------------------------------------------

def _ws_fork(cli, builder: ForkBuilder, l1: str) -> tuple[Path, str]:  # type: ignore[no-untyped-def]
    """The fork re-spaced a line that upstream commit U then changes: U conflicts, the trivial resolver settles it."""
    builder.upstream_commit({"k.py": "A = 1\nx = 1\nB = 2\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"k.py": "A = 1\nx  =  1\nB = 2\n"}, "[fork] spacing")
    u = builder.upstream_commit({"k.py": "A = 1\nx = 100\nB = 2\n"}, "Tune x (#10)")
    fork = builder.f.path
    builder.f.git("checkout", "-q", "--detach")
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write(f"\n[ingest]\nl1_command = {json.dumps(l1)}\n\n[trust]\nmin_cases = 0\n")  # no past picks
    return fork, u


def test_ingest_retry_on_a_moved_branch_does_not_pick_again_what_was_picked_meanwhile(  # type: ignore[no-untyped-def]
        cli, builder: ForkBuilder, tmp_path: Path) -> None:
    flag = tmp_path / "moved"
    racer = tmp_path / "race.sh"  # during L1, another clone lands U (resolved its own way) and it arrives here
    fork, u = _ws_fork(cli, builder, f"sh {racer}")
    racer.write_text(f'''#!/bin/sh
if [ ! -e {flag} ]; then
  touch {flag}
  printf 'A = 1\\nx = 100  # picked by hand\\nB = 2\\n' > k.py
  git add k.py
  new=$(git commit-tree -p "$FORKFLOW_BASE" -m "Tune x (#10)" -m "Upstream-Commit: {u}" "$(git write-tree)")
  git update-ref refs/heads/main "$new" "$FORKFLOW_BASE"
fi
''')
    start = _git(fork, "rev-parse", "main")
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc == 0, r.err
    (unit,) = r.json()["units"]
    assert unit["status"] == "empty" and "already picked on the fork branch" in unit["summary"]
    assert unit["skipped"] == [u] and unit["fork_sha"] is None
    trailers = _git(fork, "log", "--format=%B", f"{start}..main").count(f"Upstream-Commit: {u}")
    assert trailers == 1 and _git(fork, "rev-list", "--count", f"{start}..main") == "1"
    assert cli("conflicts", "--json", repo=fork).json()["conflicts"] == []  # none for a commit already picked
    assert _rows(_status(cli, fork))["10"]["disposition"] == "PICKED"
    assert [x.status for x in _units(fork)[unit["name"]]] == ["abandoned", "empty"]
    assert _git(fork, "rev-parse", "refs/forkflow/ingestion-point/main") == u


def test_ingest_pick_that_changes_nothing_lands_no_empty_commit(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"a.py": "A = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"mine.py": "M = 1\n"}, "[fork] ours")
    builder.upstream_commit({"z.txt": "temporary\n"}, "Add z (#10)")  # one bundle that changes nothing in all
    builder.upstream_commit({"z.txt": None}, "Drop z again (#11)")
    fork = builder.f.path
    builder.f.git("checkout", "-q", "--detach")
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n')
    start = _git(fork, "rev-parse", "main")
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc == 0, r.err
    (unit,) = r.json()["units"]
    assert unit["status"] == "empty" and len(unit["skipped"]) == 2
    assert _git(fork, "rev-parse", "main") == start
    rows = _rows(_status(cli, fork))
    assert rows["10"]["disposition"] == rows["11"]["disposition"] == "SKIPPED"


def test_ingest_person_resolution_keeps_upstream_mode_change(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"m.sh": "#!/bin/sh\necho one\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"m.sh": "#!/bin/sh\necho one fork\n"}, "[fork] louder")
    builder.upstream.write({"m.sh": "#!/bin/sh\necho two\n"})  # the same line edited, and 100644 -> 100755
    builder.upstream.git("update-index", "--chmod=+x", "m.sh")
    builder.upstream_commit({}, "Make m.sh a script (#10)")
    fork = builder.f.path
    builder.f.git("checkout", "-q", "--detach")
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n')
    assert cli("ingest", "--land", repo=fork).rc in WAITS
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    resolved = tmp_path / "m.sh"
    resolved.write_text("#!/bin/sh\necho two fork\n")
    assert cli("conflicts", "resolve", str(c["id"]), "--file", str(resolved), repo=fork).rc == 0
    doc = cli("ingest", "--land", "--json", repo=fork).json()
    assert [u["status"] for u in doc["units"]] == ["landed"]
    assert _git(fork, "ls-tree", "main", "m.sh").split()[0] == "100755"
    assert _git(fork, "show", "main:m.sh") == "#!/bin/sh\necho two fork"


def test_ingest_push_to_a_missing_remote_refuses_before_landing(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    fork = _small_fork(cli, builder, "true")
    assert cli("ingest", repo=fork).rc == 0  # validate: a stored unit for --unit
    before = _refs(fork)
    for args in (("--land", "--push"), ("--unit", "1", "--push")):
        r = cli("ingest", *args, repo=fork)
        assert _refs(fork) == before, args
        assert r.rc == 1 and len(r.err.strip().splitlines()) == 1, r.err
        assert "no remote 'origin'" in r.err and "nothing was landed" in r.err
    assert [c["disposition"] for c in _status(cli, fork)["commits"]].count("PENDING") == 3


def test_ingest_conflicts_without_text_regions_say_how_to_settle_them_in_git(  # type: ignore[no-untyped-def]
        cli, builder: ForkBuilder, tmp_path: Path) -> None:
    from forkflow.git.repo import Repo

    a, b_, c = "1" * 40, "2" * 40, "3" * 40
    builder.upstream_commit({"blob.bin": b"\0base", "gone.py": "G = 1\n"}, "Initial (#1)")
    builder.upstream.git("update-index", "--add", "--cacheinfo", f"160000,{a},sub")
    builder.upstream_commit({}, "Add sub (#2)")
    builder.branch_fork()
    builder.fork_commit({"blob.bin": b"\0fork", "gone.py": "G = 2  # fork\n"}, "[fork] ours")
    builder.f.git("update-index", "--cacheinfo", f"160000,{b_},sub")
    builder.fork_commit({}, "[fork] sub")
    up = {"binary": builder.upstream_commit({"blob.bin": b"\0upstream"}, "Blob (#10)"),
          "delete/modify": builder.upstream_commit({"gone.py": None}, "Drop gone (#11)")}
    builder.upstream.git("update-index", "--cacheinfo", f"160000,{c},sub")
    up["submodule"] = builder.upstream_commit({}, "Move sub (#12)")
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n')
    assert cli("ingest", "--land", repo=fork).rc in WAITS
    found = {x["kind"]: x for x in cli("conflicts", "--json", repo=fork).json()["conflicts"]}
    assert set(found) == set(up)
    steps = {"binary": "git checkout --theirs -- blob.bin", "delete/modify": "git rm -- gone.py",
             "submodule": "git update-index --cacheinfo 160000,COMMIT,sub"}
    for kind, x in found.items():
        shown = cli("conflicts", "show", str(x["id"]), repo=fork).out
        assert "write the resolved file" not in shown, kind
        hint = " ".join(shown.split()).split("settle it in git by hand, on a checkout of main: ")[1]
        assert hint.startswith(f"git cherry-pick -x {up[kind][:12]}; ") and steps[kind] in hint, hint
        r = cli("conflicts", "resolve", str(x["id"]), "--file", str(tmp_path / "any"), repo=fork)
        assert r.rc == 1 and len(r.err.strip().splitlines()) == 1 and steps[kind] in r.err, r.err
    git = Repo(fork).git  # follow the instruction for the binary conflict
    git("cherry-pick", "-x", up["binary"], check=False)
    git("checkout", "--theirs", "--", "blob.bin")
    git("add", "blob.bin")
    git("-c", "core.editor=true", "cherry-pick", "--continue")
    assert cli("ingest", "--land", repo=fork).rc == 4  # units wait on a person (docs/automation.md)
    left = {x["kind"] for x in cli("conflicts", "--json", repo=fork).json()["conflicts"]}
    assert left == {"delete/modify", "submodule"}
    assert _rows(_status(cli, fork))["10"]["disposition"] == "PICKED"


def k_conflict_fork(cli, builder: ForkBuilder) -> Path:  # type: ignore[no-untyped-def]
    """An initialised fork behind one upstream commit (#10) changing the line of k.py the fork changed."""
    builder.upstream_commit({"k.py": "def f():\n    return 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"k.py": "def f():\n    return 10  # fork\n"}, "[fork] f")
    builder.upstream_commit({"k.py": "def f():\n    return 100\n"}, "Tune f (#10)")
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    return fork


def _conflict_fork(cli, builder: ForkBuilder, extra: str = "") -> Path:  # type: ignore[no-untyped-def]
    """One upstream commit changing the line the fork changed: a content conflict no resolver settles."""
    fork = k_conflict_fork(cli, builder)
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n' + extra)
    return fork


def test_ingest_person_resolution_meets_the_same_guardrails(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fork = _conflict_fork(cli, builder)
    assert cli("ingest", "--land", repo=fork).rc in WAITS
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    person = tmp_path / "k.py"
    for text, check in (("def f():\n    return (110\n", "k.py no longer parses"),
                        ("def f():\n<<<<<<< fork\n    return 110\n", "conflict markers left in the result"),
                        ("def g():\n    return 110\n", "changes outside the conflicted regions")):
        person.write_text(text)
        r = cli("conflicts", "resolve", str(c["id"]), "--file", str(person), repo=fork)
        assert r.rc == 1 and len(r.err.strip().splitlines()) == 1 and f"refused: {check}" in r.err, r.err
    assert cli("conflicts", "--json", repo=fork).json()["conflicts"] != []  # nothing recorded
    person.write_text("def f():\n    return 110  # fork + upstream\n")
    assert cli("conflicts", "resolve", str(c["id"]), "--file", str(person), repo=fork).rc == 0
    assert [u["status"] for u in cli("ingest", "--land", "--json", repo=fork).json()["units"]] == ["landed"]


def test_ingest_conflicts_show_says_what_each_agent_attempt_did(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fork = _conflict_fork(cli, builder, f'\n[ingest.agent]\ncommand = ["{tmp_path}/no-such-agent"]\ntimeout = 5\n')
    assert cli("ingest", "--land", repo=fork).rc in WAITS
    toml = fork / "forkflow.toml"
    agent = tmp_path / "agent.py"  # answers with a file that changes a line outside the region
    agent.write_text("import sys\nsys.stdin.read()\nprint('def g():\\n    return 110')\n")
    toml.write_text(toml.read_text().replace(f'"{tmp_path}/no-such-agent"', f'"{sys.executable}", "{agent}"'))
    assert cli("ingest", "--land", repo=fork).rc == 4  # units wait on a person (docs/automation.md)
    (c,) = cli("conflicts", "--json", repo=fork).json()["conflicts"]
    out = " ".join(cli("conflicts", "show", str(c["id"]), repo=fork).out.split())
    assert "agent attempt (command, " in out
    assert f"error: cannot start {tmp_path}/no-such-agent" in out
    assert "rejected: changes outside the conflicted regions" in out
    doc = cli("conflicts", "show", str(c["id"]), "--json", repo=fork).json()
    assert [a["outcome"] for a in doc["agent_attempts"]] == ["error", "rejected"]


def test_ingest_drops_candidates_of_units_that_landed_otherwise(cli, fork: Path) -> None:  # type: ignore[no-untyped-def]
    def candidates() -> set[str]:
        return set(_git(fork, "for-each-ref", "--format=%(refname)", "refs/forkflow/candidates/").split())

    assert cli("ingest", repo=fork).rc in WAITS  # validate only: passing units are kept as candidates
    kept = candidates()
    (pin,) = [c for c in kept if c.startswith("refs/forkflow/candidates/pin-third_party-llvm-hash.txt-")]
    assert len(kept) >= 3
    first = cli("ingest", "--land", "--max-units", "1", "--json", repo=fork).json()["units"]
    assert [u["status"] for u in first] == ["landed"]
    left = candidates()
    assert len(left) == len(kept) - 1 and pin in left
    assert cli("ingest", "--land", repo=fork).rc == 5  # a unit could not land (docs/automation.md)
    assert candidates() == set()


def test_ingest_removes_a_ref_lock_a_killed_git_left_and_lands(cli, fork: Path) -> None:  # type: ignore[no-untyped-def]
    """A `git update-ref` killed mid-way leaves refs/heads/main.lock: every later update of main
    fails.  The next ingest removes it (it outlived any git command) instead of calling every
    failed update a lost race."""
    import os

    start = _git(fork, "rev-parse", "main")
    lock = fork / ".git" / "refs" / "heads" / "main.lock"
    lock.write_text(start + "\n")
    os.utime(lock, (lock.stat().st_atime - 60, lock.stat().st_mtime - 60))
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc in WAITS, r.err
    assert not lock.exists()
    assert any(u["status"] == "landed" for u in r.json()["units"])
    assert _git(fork, "rev-parse", "main") != start


def test_a_ref_lock_in_the_way_is_named_not_taken_for_a_lost_race(fork: Path) -> None:
    from forkflow.errors import UserError
    from forkflow.git.repo import Repo
    from forkflow.models import Sha

    repo = Repo.open(fork)
    start = Sha(_git(fork, "rev-parse", "main"))
    parent = Sha(_git(fork, "rev-parse", "main~1"))
    lock = fork / ".git" / "refs" / "heads" / "main.lock"
    lock.write_text("held\n")  # a git command holding it right now
    with pytest.raises(UserError, match=r"refs/heads/main is locked .*main\.lock exists"):
        repo.update_ref("refs/heads/main", parent, start)
    assert _git(fork, "rev-parse", "main") == start and lock.exists()
    lock.unlink()
    assert repo.clear_stale_ref_lock("refs/heads/main") is False  # no lock: nothing to do, no wait
    assert repo.update_ref("refs/heads/main", parent, parent) is False  # a real lost race stays False
