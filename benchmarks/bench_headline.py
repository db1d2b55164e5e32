"""Days behind on a real (upstream, fork) pair, next to the fork's own point read by the same rule.

    python benchmarks/bench_headline.py PAIR [PAIR ...] [--scratch DIR]

PAIR is a folder made by realfork's `make_pair.py` (upstream.git, downstream/, ground_truth.json,
pair.json).  The pair is never modified: its fork is copied into a scratch folder, where
`forkflow init`, `status --json --commits`, `ingest --land` (L1 gate `true`) and `status --json`
run.

The rule the fork's own point is read with (as `bench_ledger_real.py` reads it): the newest
upstream commit with at least 95% of the commits up to it handled, where handled is what the
ground truth says the fork had taken at D (every upstream commit after the fork point that
ground_truth.json does not list), or what the fork's own messages listed as deferred or skipped by
D; days behind = upstream tip's date minus that commit's (the fork point's without one).

(a) the fork as it is: forkflow's days behind next to the rule on the ground truth; they must agree.
(b) after `forkflow ingest --land`: forkflow's days behind next to the same rule applied to the new
    branch, read from git alone: handled is (a)'s, plus every upstream commit a new commit names in
    an `Upstream-Commit:` trailer, plus every commit whose pick onto the new tip changes nothing
    (git's three-way file merge gives the new tip's files back: already applied; forkflow skips them
    as empty); and, where forkflow recorded them SKIPPED (decisions, not facts of the tree: a
    commit forkflow keeps open for a person stays open here too), those git confirms as changing
    only such files and files the fork had deleted before the run (moot; counted apart), or as
    settled by a revert (an open upstream commit that an upstream commit reverts, and that revert
    when open).  A pick the fork backed out is open again, as forkflow counts it.  They must agree.  Beside
    them, what forkflow's headline shows: the oldest open commit, open conflicts, and days behind
    were the held commits deferred (the figure `status` gave before, 0.0).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ENV = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@localhost",
           GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@localhost")
THRESHOLD = 0.95


def git(repo: Path, *args: str, ok: tuple[int, ...] = (0,)) -> str:
    p = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=ENV)
    if p.returncode not in ok:
        raise SystemExit(f"git {' '.join(args)}: {p.stderr[-2000:]}")
    return p.stdout


def forkflow(repo: Path, *args: str, ok: tuple[int, ...] = (0,)) -> dict[str, Any]:
    exe = Path(sys.executable).parent / "forkflow"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "forkflow"]
    p = subprocess.run([*cmd, *args, "--json", "--repo", str(repo)], capture_output=True, text=True, cwd=repo, env=ENV)
    if p.returncode not in ok:
        raise SystemExit(f"forkflow {' '.join(args)} exited {p.returncode}: {p.stderr[-2000:]}")
    return json.loads(p.stdout)  # type: ignore[no-any-return]


def prepare(pair: Path, scratch: Path) -> Path:
    """A copy of the pair's fork (objects shared through alternates), `upstream` pointing at a copy
    of the pair's upstream, forkflow initialised with an L1 gate that passes."""
    work = scratch / pair.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for name in ("upstream.git", "downstream"):
        shutil.copytree(pair / name, work / name, symlinks=True)
    down = work / "downstream"
    git(down, "remote", "set-url", "upstream", str(work / "upstream.git"))
    git(down, "fetch", "-q", "upstream")
    shutil.rmtree(down / ".git" / "forkflow", ignore_errors=True)
    subprocess.run([sys.executable, "-m", "forkflow", "init", "--upstream", "upstream", "--repo", str(down)],
                   capture_output=True, check=True, cwd=down, env=ENV)
    with (down / "forkflow.toml").open("a") as f:
        f.write('\n[ingest]\nl1_command = "true"\n')
    git(down, "update-index", "--assume-unchanged", "forkflow.toml", ok=(0, 128))
    return down


def rule_days(commits: list[dict[str, Any]], handled: set[str], tip_date: int, fork_point_date: int) -> tuple[float, str]:
    """Days behind by the rule (module docstring), and the point's sha ('' for the fork point)."""
    best: dict[str, Any] | None = None
    n = 0
    for i, c in enumerate(commits):
        if c["sha"] in handled:
            n += 1
            if n >= THRESHOLD * (i + 1):
                best = c
    at = unix(best["date"]) if best else fork_point_date
    return round(max(0, tip_date - at) / 86400, 2), best["sha"] if best else ""


def unix(iso: str) -> int:
    from datetime import datetime
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp())


def trailers(down: Path, old: str, new: str) -> set[str]:
    out = git(down, "log", "--format=%B", f"{old}..{new}")
    return {line.split()[1] for line in out.splitlines() if line.startswith("Upstream-Commit: ") and len(line.split()) > 1}


REVERTS = re.compile(r"This reverts commit ([0-9a-f]{7,40})")


def reverted(down: Path, open_shas: set[str], all_shas: set[str]) -> set[str]:
    """Open upstream commits an upstream commit reverts (the pair changes nothing together), with
    that revert when it is open too.  (A pick the fork backed out is open again: not counted.)"""
    out: set[str] = set()
    for sha in all_shas:
        body = git(down, "show", "-s", "--format=%B", sha)
        for r in REVERTS.findall(body):
            match = [o for o in open_shas if o.startswith(r)]
            if match:
                out.update(match)
                if sha in open_shas:
                    out.add(sha)
    return out


def _blob(down: Path, rev: str, path: str) -> str | None:
    p = subprocess.run(["git", "-C", str(down), "rev-parse", "-q", "--verify", f"{rev}:{path}"],
                       capture_output=True, text=True, env=ENV)
    return p.stdout.strip() if p.returncode == 0 else None


def already_applied(down: Path, tip: str, shas: list[str], old_tip: str, fork_point: str) -> tuple[set[str], set[str]]:
    """The commits whose change the tip already has: for each file the commit changes, git's own
    three-way file merge (`git merge-file`: base = the commit's parent, ours = the tip, theirs = the
    commit) gives the tip's file back, so picking it changes nothing; and, apart, those of them that
    change files the fork had deleted before the run (there at the fork point, absent at `old_tip`
    and at the tip): a change to a file the fork removed is moot, whatever its content."""
    out: set[str] = set()
    moot: set[str] = set()
    tmp = Path(tempfile.mkdtemp(prefix="ff-bench-headline-merge-"))
    try:
        for sha in shas:
            paths = git(down, "diff-tree", "--no-commit-id", "--no-renames", "-r", "--name-only", f"{sha}^", sha).split("\n")
            verdicts = [_applied(down, tmp, tip, sha, p, old_tip, fork_point) for p in paths if p]
            if verdicts and all(verdicts):
                out.add(sha)
                if "deleted" in verdicts:
                    moot.add(sha)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out, moot


def _applied(down: Path, tmp: Path, tip: str, sha: str, path: str, old_tip: str, fork_point: str) -> str:
    """'same' or 'merged' when the tip has the commit's change to the file, 'deleted' when the fork
    had deleted the file the commit changes, '' otherwise."""
    base, theirs, ours = _blob(down, f"{sha}^", path), _blob(down, sha, path), _blob(down, tip, path)
    if theirs == ours:
        return "same"  # the same content, or deleted on both
    if ours is None and base is not None and theirs is not None and _blob(down, old_tip, path) is None \
            and _blob(down, fork_point, path) is not None:
        return "deleted"
    if base is None or theirs is None or ours is None:
        return ""
    files = []
    for name, blob in (("ours", ours), ("base", base), ("theirs", theirs)):
        f = tmp / name
        f.write_bytes(subprocess.run(["git", "-C", str(down), "cat-file", "blob", blob], capture_output=True,
                                     check=True).stdout)
        files.append(str(f))
    merged = subprocess.run(["git", "merge-file", "-p", *files], capture_output=True)
    return "merged" if merged.returncode == 0 and merged.stdout == (tmp / "ours").read_bytes() else ""


def measure(pair: Path, scratch: Path) -> dict[str, Any]:
    meta = json.loads((pair / "pair.json").read_text())
    gt = json.loads((pair / "ground_truth.json").read_text())
    not_taken = {g["upstream_sha"] for g in gt}
    declared = {g["upstream_sha"] for g in gt
                if any(day <= meta["date"][:10] for _, day in g["listed_in_fork_messages"])}
    down = prepare(pair, scratch)
    fork_point_date = int(git(down, "show", "-s", "--format=%ct", meta["fork_point"]).strip())
    before = forkflow(down, "status", "--commits")
    commits = before["commits"]
    tip_date = unix(before["upstream_tip"]["date"])
    handled = ({c["sha"] for c in commits} - not_taken) | declared
    truth_a, point_a = rule_days(commits, handled, tip_date, fork_point_date)
    old_tip = git(down, "rev-parse", "main").strip()
    t0 = time.perf_counter()
    ingest = forkflow(down, "ingest", "--land", ok=(0, 4, 5))
    ingest_s = time.perf_counter() - t0
    after = forkflow(down, "status", "--commits")
    # a moot change or a revert is a decision, not a fact of the tree: counted where forkflow made
    # it (and git confirms it), never where forkflow keeps the commit open for a person
    skipped = {c["sha"] for c in after["commits"] if c["disposition"] == "SKIPPED"}
    new_tip = git(down, "rev-parse", "main").strip()
    landed = trailers(down, old_tip, new_tip)
    rest = [c["sha"] for c in commits if c["sha"] not in handled and c["sha"] not in landed]
    empty, moot = already_applied(down, new_tip, rest, old_tip, meta["fork_point"])
    empty -= moot - skipped
    moot &= skipped
    reverts = (reverted(down, set(rest) - empty, {c["sha"] for c in commits}) & skipped) - handled - landed - empty
    truth_b, point_b = rule_days(commits, handled | landed | empty | reverts, tip_date, fork_point_date)
    h = after["headline"]
    return {
        "pair": pair.name, "date": meta["date"][:10], "upstream_commits": len(commits),
        "a_fork_as_is": {"forkflow_days_behind": before["days_behind"], "rule_days_behind": truth_a,
                         "agree": before["days_behind"] == truth_a,
                         "forkflow_point": before["ingestion_point"]["sha"][:12], "rule_point": point_a[:12]},
        "b_after_ingest_land": {
            "forkflow_days_behind": after["days_behind"], "rule_days_behind": truth_b,
            "agree": after["days_behind"] == truth_b,
            "forkflow_point": after["ingestion_point"]["sha"][:12], "rule_point": point_b[:12],
            "landed_by_trailer": len(landed), "already_applied": len(empty),
            "of_them_changing_files_the_fork_deleted": len(moot), "settled_by_a_revert": len(reverts),
            "oldest_open": h["oldest_open"], "open_commits": h["open_commits"], "held_commits": h["held_commits"],
            "open_conflicts": h["open_conflicts"], "if_deferred_days": h["if_deferred"]["days_behind"],
            "ingest_seconds": round(ingest_s, 1), "ingest_units": len(ingest.get("units", [])),
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="+", type=Path)
    ap.add_argument("--scratch", type=Path, default=None)
    args = ap.parse_args()
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="ff-bench-headline-"))
    scratch.mkdir(parents=True, exist_ok=True)
    for pair in args.pairs:
        print(json.dumps(measure(pair.resolve(), scratch), indent=1), flush=True)


if __name__ == "__main__":
    main()
