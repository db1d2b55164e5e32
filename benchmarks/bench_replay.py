"""`forkflow replay` on a real fork: the series real vs forkflow, lag saved, agreement, wall time.

    python benchmarks/bench_replay.py REPO [--since 2026-01-05 --until 2026-04-27 --every week]
                                           [--independent [--jobs 2]]

REPO is a fork checkout with an `upstream` remote (for example a clone of a realfork pair's
`fork.git`, whose history names no missing blob, with the pair's `upstream.git` as `upstream`).
The first run starts from an empty replay cache; the second is the re-run.  Prints a
Markdown table of the series and the figures for docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def forkflow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "forkflow"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "forkflow"]
    return subprocess.run([*cmd, *args], cwd=cwd, capture_output=True, text=True)


def fresh(repo: Path) -> None:
    """Forget earlier replays: the scratch repository and store, and the replay cache."""
    shutil.rmtree(repo / ".git" / "forkflow" / "replay", ignore_errors=True)
    db = repo / ".git" / "forkflow" / "forkflow.db"
    if db.exists():
        with sqlite3.connect(db) as c:
            tables = {r[0] for r in c.execute("select name from sqlite_master where type='table'")}
            for t in ("replay_cache", "replay_runs"):
                if t in tables:
                    c.execute(f"delete from {t}")


def cpu_children() -> float:
    """User + system seconds of every child process waited for so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(repo: Path, args: argparse.Namespace, html: Path | None) -> tuple[float, dict[str, Any]]:
    cmd = ["replay", "--since", args.since, "--until", args.until, "--every", args.every, "--json"]
    cmd += ["--independent", "--jobs", str(args.jobs)] if args.independent else []
    cmd += ["--html", str(html)] if html else []
    t0 = time.perf_counter()
    p = forkflow(*cmd, cwd=repo)
    took = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(p.stderr)
    return took, json.loads(p.stdout)


def table(doc: dict[str, Any]) -> str:
    rows = ["| step | days behind: real | forkflow | by picks | backlog: real | forkflow | by picks "
            "| at the real point | open: real | forkflow | landed | deferred | waiting "
            "| fork commits carried (forced, left out) | s |", "|---" * 15 + "|"]
    for s in doc["steps"]:
        r, a = s["real"], s["after"]
        same = s.get("same_rule") or a
        rows.append(f"| {s['at_iso'][:10]} | {r['days_behind']:.1f} | {a['days_behind']:.1f} "
                    f"| {same['days_behind']:.1f} | {r['backlog']} | {a['backlog']} | {same['backlog']} "
                    f"| {s.get('backlog_at_real_point', -1)} "
                    f"| {r['open']} | {a['open']} | {len(s['landed'])} | {s['deferred']} | {s['waiting']} "
                    f"| {s.get('fork_applied', 0)} ({s.get('fork_forced', 0)}, {s.get('fork_left_out', 0)}) "
                    f"| {s['seconds']:.0f} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repo", type=Path)
    ap.add_argument("--since", default="2026-01-05")
    ap.add_argument("--until", default="2026-04-27")
    ap.add_argument("--every", default="week")
    ap.add_argument("--independent", action="store_true", help="each step from the real fork (not carried)")
    ap.add_argument("--jobs", type=int, default=1, help="with --independent: steps at once")
    ap.add_argument("--html", type=Path)
    ap.add_argument("--keep-cache", action="store_true", help="do not clear earlier replays first")
    args = ap.parse_args()
    repo = args.repo.resolve()
    if not (repo / "forkflow.toml").exists():
        p = forkflow("init", "--upstream", "upstream", cwd=repo)
        if p.returncode != 0:
            raise SystemExit(p.stderr)
    if not args.keep_cache:
        fresh(repo)
    load = os.getloadavg()
    cpu0 = cpu_children()
    first_s, doc = run(repo, args, args.html)
    first_cpu = cpu_children() - cpu0
    again_s, again = run(repo, args, None)
    m = doc["summary"]
    print(table(doc))
    print()
    print(json.dumps({"summary": m, "first_run_s": round(first_s, 1), "first_run_cpu_s": round(first_cpu, 1),
                      "rerun_s": round(again_s, 1),
                      "rerun_cached_steps": sum(1 for s in again["steps"] if s["cached"]),
                      "steps": len(doc["steps"]), "jobs": args.jobs, "cpus": os.cpu_count(),
                      "load_before": [round(x, 2) for x in load],
                      "load_after": [round(x, 2) for x in os.getloadavg()],
                      "step_seconds": [s["seconds"] for s in doc["steps"]],
                      "notes": doc["notes"]}, indent=1))


if __name__ == "__main__":
    main()
