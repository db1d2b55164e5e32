"""init / status / history as a user runs them, and every bad input of the foundation."""
from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from forkflow.testing.gitrepo import ForkBuilder
from tests.conftest import run_forkflow


@pytest.fixture
def fork(builder: ForkBuilder) -> Path:
    builder.upstream_commit({"a.py": "A = 1\n"}, "Initial (#1)")
    builder.branch_fork()
    builder.fork_commit({"mine.py": "M = 1\n"}, "[fork] ours")
    for i in range(3):
        builder.upstream_commit({f"u{i}.py": f"U = {i}\n"}, f"Upstream {i} (#{10 + i})")
    return builder.f.path


def _snapshot_tree(path: Path) -> dict[str, bytes]:
    """Every file, refs and config included; fetched objects are a cache git prunes, not state."""
    out = {}
    for p in sorted(path.rglob("*")):
        if p.is_file() and ".git/objects/" not in str(p):
            out[str(p.relative_to(path))] = p.read_bytes()
    return out


def test_help_on_every_command() -> None:
    for args in ([], ["init"], ["status"], ["history"]):
        r = run_forkflow(*args, "--help", cwd=Path.cwd())
        assert r.rc == 0, r.err
        assert "Usage" in r.out


def test_init_then_status_end_to_end(fork: Path) -> None:
    r = run_forkflow("init", "--upstream", "upstream", cwd=fork)
    assert r.rc == 0, r.err
    text = (fork / "forkflow.toml").read_text()
    assert text.startswith("# forkflow.toml")
    assert 'remote = "upstream"' in text
    assert (fork / ".git" / "forkflow" / "forkflow.db").exists()
    r = run_forkflow("status", cwd=fork)
    assert r.rc == 0, r.err
    assert "days behind upstream" in r.out and "backlog commits" in r.out
    doc = run_forkflow("status", "--json", cwd=fork)
    import json
    d = json.loads(doc.out)
    assert set(d) >= {"fork_point", "upstream_tip", "ingestion_point", "days_behind",
                      "backlog_commits", "counts", "out_of_order_picks"}
    assert d["counts"]["pending"] == 3


def test_init_is_idempotent(fork: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    before = (fork / "forkflow.toml").read_text()
    r = cli("init", "--upstream", "upstream", repo=fork)
    assert r.rc == 0 and "kept" in r.out
    assert (fork / "forkflow.toml").read_text() == before
    # conflicting options on an existing config: an error, file unchanged
    subprocess.run(["git", "branch", "other"], cwd=fork, check=True)
    r = cli("init", "--upstream", "upstream", "--fork-branch", "other", repo=fork)
    assert r.rc == 1 and "edit it by hand" in r.err
    assert (fork / "forkflow.toml").read_text() == before


def test_init_with_path_adds_remote(builder: ForkBuilder, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"a": "1\n"}, "Initial")
    builder.branch_fork()
    builder.f.git("remote", "rename", "upstream", "origin")
    r = cli("init", "--upstream", str(builder.upstream.path), repo=builder.f.path)
    assert r.rc == 0, r.err
    assert "(added)" in r.out
    assert builder.f.git("remote", "get-url", "upstream").strip() == str(builder.upstream.path.resolve())


def _assert_clean_failure(r, fork: Path, before: dict[str, bytes], *needles: str) -> None:  # type: ignore[no-untyped-def]
    assert r.rc == 1, (r.rc, r.out, r.err)
    line = r.err.strip()
    assert line.count("\n") == 0, f"not one line: {line!r}"
    for n in needles:
        assert n in line, line
    assert _snapshot_tree(fork) == before, "files changed on a failed command"


def test_bad_not_a_git_repository(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    plain = tmp_path / "plain"
    plain.mkdir()
    r = cli("init", "--upstream", "x", repo=plain)
    _assert_clean_failure(r, plain, {}, "not a git repository", "--repo")
    r = cli("status", repo=plain)
    _assert_clean_failure(r, plain, {}, "not a git repository")


def test_bad_upstream_remote_missing(fork: Path, cli) -> None:  # type: ignore[no-untyped-def]
    before = _snapshot_tree(fork)
    r = cli("init", "--upstream", "nosuchremote", repo=fork)
    _assert_clean_failure(r, fork, before, "no remote named 'nosuchremote'")
    # configured, then the remote disappears
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    subprocess.run(["git", "remote", "remove", "upstream"], cwd=fork, check=True)
    r = cli("status", repo=fork)
    assert r.rc == 1 and "no remote 'upstream'" in r.err and "forkflow init" in r.err


def test_bad_upstream_unreachable(fork: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    before = _snapshot_tree(fork)
    r = cli("init", "--upstream", str(tmp_path / "gone.git"), repo=fork)
    assert r.rc == 1 and "already points at" in r.err  # the remote 'upstream' exists with another URL
    assert "upstream" in subprocess.run(["git", "remote"], cwd=fork, capture_output=True, text=True).stdout
    assert _snapshot_tree(fork) == before
    subprocess.run(["git", "remote", "remove", "upstream"], cwd=fork, check=True)
    before = _snapshot_tree(fork)
    r = cli("init", "--upstream", str(tmp_path / "gone.git"), repo=fork)
    assert r.rc == 1 and f"upstream {tmp_path / 'gone.git'} is unreachable" in r.err
    assert "does not appear to be a git repository" in r.err and "repository exists" not in r.err  # git's reason
    assert "upstream" not in subprocess.run(["git", "remote"], cwd=fork, capture_output=True, text=True).stdout
    assert _snapshot_tree(fork) == before
    r = cli("init", "--upstream", "https://127.0.0.1:9/nothing.git", repo=fork)
    assert r.rc == 1 and "https://127.0.0.1:9/nothing.git is unreachable" in r.err


def test_bad_branch_missing(fork: Path, cli) -> None:  # type: ignore[no-untyped-def]
    before = _snapshot_tree(fork)
    r = cli("init", "--upstream", "upstream", "--upstream-branch", "nope", repo=fork)
    _assert_clean_failure(r, fork, before, "no branch 'nope'", "--upstream-branch")
    r = cli("init", "--upstream", "upstream", "--fork-branch", "nope", repo=fork)
    _assert_clean_failure(r, fork, before, "fork branch 'nope' does not exist")
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    cfg = fork / "forkflow.toml"
    head, fork_section = cfg.read_text().split("[fork]\n")
    cfg.write_text(head + "[fork]\n" + fork_section.replace('branch = "main"', 'branch = "gone"', 1))
    r = cli("status", repo=fork)
    assert r.rc == 1 and "fork branch 'gone' does not exist" in r.err


def test_bad_no_common_ancestor(fork: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    other = ForkBuilder(tmp_path / "other")
    other.upstream_commit({"z": "z\n"}, "Unrelated root")
    before = _snapshot_tree(fork)
    r = cli("init", "--upstream", str(other.upstream.path), repo=fork)
    # the remote 'upstream' exists with another URL: refused before anything is written
    _assert_clean_failure(r, fork, before, "already points at")
    subprocess.run(["git", "remote", "remove", "upstream"], cwd=fork, check=True)
    before = _snapshot_tree(fork)
    r = cli("init", "--upstream", str(other.upstream.path), repo=fork)
    _assert_clean_failure(r, fork, before, "share no history")
    assert "upstream" not in subprocess.run(["git", "remote"], cwd=fork, capture_output=True, text=True).stdout


def test_bad_shallow_clone(builder: ForkBuilder, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for i in range(3):
        builder.upstream_commit({"a": f"{i}\n"}, f"c{i}")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", "--origin", "upstream",
                    f"file://{builder.upstream.path}", str(shallow)], check=True)
    before = _snapshot_tree(shallow)
    r = cli("init", "--upstream", "upstream", repo=shallow)
    _assert_clean_failure(r, shallow, before, "shallow", "git fetch --unshallow")


def test_bad_missing_objects(fork: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    # damage the clone: remove the object of an upstream commit's tree (as a partial clone lacks it)
    tip = subprocess.run(["git", "rev-parse", "upstream/main^{tree}"], cwd=fork, capture_output=True,
                         text=True, check=True).stdout.strip()
    subprocess.run(["git", "repack", "-q", "-a", "-d"], cwd=fork, check=True)
    subprocess.run(["git", "unpack-objects", "-q"], cwd=fork, check=False,
                   input=b"")  # keep objects packed
    packs = list((fork / ".git" / "objects" / "pack").glob("*.pack"))
    assert packs
    # explode the packs to loose objects so one can be removed
    for p in packs:
        data = p.read_bytes()
        p.unlink()
        p.with_suffix(".idx").unlink()
        subprocess.run(["git", "unpack-objects", "-q"], cwd=fork, input=data, check=True)
    (fork / ".git" / "objects" / tip[:2] / tip[2:]).unlink()
    r = cli("status", repo=fork)
    assert r.rc == 1, r.err
    assert "missing objects" in r.err and "git fetch --refetch" in r.err
    assert r.err.strip().count("\n") == 0


def test_bad_partial_clone_whose_source_is_gone(builder: ForkBuilder, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"a.py": "A = 0\n"}, "Initial")
    builder.branch_fork()
    builder.fork_commit({"a.py": "A = 2\n"}, "[fork] ours")  # the same file: patch-ids need its blobs
    builder.upstream_commit({"a.py": "A = 1\n"}, "Change a (#2)")
    src, up = tmp_path / "fork.git", tmp_path / "upstream.git"
    for origin, bare in ((builder.f.path, src), (builder.upstream.path, up)):
        subprocess.run(["git", "clone", "-q", "--bare", str(origin), str(bare)], check=True)
        subprocess.run(["git", "-C", str(bare), "config", "uploadpack.allowFilter", "true"], check=True)
    part = tmp_path / "partial"
    subprocess.run(["git", "clone", "-q", "--filter=blob:none", "--no-checkout", f"file://{src}", str(part)], check=True)
    subprocess.run(["git", "-C", str(part), "remote", "add", "upstream", f"file://{up}"], check=True)
    subprocess.run(["git", "-C", str(part), "fetch", "-q", "--filter=blob:none", "upstream"], check=True)
    assert cli("init", "--upstream", "upstream", repo=part).rc == 0
    for bare in (src, up):  # the promisor remotes are gone: blobs cannot be fetched
        bare.rename(bare.with_suffix(".moved"))
    r = cli("status", "--json", repo=part)  # copes, and says what it did (issue 11)
    assert r.rc == 0, r.err
    notes = r.json()["notes"]
    assert len(notes) == 1 and "have no patch-id: their blobs are missing from this clone" in notes[0]
    assert r.json()["counts"]["pending"] == 1


def test_bad_malformed_config_names_key_and_line(fork: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    cfg = fork / "forkflow.toml"
    good = cfg.read_text()
    cfg.write_text(good.replace("infer_threshold = 0.95", "infer_threshold = \"lots\""))
    r = cli("status", repo=fork)
    line = next(i for i, t in enumerate(cfg.read_text().splitlines(), 1) if "infer_threshold =" in t)
    assert r.rc == 1 and f"forkflow.toml:{line}" in r.err and "ledger.infer_threshold" in r.err
    cfg.write_text(good + "\n[broken\n")
    r = cli("status", repo=fork)
    assert r.rc == 1 and "malformed TOML" in r.err and "line" in r.err
    cfg.write_text(good.replace("infer_threshold = 0.95", "infer_threshold = 0.95\nmarkers = ['no group']"))
    r = cli("status", repo=fork)
    assert r.rc == 1 and "ledger.markers" in r.err and "group" in r.err


def test_bad_misspelt_key_or_section_is_named_not_ignored(fork: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    cfg = fork / "forkflow.toml"
    good = cfg.read_text()
    cfg.write_text(good.replace("infer_threshold = 0.95", "infer_thresold = 0.9"))
    r = cli("status", repo=fork)
    line = next(i for i, t in enumerate(cfg.read_text().splitlines(), 1) if "infer_thresold" in t)
    assert r.rc == 1 and f"forkflow.toml:{line}: key 'ledger.infer_thresold' is not a [ledger] setting" in r.err
    cfg.write_text(good.replace("[store]", "[stor]"))
    r = cli("status", repo=fork)
    line = next(i for i, t in enumerate(cfg.read_text().splitlines(), 1) if t == "[stor]")
    assert r.rc == 1 and f"forkflow.toml:{line}: unknown section or key 'stor'" in r.err and "store" in r.err
    assert r.err.strip().count("\n") == 0
    # the keys the template shows commented out are known ones
    cfg.write_text(good.replace("# first_parent = false", "first_parent = false").replace(
        '# name = "triton:main"', 'name = "triton:main"'))
    assert cli("status", repo=fork).rc == 0


def test_bad_store_locked_by_another_run(fork: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    db = fork / ".git" / "forkflow" / "forkflow.db"
    holder = sqlite3.connect(db, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    os.environ["FORKFLOW_LOCK_TIMEOUT"] = "0.3"
    try:
        r = cli("status", repo=fork)
    finally:
        del os.environ["FORKFLOW_LOCK_TIMEOUT"]
        holder.rollback()
        holder.close()
    assert r.rc == 1, (r.out, r.err)
    assert "locked by another forkflow run" in r.err
    assert cli("status", repo=fork).rc == 0  # and it works once the other run is done


def test_bad_store_from_newer_schema(fork: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    db = fork / ".git" / "forkflow" / "forkflow.db"
    con = sqlite3.connect(db)
    con.execute("INSERT INTO alembic_version VALUES ('9999_from_the_future')")
    con.commit()
    before = db.read_bytes()
    r = cli("status", repo=fork)
    assert r.rc == 1 and "newer forkflow" in r.err and "pip install -U forkflow" in r.err
    con.close()
    assert db.read_bytes() == before


def test_store_url_from_environment(fork: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    other = tmp_path / "team.db"
    os.environ["FORKFLOW_STORE"] = f"sqlite:///{other}"
    try:
        r = cli("status", repo=fork)  # a URL that names no store is a mistake, not a new store
        assert r.rc == 1 and "no forkflow store at" in r.err and not other.exists()
        assert cli("init", "--upstream", "upstream", repo=fork).rc == 0  # init creates it
        assert cli("status", repo=fork).rc == 0
    finally:
        del os.environ["FORKFLOW_STORE"]
    assert other.exists()
    con = sqlite3.connect(other)
    assert con.execute("select count(*) from snapshots").fetchone()[0] == 1


def test_history_records_and_backfills(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    week = 7 * 86400
    builder.upstream_commit({"a": "0\n"}, "Initial")
    builder.branch_fork()
    ups = []
    for i in range(6):
        builder.tick(week)
        ups.append(builder.upstream_commit({f"w{i}": "x\n"}, f"Week {i} (#{i + 1})"))
        if i in (1, 3):  # the fork catches up twice
            builder.pick(ups[i - 1])
            builder.pick(ups[i])
    fork = builder.f.path
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    from datetime import datetime, timezone
    start = datetime.fromtimestamp(1_700_000_000, timezone.utc).date().isoformat()
    r = cli("history", "--backfill", "--since", start, "--every", "week", "--json", repo=fork)
    assert r.rc == 0, r.err
    series = r.json()["series"]
    assert len(series) >= 6
    assert all(p["source"] == "backfill" and p["inferred"] for p in series)
    days = [p["days_behind"] for p in series]
    assert max(days) > 7 and min(days) < max(days)  # the trend moves as the fork catches up
    again = cli("history", "--backfill", "--since", start, "--json", repo=fork).json()["series"]
    assert len(again) == len(series)  # no duplicates on a rerun
    assert cli("history", "--backfill", "--since", start, "--every", "day", repo=fork).rc == 0
    assert len(cli("history", "--json", repo=fork).json()["series"]) > len(series)
    assert cli("history", "--backfill", "--since", start, "--every", "week", repo=fork).rc == 0
    stored = cli("history", "--json", repo=fork).json()["series"]
    assert len(stored) == len(series)  # the weekly backfill replaced the daily one over its range
    cli("status", repo=fork)
    assert len(cli("history", "--json", repo=fork).json()["series"]) == len(series) + 1
    assert cli("history", "--since", start, repo=fork).rc == 1
    assert cli("history", "--backfill", "--since", "yesterday", repo=fork).rc == 1


def test_bad_status_fetch_unreachable(fork: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("init", "--upstream", "upstream", repo=fork).rc == 0
    subprocess.run(["git", "remote", "set-url", "upstream", str(tmp_path / "moved-away")], cwd=fork, check=True)
    before = subprocess.run(["git", "for-each-ref"], cwd=fork, capture_output=True, text=True).stdout
    r = cli("status", "--fetch", repo=fork)
    assert r.rc == 1 and "cannot fetch from remote 'upstream'" in r.err
    assert "does not appear to be a git repository" in r.err
    assert subprocess.run(["git", "for-each-ref"], cwd=fork, capture_output=True, text=True).stdout == before


def test_init_and_status_on_postgres(fork: Path, cli, postgres_url: str) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import create_engine, text

    r = cli("init", "--upstream", "upstream", "--store", postgres_url, repo=fork)
    assert r.rc == 0, r.err
    assert postgres_url in (fork / "forkflow.toml").read_text()
    assert not (fork / ".git" / "forkflow" / "forkflow.db").exists()
    d = cli("status", "--json", repo=fork).json()
    assert d["counts"]["pending"] == 3
    eng = create_engine(postgres_url)
    with eng.connect() as c:
        assert c.execute(text("select count(*) from snapshots")).scalar() == 1
    eng.dispose()
