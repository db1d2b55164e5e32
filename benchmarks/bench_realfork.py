"""forkflow against the naive baseline on a real (upstream, fork) pair, side by side.

    python benchmarks/bench_realfork.py PAIR [--json OUT]

PAIR is a folder made by the realfork tools (`make_pair.py`, then `cut_missing.py`): upstream.git,
downstream/ (the fork, remote `upstream`), fork.git (the fork with every blob).  Nothing in PAIR
is changed: both runs work on copies in a temporary folder.

The naive baseline is the realfork tools' `naive_baseline.py`, inlined: pick the pending upstream
commits in upstream order with `git merge-tree --write-tree` (merge-ort, one process per commit)
onto the fork's tip, skipping each that conflicts, committing each clean one.

forkflow: `forkflow init`, `[ingest] l1_command = "true"`, then `forkflow plan --json` on a fresh
store (cold) and `forkflow ingest --land --json` on another fresh store (end to end: status,
plan, picks, landing).  Printed: upstream commits landed by each, conflicts, held back (and how
many of them wait for a conflict), largest landing unit, wall time and commits/s, the ratios; the
baseline-clean commits forkflow holds back without naming a held-back dependency (should be 0);
conflict markers forkflow added (should be 0); and, for a sample of commits both pick cleanly
on the fork tip, whether forkflow's in-memory pick gives git's tree.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ENV = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@localhost",
           GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@localhost")
SAMPLE = 40  # clean picks whose trees are compared with git's
CPU: dict[str, float] = {}  # forkflow command -> CPU seconds of its last run


def git(repo: Path, *args: str, ok: tuple[int, ...] = (0,), inp: str | None = None) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(["git", "-C", str(repo), *args], input=inp, capture_output=True, text=True, env=ENV)
    if p.returncode not in ok:
        raise SystemExit(f"git {' '.join(args)}: {p.stderr}")
    return p


def baseline(fork_git: Path, pending: list[str]) -> dict[str, Any]:
    """Plain git in upstream order, skipping each conflict (the realfork naive baseline)."""
    tree = git(fork_git, "rev-parse", "main^{tree}").stdout.strip()
    head = git(fork_git, "rev-parse", "main").stdout.strip()
    rows: dict[str, str] = {}
    cpu0 = _children_cpu()
    t0 = time.perf_counter()
    for c in pending:
        parents = git(fork_git, "rev-list", "--parents", "-n1", c).stdout.split()[1:]
        if len(parents) != 1:
            rows[c] = "merge"
            continue
        x = git(fork_git, "commit-tree", tree, "-p", parents[0], "-m", "x").stdout.strip()
        p = git(fork_git, "merge-tree", "--write-tree", "--name-only", "--no-messages", x, c, ok=(0, 1))
        if p.returncode == 0:
            tree = p.stdout.split()[0]
            rows[c] = "clean"
            head = git(fork_git, "commit-tree", tree, "-p", head, "-m", f"pick\n\nUpstream-Commit: {c}").stdout.strip()
        else:
            rows[c] = "conflict"
    secs = time.perf_counter() - t0
    clean = sum(1 for s in rows.values() if s == "clean")
    return {"landed": clean, "conflicts": sum(1 for s in rows.values() if s == "conflict"),
            "seconds": round(secs, 1), "cpu_seconds": round(_children_cpu() - cpu0, 1),
            "per_s": round(len(pending) / secs, 1), "rows": rows}


def _children_cpu() -> float:
    """CPU seconds (user + system) of the processes this script waited for: on a loaded machine the
    fairer measure, as wall time there depends on what else runs."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def forkflow(down: Path, *args: str) -> tuple[float, dict[str, Any]]:
    exe = Path(sys.executable).parent / "forkflow"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "forkflow"]
    t0, cpu0 = time.perf_counter(), _children_cpu()
    p = subprocess.run([*cmd, *args, "--json", "--repo", str(down)], capture_output=True, text=True)
    took = time.perf_counter() - t0
    CPU[args[0]] = round(_children_cpu() - cpu0, 1)
    # ingest exits 4 when units wait on a person and 5 when one could not land (docs/automation.md)
    if p.returncode not in ((0, 4, 5) if args[0] == "ingest" else (0,)):
        raise SystemExit(f"forkflow {' '.join(args)} exited {p.returncode}: {p.stderr[-2000:]}")
    return took, json.loads(p.stdout)


def fresh_store(down: Path) -> None:
    shutil.rmtree(down / ".git" / "forkflow", ignore_errors=True)
    subprocess.run([sys.executable, "-m", "forkflow", "init", "--upstream", "upstream", "--repo", str(down)],
                   capture_output=True, check=True)


def same_trees(down: Path, fork_git: Path, base: str, shas: list[str]) -> tuple[int, int]:
    """(equal, compared): forkflow's in-memory pick of each commit onto `base` against git's merge-ort."""
    from forkflow.git.pick import MemoryPicker, PickStatus
    from forkflow.models import Sha

    picker = MemoryPicker(down)
    base_tree = picker.commit_tree(base)
    equal = compared = 0
    for sha in shas:
        step = picker.pick(base_tree, Sha(sha))
        parent = git(fork_git, "rev-parse", f"{sha}^").stdout.strip()
        x = git(fork_git, "commit-tree", base_tree, "-p", parent, "-m", "x").stdout.strip()
        p = git(fork_git, "merge-tree", "--write-tree", "--name-only", "--no-messages", x, sha, ok=(0, 1, 128))
        if p.returncode != 0 or step.status is not PickStatus.APPLIED:
            continue  # 128: git could not read a blob the snapshot lacks
        compared += 1
        equal += p.stdout.split()[0] == step.tree
    return equal, compared


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pair", type=Path)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    pair = args.pair.resolve()
    lacking = [name for name in ("upstream.git", "downstream", "fork.git") if not (pair / name).is_dir()]
    if lacking:
        raise SystemExit(f"bench_realfork: {pair} is not a realfork pair (no {', '.join(lacking)}); "
                         "build one with the realfork tools' make_pair.py and cut_missing.py")
    work = Path(tempfile.mkdtemp(prefix="forkflow-bench-realfork-"))
    try:
        for name in ("upstream.git", "downstream", "fork.git"):
            shutil.copytree(pair / name, work / name, symlinks=True)
        down, fork_git = work / "downstream", work / "fork.git"
        git(down, "remote", "set-url", "upstream", str(work / "upstream.git"))
        git(fork_git, "fetch", "-q", str(work / "upstream.git"), "main:refs/remotes/upstream/main")
        fresh_store(down)
        with (down / "forkflow.toml").open("a") as f:
            f.write('\n[ingest]\nl1_command = "true"\n')
        git(down, "update-index", "--assume-unchanged", "forkflow.toml", ok=(0, 128))
        tip = git(down, "rev-parse", "main").stdout.strip()

        plan_s, plan = forkflow(down, "plan")
        order = [e["sha"] for e in forkflow(down, "status", "--commits")[1]["commits"]
                 if e["disposition"] in ("PENDING", "DEFERRED")]
        base = baseline(fork_git, order)
        fresh_store(down)
        ingest_s, doc = forkflow(down, "ingest", "--land")

        units = doc["units"]
        landed = {s for u in units for s in u["picked"] + u["skipped"]}
        held = {h["sha"]: h for h in doc["held_back"]}
        conflicts = sum(1 for h in held.values() if h["waits_for"] is None)
        clean = {c for c, s in base["rows"].items() if s == "clean"}
        unnamed = sorted(c for c in clean - landed if not (held.get(c) or {}).get("waits_for"))
        largest = max((len(u["picked"]) + len(u["skipped"]) for u in units), default=0)
        new_tip = git(down, "rev-parse", "main").stdout.strip()
        markers = sum(1 for line in git(down, "diff", tip, new_tip).stdout.splitlines()
                      if line.startswith(("+<<<<<<< ", "+>>>>>>> ")))
        both = [c for c in order if c in clean and c in landed][:SAMPLE]
        equal, compared = same_trees(down, fork_git, tip, both)
        figures = {
            "pair": pair.name, "pending": len(order),
            "forkflow": {"landed": len(landed), "conflicts": conflicts, "held_back": len(held),
                         "held_waiting_for_a_conflict": len(held) - conflicts, "largest_unit": largest,
                         "units": len(units), "plan_seconds_cold": round(plan_s, 1),
                         "plan_units": len(plan["units"]), "ingest_seconds": round(ingest_s, 1),
                         "plan_cpu_seconds": CPU["plan"], "ingest_cpu_seconds": CPU["ingest"],
                         "per_s": round(len(order) / ingest_s, 1), "conflict_markers_added": markers},
            "baseline": {k: v for k, v in base.items() if k != "rows"},
            "baseline_clean_held_without_a_named_dependency": unnamed,
            "baseline_clean_not_landed": {c: held.get(c) for c in order if c in clean - landed},
            "landed_not_baseline_clean": sorted(landed - clean),
            "order": order, "baseline_rows": base["rows"], "forkflow_landed": sorted(landed),
            "clean_pick_trees_equal_to_git": f"{equal}/{compared}",
            "ratios": {"landed": round(len(landed) / max(1, base["landed"]), 3),
                       "speed": round(base["seconds"] / ingest_s, 2),
                       "cpu": round(base["cpu_seconds"] / max(0.1, CPU["ingest"]), 2)},
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    f, b = figures["forkflow"], figures["baseline"]
    print(f"pair {figures['pair']}: {figures['pending']} pending upstream commits")
    print(f"{'':34}{'forkflow':>12}{'naive baseline':>16}{'ratio':>8}")
    print(f"{'upstream commits landed':34}{f['landed']:>12}{b['landed']:>16}{figures['ratios']['landed']:>8}")
    print(f"{'conflicts':34}{f['conflicts']:>12}{b['conflicts']:>16}")
    held_text = f"{f['held_back']} ({f['held_waiting_for_a_conflict']})"
    print(f"{'held back (waiting for a conflict)':34}{held_text:>12}")
    print(f"{'largest landing unit':34}{f['largest_unit']:>12}{1:>16}")
    print(f"{'wall time, s':34}{f['ingest_seconds']:>12}{b['seconds']:>16}{figures['ratios']['speed']:>8}")
    print(f"{'upstream commits/s':34}{f['per_s']:>12}{b['per_s']:>16}")
    print(f"{'CPU time, s':34}{f['ingest_cpu_seconds']:>12}{b['cpu_seconds']:>16}{figures['ratios']['cpu']:>8}")
    print(f"plan (cold): {f['plan_seconds_cold']} s ({f['plan_cpu_seconds']} s CPU); conflict markers added: {f['conflict_markers_added']}; "
          f"clean-pick trees equal to git's: {figures['clean_pick_trees_equal_to_git']}")
    print(f"baseline-clean commits held back without naming a dependency: "
          f"{len(figures['baseline_clean_held_without_a_named_dependency'])}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
