"""A team on a real pair: one shared bare fork remote, one PostgreSQL store, clones that die.

    python benchmarks/bench_team.py PAIR [--commits N] [--kill-at K] [--restart-at K] [--json]

PAIR is a realfork pair (`make_pair.py`, then `cut_missing.py`; see /work/shared/realfork/README.md):
upstream.git and fork.git (the fork with every blob).  The fork's `main` is published as a bare
`shared.git`; each scenario
starts from a fresh copy of it and a fresh database on a throwaway PostgreSQL cluster (initdb on
its own port, stopped at the end), and runs `forkflow ingest --land --push --until U` from clones
in differently named folders, U being the N-th pending upstream commit:

* clean: one clone, one run;
* kill: the first clone's ingest is killed with SIGKILL at its K-th L1 run; then a fresh clone runs;
* restart: the database restarts during the K-th L1 run; then a fresh clone runs.

After each fault and after each re-run the invariant is checked: every upstream commit the store
records PICKED is on the shared branch, and no `Upstream-Commit:` trailer appears twice there.
Printed: for each scenario, what the first run left (exit, picked in the store, trailers on the
shared branch) and what the re-run brought the shared branch to, next to the clean run's count.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import create_engine, text  # noqa: E402

from tests.test_team_setup import Cluster, free_port  # noqa: E402


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def forkflow(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "forkflow"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "forkflow"]
    return subprocess.run([*cmd, *args], cwd=cwd, capture_output=True, text=True, timeout=3600)


class Scenario:
    def __init__(self, work: Path, name: str, pair: Path, cluster: Cluster, max_batch: int) -> None:
        self.max_batch = max_batch
        self.root = work / name
        self.root.mkdir()
        self.pair, self.cluster = pair, cluster
        self.shared = self.root / "shared.git"
        # fork.git (cut_missing.py): the fork with every blob L1's work tree checks out
        git(self.root, "clone", "-q", "--bare", "--no-tags", str(pair / "fork.git"), str(self.shared))
        db = f"team_{name}"
        cluster_admin = create_engine(cluster.url.rsplit("/", 1)[0] + "/postgres", isolation_level="AUTOCOMMIT")
        with cluster_admin.connect() as c:
            c.execute(text(f'CREATE DATABASE "{db}"'))
        cluster_admin.dispose()
        self.store = cluster.url.rsplit("/", 1)[0] + f"/{db}"

    def clone(self, folder: str, l1: str) -> Path:
        path = self.root / folder
        git(self.root, "clone", "-q", "--no-checkout", str(self.shared), str(path))
        git(path, "checkout", "-q", "--detach", "origin/main")
        git(path, "config", "user.name", "Team Bench")
        git(path, "config", "user.email", "bench@example.com")
        git(path, "remote", "add", "upstream", str(self.pair / "upstream.git"))
        git(path, "fetch", "-q", "upstream")
        r = forkflow(path, "init", "--upstream", "upstream", "--store", self.store)
        if r.returncode != 0:
            raise SystemExit(f"bench_team: init failed: {r.stderr.strip()}")
        with (path / "forkflow.toml").open("a") as f:
            f.write(f"\n[ingest]\nl1_command = {json.dumps(l1)}\nmax_batch = {self.max_batch}\n")
        return path

    def ingest(self, path: Path, until: str) -> tuple[int, float, str]:
        t0 = time.perf_counter()
        r = forkflow(path, "ingest", "--land", "--push", "--until", until)
        err = [line for line in r.stderr.splitlines() if line.strip()]
        return r.returncode, round(time.perf_counter() - t0, 1), (err[-1] if err else "")

    def state(self) -> dict[str, Any]:
        """The invariant, checked: picked in the store vs trailers on the shared branch."""
        engine = create_engine(self.store)
        with engine.connect() as c:
            picked = {r[0] for r in c.execute(text("SELECT upstream_sha FROM dispositions WHERE disposition = 'PICKED'"))}
        engine.dispose()
        out = git(self.shared, "log", "--format=%(trailers:key=Upstream-Commit,valueonly)", "main")
        trailers = [line.strip() for line in out.splitlines() if line.strip()]
        return {"picked_in_store": len(picked), "trailers_on_shared": len(trailers),
                "picked_not_on_shared": len(picked - set(trailers)),
                "trailers_twice": len(trailers) - len(set(trailers)),
                "holds": not (picked - set(trailers)) and len(trailers) == len(set(trailers))}


def l1_script(root: Path, name: str, at: int, action: str) -> str:
    script, count = root / f"{name}.sh", root / f"{name}.count"
    script.write_text(f"n=$(cat {count} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {count}\n"
                      f"if [ \"$n\" -eq {at} ]; then {action}; fi\nexit 0\n")
    return f"sh {script}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pair", type=Path)
    ap.add_argument("--commits", type=int, default=120, help="ingest up to the N-th pending upstream commit")
    ap.add_argument("--kill-at", type=int, default=0, help="SIGKILL the ingest at its K-th L1 run (default: "
                    "half the clean run's L1 runs)")
    ap.add_argument("--restart-at", type=int, default=0, help="restart PostgreSQL during the K-th L1 run "
                    "(default: half the clean run's)")
    ap.add_argument("--max-batch", type=int, default=4, help="[ingest] max_batch: weighted commits per L1 run "
                    "(small: many L1 runs, so that a fault lands mid-run)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    pair = args.pair.resolve()
    if not (pair / "upstream.git").is_dir() or not (pair / "fork.git").is_dir():
        raise SystemExit(f"bench_team: {pair} is not a realfork pair (no upstream.git or fork.git: run the realfork "
                         "tools' make_pair.py, then cut_missing.py)")
    work = Path(tempfile.mkdtemp(prefix="forkflow-bench-team-", dir="/tmp"))
    work.chmod(0o755)
    cluster = Cluster(work / "pg", free_port()).init()
    figures: dict[str, Any] = {"pair": pair.name}
    try:
        first = Scenario(work, "clean", pair, cluster, args.max_batch)
        probe = first.clone("probe", "true")
        doc = json.loads(forkflow(probe, "status", "--json", "--commits").stdout)
        pending = [c["sha"] for c in doc["commits"] if c["disposition"] in ("PENDING", "DEFERRED")]
        until = pending[min(args.commits, len(pending)) - 1]
        figures["pending"], figures["until"] = len(pending), until[:12]
        shutil.rmtree(probe)

        rc, took, _ = first.ingest(first.clone("cron", l1_script(first.root, "count", 0, "true")), until)
        gates = int((first.root / "count.count").read_text().strip() or 0)
        figures["clean"] = {"exit": rc, "seconds": took, "l1_runs": gates, **first.state()}
        kill_at = args.kill_at or max(1, gates // 2)  # mid-run by default
        restart_at = args.restart_at or max(1, gates // 2)
        figures["kill_at"], figures["restart_at"] = kill_at, restart_at

        kill = Scenario(work, "kill", pair, cluster, args.max_batch)
        victim = kill.root / "cron-a"
        action = f"kill -9 $(head -1 {victim}/.git/forkflow-ingest.lock); sleep 5"
        rc, took, _ = kill.ingest(kill.clone("cron-a", l1_script(kill.root, "kill", kill_at, action)), until)
        after = kill.state()
        after["unpushed_in_killed_clone"] = len(git(victim, "rev-list", "origin/main..main").split())
        rc2, took2, _ = kill.ingest(kill.clone("ci-job-2", "true"), until)
        rerun = {"exit": rc2, "seconds": took2, **kill.state()}
        (kill.root / "kill.count").write_text("-1000\n")  # the killed clone again: no fault this time
        rc3, took3, _ = kill.ingest(victim, until)
        figures["kill"] = {"exit": rc, "seconds": took, "after_fault": after, "rerun": rerun,
                           "killed_clone_again": {"exit": rc3, "seconds": took3, **kill.state()}}

        restart = Scenario(work, "restart", pair, cluster, args.max_batch)
        rc, took, line = restart.ingest(
            restart.clone("cron-a", l1_script(restart.root, "restart", restart_at, cluster.ctl_command("restart"))),
            until)
        after = restart.state()
        rc2, took2, _ = restart.ingest(restart.clone("person-b", "true"), until)
        figures["restart"] = {"exit": rc, "seconds": took, "line": line, "after_fault": after,
                              "rerun": {"exit": rc2, "seconds": took2, **restart.state()}}
    finally:
        cluster.stop(check=False)
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    clean = figures["clean"]
    print(f"pair {figures['pair']}: {figures['pending']} pending; ingest --land --push --until {figures['until']}")
    print(f"clean run: exit {clean['exit']}, {clean['l1_runs']} L1 runs, {clean['trailers_on_shared']} landed on the shared branch, "
          f"{clean['picked_in_store']} PICKED in the store, invariant {'holds' if clean['holds'] else 'BROKEN'} "
          f"({clean['seconds']} s)")
    for name, what in (("kill", f"SIGKILL at L1 run {figures['kill_at']}"),
                       ("restart", f"PG restart at L1 run {figures['restart_at']}")):
        f = figures[name]
        a, r = f["after_fault"], f["rerun"]
        print(f"{what}: exit {f['exit']}; after it {a['picked_in_store']} PICKED, {a['trailers_on_shared']} on the shared "
              f"branch, {a['picked_not_on_shared']} picked-not-shared, {a['trailers_twice']} twice: invariant "
              f"{'holds' if a['holds'] else 'BROKEN'}")
        print(f"  fresh-clone re-run: exit {r['exit']}, {r['trailers_on_shared']} on the shared branch (clean run: "
              f"{clean['trailers_on_shared']}), {r['picked_in_store']} PICKED, invariant "
              f"{'holds' if r['holds'] else 'BROKEN'} ({r['seconds']} s)")
        if "unpushed_in_killed_clone" in a:
            k = f["killed_clone_again"]
            print(f"  the killed clone had {a['unpushed_in_killed_clone']} landed commit(s) it never pushed; run again "
                  f"after the fresh clone: exit {k['exit']}, {k['trailers_on_shared']} on the shared branch, "
                  f"{k['trailers_twice']} twice, invariant {'holds' if k['holds'] else 'BROKEN'}")
        if f.get("line"):
            print(f"  its one line: {f['line']}")


if __name__ == "__main__":
    os.environ.setdefault("GIT_TERMINAL_PROMPT", "0")
    main()
