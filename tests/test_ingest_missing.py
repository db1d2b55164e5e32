"""Missing blobs never crash planning or landing: a real partial clone served through file://,
and a clone whose objects are absent (issue 11)."""
from __future__ import annotations

from pathlib import Path

from forkflow.git.run import run_git
from forkflow.testing.gitrepo import ForkBuilder

BASE = "".join(f"line {i}\n" for i in range(1, 41))


def _git(repo: Path, *args: str) -> str:
    return run_git(*args, cwd=repo).strip()


def _exists(repo: Path, oid: str) -> bool:
    from forkflow.git.run import run_git_bytes

    rc, _, _ = run_git_bytes("cat-file", "-e", oid, cwd=repo, check=False, env={"GIT_NO_LAZY_FETCH": "1"})
    return rc == 0


def _history(builder: ForkBuilder) -> dict[str, str]:
    """Upstream: a.py and b.py; the fork changes a.py's first line; upstream then changes a.py far
    from it (a real three-way merge: its blobs are read), b.py, and a.py again next to the first
    change upstream made (depends on it)."""
    builder.upstream_commit({"a.py": BASE, "b.py": "b = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"a.py": "fork line 1\n" + BASE.split("\n", 1)[1]}, "[fork] ours")
    x = builder.upstream_commit({"a.py": BASE.replace("line 30\n", "line thirty\n")}, "Change a far away (#2)")
    y = builder.upstream_commit({"b.py": "b = 2\n"}, "Change b (#3)")
    z = builder.upstream_commit({"a.py": BASE.replace("line 30\n", "line thirty!\n")}, "Change a again (#4)")
    builder.fetch()
    blob = _git(builder.upstream.path, "rev-parse", f"{x}:a.py")
    return {"x": x, "y": y, "z": z, "blob": blob}


def _init(cli, fork: Path, *extra: str) -> None:  # type: ignore[no-untyped-def]
    assert cli("init", "--upstream", "upstream", *extra, repo=fork).rc == 0
    with (fork / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n')


def test_ingest_partial_clone_fetches_what_a_pick_needs(cli, builder: ForkBuilder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    h = _history(builder)
    served = tmp_path / "served.git"
    run_git("clone", "-q", "--bare", str(builder.f.path), str(served), cwd=tmp_path)
    run_git("push", "-q", str(served), "refs/remotes/upstream/main:refs/heads/upstream-main", cwd=builder.f.path)
    run_git("config", "uploadpack.allowFilter", "true", cwd=served)
    run_git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=served)
    partial = tmp_path / "partial"
    run_git("clone", "-q", "--filter=blob:none", "--origin", "upstream", f"file://{served}", str(partial), cwd=tmp_path)
    run_git("config", "user.name", "Fork", cwd=partial)
    run_git("config", "user.email", "fork@example.com", cwd=partial)
    assert _git(partial, "config", "remote.upstream.promisor") == "true"
    assert not _exists(partial, h["blob"])  # upstream's blob is not here yet
    _init(cli, partial, "--upstream-branch", "upstream-main")
    plan = cli("plan", "--json", repo=partial)
    assert plan.rc == 0, plan.err
    r = cli("ingest", "--land", "--json", repo=partial)
    assert r.rc == 0, r.err
    landed = {s for u in r.json()["units"] for s in u["picked"]}
    assert {h["x"], h["y"], h["z"]} <= landed
    assert _exists(partial, h["blob"])  # git fetched it from the promisor remote
    assert _git(partial, "show", "main:a.py").splitlines()[0] == "fork line 1"


def test_ingest_absent_blob_holds_back_only_what_needs_it(cli, builder: ForkBuilder) -> None:  # type: ignore[no-untyped-def]
    h = _history(builder)
    fork = builder.f.path
    loose = fork / ".git" / "objects" / h["blob"][:2] / h["blob"][2:]
    assert loose.exists(), "the clone shares upstream's loose objects"
    loose.unlink()
    _init(cli, fork)
    plan = cli("plan", "--json", repo=fork)
    assert plan.rc == 0, plan.err
    held = {x["sha"]: x for x in plan.json()["held_back"]}
    assert held[h["x"]]["why"].startswith(f"blob {h['blob'][:12]} (a.py)")
    assert held[h["x"]]["why"].endswith("is not in this clone and could not be fetched")
    assert held[h["z"]]["waits_for"] == h["x"]
    r = cli("ingest", "--land", "--json", repo=fork)
    assert r.rc == 4, r.err  # the held-back unit waits on a person (docs/automation.md)
    doc = r.json()
    landed = {s for u in doc["units"] for s in u["picked"]}
    assert landed == {h["y"]}
    reasons = {x["sha"]: x["why"] for x in doc["held_back"]}
    assert "is not in this clone" in reasons[h["x"]] and reasons[h["z"]].startswith(f"waits for {h['x'][:12]}")
