"""forkflow against the naive baseline on a real (upstream, fork) pair, side by side.

    python benchmarks/bench_realfork.py PAIR [--json OUT] [--gate-sleep S] [--runners N]
                                            [--seed-failures K] [--max-batch W] [--tree DIR]

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

The L1 gate: `true` by default.  `--gate-sleep S` makes it a command that sleeps S seconds;
`--seed-failures K` picks K upstream commits the baseline picks cleanly (spread over the backlog)
and makes the gate fail every candidate that carries one (an `Upstream-Commit:` trailer between
FORKFLOW_BASE and FORKFLOW_REV).  Every run of the gate writes its start, end and revision to a
log, from which come the gate runs, the gate-seconds (their sum) and the gate wall (their union).
`--runners N` and `--max-batch W` set `[ingest] runners` and `max_batch`; `--tree DIR` runs the
forkflow of another checkout (say, an older commit's `git worktree`), which gets neither key when
it has no landing queue (`forkflow/landing/queue.py`).
The naive baseline's gate is one run per clean commit, one after the other: S x clean seconds.
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


TREE: list[Path] = []  # the forkflow checkout to run, when not this one


def forkflow(down: Path, *args: str) -> tuple[float, dict[str, Any]]:
    exe = Path(sys.executable).parent / "forkflow"
    cmd = [str(exe)] if exe.exists() and not TREE else [sys.executable, "-m", "forkflow"]
    env = dict(os.environ, PYTHONPATH=str(TREE[0])) if TREE else None
    t0, cpu0 = time.perf_counter(), _children_cpu()
    # run from the fork's folder: `python -m` puts the working folder before PYTHONPATH
    p = subprocess.run([*cmd, *args, "--json", "--repo", str(down)], capture_output=True, text=True, env=env,
                       cwd=down)
    took = time.perf_counter() - t0
    CPU[args[0]] = round(_children_cpu() - cpu0, 1)
    # ingest exits 4 when units wait on a person and 5 when one could not land (docs/automation.md)
    if p.returncode not in ((0, 4, 5) if args[0] == "ingest" else (0,)):
        raise SystemExit(f"forkflow {' '.join(args)} exited {p.returncode}: {p.stderr[-2000:]}")
    return took, json.loads(p.stdout)


def fresh_store(down: Path) -> None:
    shutil.rmtree(down / ".git" / "forkflow", ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(TREE[0])) if TREE else None
    subprocess.run([sys.executable, "-m", "forkflow", "init", "--upstream", "upstream", "--repo", str(down)],
                   capture_output=True, check=True, env=env, cwd=down)


def gate_command(log: Path, sleep: float, seeded: list[str]) -> str:
    """The L1 command: log the run, sleep, fail a candidate that carries a seeded commit."""
    script = log.with_suffix(".sh")
    check = ""
    if seeded:
        pattern = "|".join(seeded)
        check = (f'if git log --format=%B "$FORKFLOW_BASE..$FORKFLOW_REV" | grep -qE "^Upstream-Commit: ({pattern})"; '
                 "then rc=1; fi\n")
    script.write_text("#!/bin/sh\nstart=$(date +%s.%N)\nrc=0\n"
                      + (f"sleep {sleep}\n" if sleep > 0 else "") + check
                      + f'echo "$start $(date +%s.%N) $FORKFLOW_REV $rc" >> {log}\nexit $rc\n')
    return f"sh {script}"


def gate_figures(log: Path) -> dict[str, Any]:
    """Runs, gate-seconds (their sum) and gate wall (the union of their intervals) from the gate log."""
    rows = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
    spans = sorted((float(r[0]), float(r[1])) for r in rows)
    union, end = 0.0, float("-inf")
    for a, b in spans:
        if b > end:
            union += b - max(a, end)
            end = b
    return {"gate_runs": len(rows), "gate_seconds": round(sum(b - a for a, b in spans), 1),
            "gate_wall_seconds": round(union, 1), "red_runs": sum(1 for r in rows if r[3] != "0")}


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
    ap.add_argument("--gate-sleep", type=float, default=0.0, help="seconds each L1 run sleeps (default: none)")
    ap.add_argument("--runners", type=int, default=1, help="[ingest] runners")
    ap.add_argument("--seed-failures", type=int, default=0, help="upstream commits made to fail L1")
    ap.add_argument("--max-batch", type=int, default=0, help="[ingest] max_batch (default: forkflow's)")
    ap.add_argument("--tree", type=Path, help="run the forkflow of this checkout instead")
    args = ap.parse_args()
    if args.tree:
        TREE.append(args.tree.resolve())
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
        tip = git(down, "rev-parse", "main").stdout.strip()

        plan_s, plan = forkflow(down, "plan")
        order = [e["sha"] for e in forkflow(down, "status", "--commits")[1]["commits"]
                 if e["disposition"] in ("PENDING", "DEFERRED")]
        base = baseline(fork_git, order)
        clean_order = [c for c in order if base["rows"][c] == "clean"]
        k = args.seed_failures
        seeded = [clean_order[(i + 1) * len(clean_order) // (k + 1)] for i in range(k)] if k else []
        fresh_store(down)
        gate_log = work / "gate.log"
        l1 = "true" if args.gate_sleep <= 0 and not seeded else gate_command(gate_log, args.gate_sleep, seeded)
        if l1 == "true":  # still counted: a run is a line
            l1 = gate_command(gate_log, 0, [])
        queue = not TREE or (TREE[0] / "forkflow" / "landing" / "queue.py").exists()  # a tree that reads the keys
        keys = f"runners = {args.runners}\n" + (f"max_batch = {args.max_batch}\n" if args.max_batch else "") if queue else ""
        with (down / "forkflow.toml").open("a") as f:
            f.write(f"\n[ingest]\nl1_command = {json.dumps(l1)}\n{keys}")
        git(down, "update-index", "--assume-unchanged", "forkflow.toml", ok=(0, 128))
        ingest_s, doc = forkflow(down, "ingest", "--land")
        gates = gate_figures(gate_log)
        held_seeded = [c for c in seeded if c not in {s for u in doc["units"] for s in u["picked"]}]

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
                         "per_s": round(len(order) / ingest_s, 1), "conflict_markers_added": markers, **gates,
                         "projected_wall_seconds_at_60s_gate": round(
                             ingest_s - gates["gate_wall_seconds"] + gates["gate_wall_seconds"] * 60 / args.gate_sleep, 1)
                         if args.gate_sleep > 0 else None},
            "gate": {"sleep_s": args.gate_sleep, "runners": args.runners, "tree": str(TREE[0]) if TREE else "this",
                     "seeded": seeded, "seeded_held": held_seeded,
                     "seeded_landed": [c for c in seeded if c not in held_seeded]},
            "baseline": {**{k: v for k, v in base.items() if k != "rows"}, "gate_runs": base["landed"],
                         "gate_seconds": round(base["landed"] * args.gate_sleep, 1)},
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
    print(f"{'L1 gate runs':34}{f['gate_runs']:>12}{b['gate_runs']:>16}")
    print(f"{'L1 gate-seconds (sum; wall)':34}{str(f['gate_seconds']) + '; ' + str(f['gate_wall_seconds']):>12}"
          f"{b['gate_seconds']:>16}")
    g = figures["gate"]
    print(f"gate: sleep {g['sleep_s']} s, runners {g['runners']}, forkflow of {g['tree']}; "
          f"red runs {f['red_runs']}; seeded to fail {len(g['seeded'])}, held {len(g['seeded_held'])}, "
          f"landed {len(g['seeded_landed'])}")
    if f["projected_wall_seconds_at_60s_gate"] is not None:
        print(f"wall time with a 60 s gate (the gate wall scaled by 60/{g['sleep_s']}): "
              f"{f['projected_wall_seconds_at_60s_gate']} s")
    print(f"baseline-clean commits held back without naming a dependency: "
          f"{len(figures['baseline_clean_held_without_a_named_dependency'])}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
