"""A team's shared store: several clones of one fork remote, one PostgreSQL store.

Landed means on the shared branch (landing/shared.py), one writer proved at every step
(store/locks.py's lease), forks sharing caches safely, one identity per fork (store/forks.py)."""
from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from forkflow.git.run import run_git
from forkflow.store.forks import fork_id, identity, normalise_remote
from forkflow.store.locks import LeaseLost, fork_write_lock, take_lease
from forkflow.store.session import Store, redact
from tests.test_team_setup import (
    Cluster,
    Team,
    check_invariant,
    clone,
    forkflow,
    free_port,
    git,
    make_team,
    store_picked,
    trailers_on_shared,
)


def _l1_script(team: Team, name: str, at: int, action: str) -> str:
    """An L1 command that passes, and runs `action` on its `at`-th call (a fault mid-ingest)."""
    script = team.root / f"{name}.sh"
    count = team.root / f"{name}.count"
    script.write_text(f"n=$(cat {count} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {count}\n"
                      f"if [ \"$n\" -eq {at} ]; then {action}; fi\nexit 0\n")
    return f"sh {script}"


def _kill_ingest(clone_path: Path) -> str:
    """Shell: SIGKILL the ingest holding this clone's lock (its pid is in the lock file)."""
    return f"kill -9 $(head -1 {clone_path}/.git/forkflow-ingest.lock); sleep 5"


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


# -- pure pieces ----------------------------------------------------------------------
def test_store_url_without_password_shows_no_stars() -> None:
    assert redact("postgresql+psycopg://forkflow@db:5432/ff") == "postgresql+psycopg://forkflow@db:5432/ff"
    assert redact("postgresql+psycopg://u:secret@db/ff") == "postgresql+psycopg://u:***@db/ff"


def test_every_clone_of_a_remote_gets_one_identity() -> None:
    same = ["https://u:tok@GitHub.com/meta/triton.git", "git@github.com:meta/triton", "ssh://git@github.com/meta/triton/",
            "https://github.com/meta/triton"]
    assert {normalise_remote(u) for u in same} == {"github.com/meta/triton"}
    assert identity(same[0], "main") == "github.com/meta/triton:main"
    assert normalise_remote("/srv/git/fork.git") == "/srv/git/fork"


def test_a_store_that_knew_the_fork_by_its_folder_keeps_its_history(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 's.db'}")
    with store.session_scope() as s:
        old = fork_id(s, "triton-checkout:main")
    with store.session_scope() as s:
        assert fork_id(s, "github.com/meta/triton:main", legacy=("triton-checkout:main",)) == old
    with store.session_scope() as s:  # the old name is gone: another folder's clone does not take it again
        assert fork_id(s, "other:main") != old
    store.dispose()


# -- one writer ---------------------------------------------------------------------
@pytest.mark.security
def test_a_writer_that_lost_the_lease_lands_nothing_more(postgres_url: str) -> None:
    store = Store.open(postgres_url)
    with store.session_scope() as s:
        fid = fork_id(s, "team:main")
    with fork_write_lock(store, fid) as first:
        first.verify()
        # the database dropped the lock's connection (as a restart does): the lease knows at once
        engine = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
        with engine.connect() as c:
            c.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": first.backend})
        engine.dispose()
        with pytest.raises(LeaseLost, match="write lock of the fork is gone"):
            first.verify()
        with pytest.raises(LeaseLost):  # and stays lost
            first.verify()
    # a second writer let in takes a new generation: the first, still running, is fenced out
    with fork_write_lock(store, fid) as second:
        stale = take_lease(store, fid)  # what a writer let in after a restart holds
        with pytest.raises(LeaseLost, match="another writer took this fork"):
            second.verify()
        stale.verify()
    store.dispose()


@pytest.mark.security
def test_two_clones_in_differently_named_folders_share_one_lock(postgres_url: str, tmp_path: Path) -> None:
    team = make_team(tmp_path, postgres_url, n=3)
    slow = tmp_path / "slow.sh"
    slow.write_text(f"touch {tmp_path}/started; sleep 4\n")
    cron = clone(team, "cron-job", l1=f"sh {slow}")
    person = clone(team, "alice-checkout")
    names = {(cron / "forkflow.toml").read_text().split('name = "')[1].split('"')[0],
             (person / "forkflow.toml").read_text().split('name = "')[1].split('"')[0]}
    assert names == {f"{normalise_remote(str(team.shared))}:main"}
    running = subprocess.Popen(["forkflow", "ingest", "--land", "--push"], cwd=cron, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            if (tmp_path / "started").exists():
                break
            time.sleep(0.05)
        r = forkflow("ingest", "--land", "--push", cwd=person)
        assert r.returncode == 1 and "another `forkflow ingest` is writing this fork" in _one_line(r.stderr)
    finally:
        out, err = running.communicate(timeout=120)
    assert running.returncode == 0, err
    check_invariant(team)


# -- landed means on the shared branch ----------------------------------------------------
def test_kill_mid_run_then_a_fresh_clone_lands_the_rest(postgres_url: str, tmp_path: Path) -> None:
    team = make_team(tmp_path, postgres_url, n=8)
    killed = team.root / "cron-a"
    clone(team, "cron-a", l1=_l1_script(team, "kill", 4, _kill_ingest(killed)))
    r = forkflow("ingest", "--land", "--push", cwd=killed)
    assert r.returncode == -9, r.stderr
    landed_here = len(git(killed, "rev-list", "origin/main..main").split())
    assert landed_here >= 2  # landed on the clone's branch, never pushed
    assert store_picked(team.store) == set()  # ... so no clone sees them as picked
    status = forkflow("status", cwd=killed)
    assert status.returncode == 0 and "pending push:" in status.stdout, status.stdout
    check_invariant(team)

    fresh = clone(team, "ci-job-17")  # what the next CI job does
    r = forkflow("ingest", "--land", "--push", cwd=fresh)
    assert r.returncode == 0, r.stderr
    picked, on_shared = check_invariant(team)
    assert picked == set(team.commits) and len(on_shared) == len(team.commits)

    # the killed clone runs again: its unpushed landings are dropped, nothing lands twice
    r = forkflow("ingest", "--land", "--push", cwd=killed)
    assert r.returncode == 0, r.stderr
    assert "dropped" in r.stdout and git(killed, "rev-parse", "main") == git(team.shared, "rev-parse", "main")
    picked, on_shared = check_invariant(team)
    assert len(on_shared) == len(team.commits)
    status = forkflow("status", "--json", cwd=killed)
    assert '"decisions": 0' in status.stdout


def test_the_killed_clone_pushes_what_it_landed_first(postgres_url: str, tmp_path: Path) -> None:
    team = make_team(tmp_path, postgres_url, n=6)
    killed = team.root / "cron-a"
    clone(team, "cron-a", l1=_l1_script(team, "kill", 3, _kill_ingest(killed)))
    assert forkflow("ingest", "--land", "--push", cwd=killed).returncode == -9
    r = forkflow("ingest", "--land", "--push", cwd=killed)
    assert r.returncode == 0, r.stderr
    picked, on_shared = check_invariant(team)
    assert picked == set(team.commits) and len(on_shared) == len(team.commits)


def test_a_push_after_the_shared_branch_moved_fast_forwards_or_stops(postgres_url: str, tmp_path: Path) -> None:
    team = make_team(tmp_path, postgres_url, n=2)
    cron = clone(team, "cron")
    person = team.root / "person"
    run_git("clone", "-q", str(team.shared), str(person), cwd=tmp_path)
    (person / "notes.txt").write_text("x\n")
    git(person, "add", "notes.txt")
    git(person, "-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qm", "a person's change")
    git(person, "push", "-q", "origin", "HEAD:main")
    r = forkflow("ingest", "--land", "--push", cwd=cron)  # fetched first: lands on the person's commit
    assert r.returncode == 0, r.stderr
    assert git(team.shared, "rev-parse", "main") == git(cron, "rev-parse", "main")
    check_invariant(team)
    # a person's commit in the cron clone that the shared branch lacks, and the shared branch moved
    git(cron, "checkout", "-q", "main")
    (cron / "local.txt").write_text("y\n")
    git(cron, "add", "local.txt")
    git(cron, "commit", "-qm", "unpushed by hand")
    git(person, "pull", "-q", "--no-rebase", "origin", "main")
    (person / "more.txt").write_text("z\n")
    git(person, "add", "more.txt")
    git(person, "-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qm", "more")
    git(person, "push", "-q", "origin", "HEAD:main")
    r = forkflow("ingest", "--land", "--push", cwd=cron)
    assert r.returncode == 1 and "forkflow did not land" in _one_line(r.stderr), r.stderr


# -- the database goes away ----------------------------------------------------------------
@pytest.fixture
def cluster(tmp_path: Path):  # type: ignore[no-untyped-def]
    if not (Path("/usr/lib/postgresql/15/bin/initdb").exists() or shutil.which("initdb")):
        pytest.skip("no PostgreSQL binaries to start a throwaway cluster")
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="forkflow-pg-", dir="/tmp"))  # outside pytest's 0700 folder: the server's user reads it
    root.chmod(0o755)
    c = Cluster(root, free_port()).init()
    try:
        yield c
    finally:
        c.stop(check=False)
        shutil.rmtree(root, ignore_errors=True)


def test_a_database_restart_mid_run_stops_the_writer(cluster: Cluster, tmp_path: Path) -> None:
    team = make_team(tmp_path / "t", cluster.url, n=8)
    cron = clone(team, "cron", l1=_l1_script(team, "restart", 3, cluster.ctl_command("restart")))
    r = forkflow("ingest", "--land", "--push", cwd=cron)
    assert r.returncode == 1, r.stderr
    line = _one_line(r.stderr)
    assert "write lock of the fork is gone" in line and "lands nothing more" in line
    check_invariant(team)
    fresh = clone(team, "ci")
    r = forkflow("ingest", "--land", "--push", cwd=fresh)
    assert r.returncode == 0, r.stderr
    picked, on_shared = check_invariant(team)
    assert picked == set(team.commits) and len(on_shared) == len(team.commits)


def test_a_database_that_stops_mid_run_ends_it_with_one_line(cluster: Cluster, tmp_path: Path) -> None:
    team = make_team(tmp_path / "t", cluster.url, n=6)
    cron = clone(team, "cron", l1=_l1_script(team, "stop", 3, cluster.ctl_command("stop")))
    r = forkflow("ingest", "--land", "--push", cwd=cron)
    assert r.returncode == 1, r.stderr
    line = _one_line(r.stderr)  # no second error from releasing the lock that went with the database
    assert "went away" in line and "forkflow failed unexpectedly" not in line, line
    cluster.start()
    check_invariant(team)
    r = forkflow("ingest", "--land", "--push", cwd=cron)
    assert r.returncode == 0, r.stderr
    picked, on_shared = check_invariant(team)
    assert picked == set(team.commits) and len(on_shared) == len(team.commits)


# -- forks share a database --------------------------------------------------------------
def test_two_forks_start_at_once_on_an_empty_database(postgres_url: str, tmp_path: Path) -> None:
    team = make_team(tmp_path, postgres_url, n=6, files_per_commit=3)
    other = tmp_path / "other.git"  # a second fork of the same upstream: the same commits, another fork
    run_git("clone", "-q", "--bare", str(team.shared), str(other), cwd=tmp_path)
    a, b = tmp_path / "fork-a", tmp_path / "fork-b"
    run_git("clone", "-q", str(team.shared), str(a), cwd=tmp_path)
    run_git("clone", "-q", str(other), str(b), cwd=tmp_path)

    def both(*args: str) -> list[subprocess.CompletedProcess[str]]:
        procs = [subprocess.Popen(["forkflow", *args], cwd=p, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for p in (a, b)]
        out = []
        for p in procs:
            o, e = p.communicate(timeout=300)
            out.append(subprocess.CompletedProcess(p.args, p.returncode, o, e))
        return out

    for r in both("init", "--upstream", str(team.upstream), "--store", postgres_url):
        assert r.returncode == 0, r.stderr
    for p in (a, b):
        with (p / "forkflow.toml").open("a") as f:
            f.write('\n[ingest]\nl1_command = "true"\n')
    for _ in range(3):
        for r in both("status"):
            assert r.returncode == 0, r.stderr
    for r in both("ingest", "--land"):
        assert r.returncode == 0, r.stderr
    engine = create_engine(postgres_url)
    with engine.connect() as c:
        per_fork: dict[str, int] = dict(c.execute(text("SELECT f.name, count(*) FROM dispositions d JOIN forks f ON f.id = d.fork_id "
                                       "WHERE d.disposition = 'PICKED' GROUP BY f.name")).all())
    engine.dispose()
    assert sorted(per_fork.values()) == [6, 6] and len(per_fork) == 2
    assert len(trailers_on_shared(team)) == 0  # nothing pushed without --push: each clone's branch is its own


def test_a_push_the_shared_branch_moved_under_drops_and_lands_again(postgres_url: str, tmp_path: Path) -> None:
    team = make_team(tmp_path, postgres_url, n=4)
    person = tmp_path / "person"
    run_git("clone", "-q", str(team.shared), str(person), cwd=tmp_path)
    (person / "notes.txt").write_text("x\n")
    git(person, "add", "notes.txt")
    git(person, "-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qm", "a person's change")
    # a person pushes while the cron clone's landings wait for its push
    cron = clone(team, "cron", l1=_l1_script(team, "push", 2, f"git -C {person} push -q origin HEAD:main"))
    r = forkflow("ingest", "--land", "--push", cwd=cron)
    assert r.returncode == 0, r.stderr
    assert "dropped" in r.stdout, r.stdout  # what it landed beside the person's push was planned and landed again
    assert git(person, "rev-parse", "HEAD") in git(team.shared, "rev-list", "main").split()
    picked, on_shared = check_invariant(team)
    assert picked == set(team.commits) and len(on_shared) == len(team.commits)


def test_shared_cache_writes_of_two_forks_at_once_never_collide(postgres_url: str) -> None:
    """Each write shared by every fork (keyed by commit or content) runs while another process's
    transaction holds the same key, uncommitted: it waits, then keeps the row (a plain insert
    failed on the primary key here, as two forks starting on an empty store did)."""
    import threading

    from sqlalchemy.orm import Session

    from forkflow.conflicts import records as crecords
    from forkflow.landing import records as lrecords
    from forkflow.ledger import records as ledger_records
    from forkflow.models import Sha
    from forkflow.planning.lines import CommitShape
    from forkflow.planning.model import Touch
    from forkflow.replay import records as replay_records

    store = Store.open(postgres_url)
    with store.session_scope() as s:
        fid = fork_id(s, "a:main")
    sha = Sha("a" * 40)
    writes: dict[str, Callable[[Session], None]] = {
        "commit facts": lambda s: ledger_records.save_commit_facts(s, {sha: ("p" * 40, ("a.py",))}),
        "shapes": lambda s: lrecords.save_shapes(s, [CommitShape(sha, ())]),
        "touches": lambda s: lrecords.save_touches(s, {sha: Touch(frozenset({"a.py"}))}),
        "ledger cache": lambda s: ledger_records.save_ledger(s, fid, "k" * 64, "{}"),
        "resolutions": lambda s: crecords.save_resolution(s, "key1", "a.py", ["x"], "rerere"),
        "replay cache": lambda s: replay_records.save(s, "r" * 64, "step", {"x": 1}),
    }
    failed: dict[str, str] = {}
    for name, write in writes.items():
        first = Session(store.engine)
        write(first)
        first.flush()  # the row is written, not committed: the other writer waits on it
        errors: list[BaseException] = []

        def second() -> None:
            try:
                with store.session_scope() as s:
                    write(s)  # noqa: B023  (run before the loop moves on: joined below)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.3)
        first.commit()
        first.close()
        t.join(timeout=30)
        if errors:
            failed[name] = type(errors[0]).__name__
    store.dispose()
    assert failed == {}
