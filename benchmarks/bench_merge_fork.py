"""forkflow on a fork that merges upstream: Intel's intel-xpu-backend-for-triton against upstream Triton.

    python benchmarks/bench_merge_fork.py [--realfork DIR] [--since 2026-01-05] [--until 2026-04-30]
                                          [--ingest-dates 2026-02-02,2026-02-16,2026-03-16,2026-03-30,2026-04-20,2026-04-27]
                                          [--replay-since 2026-03-02] [--json FILE]

DIR (default /work/realfork) holds realfork's `work/comb.git` (extract.py: `refs/intel/main`, and
`refs/upstream/main`, upstream Triton's main recovered as the first-parent chain of the second
parents of Intel's `Merge commit '<sha>'` merges).  For a date D this builds a pair under
DIR/intel_MMDD (objects borrowed through `objects/info/alternates`, nothing copied):

* `upstream.git`: bare, `main` = newest commit of upstream's first-parent chain dated <= D;
* `downstream`: Intel's fork, `main` = newest first-parent commit of Intel's main dated <= D,
  remote `upstream` at the same commit as upstream.git's main; no checkout.

Truth comes from git and the merges, not from forkflow: at time T the fork is its first-parent
commit F_T, upstream its first-parent commit U_T; pending = upstream commits after the merge base
of F_T and U_T, up to U_T, minus those the fork cherry-picked (a fork commit of its own with the
same `git patch-id --stable`, or whose subject carries the upstream subject with its PR number);
days behind = U_T's date minus the date of the newest upstream commit up to which every commit is
merged or cherry-picked (the merge base, unless picks follow right after it).

Figures: weekly `history --backfill` vs truth, `status` wall time, and merge-mode `ingest --land`
(`l1_command = "true"`: merge-ability only) at each ingest date: the newest cleanly mergeable
upstream commit its search found, next to the one `git merge-tree --write-tree` of every pending
commit in order finds, the merge trials it used, its wall time, the commit it merged up to (one
further where the resolvers settled the next conflict) and, for a clean merge, whether its tree
is the tree `git merge` makes of the same commit.  No date after --until is read.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any


def git(*args: str, cwd: Path | None = None, gitdir: Path | None = None, check: bool = True) -> str:
    cmd = ["git"] + ([f"--git-dir={gitdir}"] if gitdir else []) + list(args)
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, errors="replace")
    if check and p.returncode != 0:
        raise RuntimeError(f"git {' '.join(args[:3])}: {p.stderr[-500:]}")
    return p.stdout


def forkflow(*args: str, cwd: Path, ok: tuple[int, ...] = (0,)) -> tuple[int, str, float]:
    exe = Path(sys.executable).parent / "forkflow"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "forkflow"]
    t0 = time.monotonic()
    p = subprocess.run([*cmd, *args], cwd=cwd, capture_output=True, text=True)
    took = time.monotonic() - t0
    if p.returncode not in ok:
        sys.exit(f"forkflow {' '.join(args)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return p.returncode, p.stdout, took


def end_of(day: str) -> int:
    d = datetime.fromisoformat(day).replace(tzinfo=timezone.utc)
    return int((d + timedelta(days=1)).timestamp()) - 1


def at(comb: Path, ref: str, t: int) -> str:
    return git("rev-list", "-1", "--first-parent", f"--before={t}", ref, gitdir=comb).strip()


# -- pairs ------------------------------------------------------------------------------------
def make_pair(comb: Path, out: Path, day: str) -> dict[str, Any]:
    """The Intel pair as of `day` (see the module); rebuilt from scratch each time (seconds)."""
    t = end_of(day)
    up, fork = at(comb, "refs/upstream/main", t), at(comb, "refs/intel/main", t)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    objects = [str(comb / "objects")] + [
        line for line in (comb / "objects/info/alternates").read_text().splitlines() if line]
    ug, dg = out / "upstream.git", out / "downstream"
    git("init", "-q", "--bare", "-b", "main", str(ug))
    git("init", "-q", "-b", "main", str(dg))
    for g in (ug, dg / ".git"):
        (g / "objects/info/alternates").write_text("".join(o + "\n" for o in objects))
    git("update-ref", "refs/heads/main", up, gitdir=ug)
    git("update-ref", "refs/heads/main", fork, gitdir=dg / ".git")
    git("symbolic-ref", "HEAD", "refs/heads/not-checked-out", gitdir=dg / ".git")
    info = {"date": day, "cut": t, "upstream": up, "fork": fork,
            "merge_base": git("merge-base", fork, up, gitdir=ug).strip()}
    (out / "pair.json").write_text(json.dumps(info, indent=1))
    return info


def scratch_clone(pair: Path, scratch: Path) -> Path:
    """A throw-away clone of the pair's fork (no checkout), forkflow initialised on it."""
    repo = scratch / pair.name
    if repo.exists():
        shutil.rmtree(repo)
    git("clone", "-q", "--shared", "--no-checkout", "--branch", "main", str(pair / "downstream"), str(repo))
    git("symbolic-ref", "HEAD", "refs/heads/not-checked-out", cwd=repo)
    forkflow("init", "--upstream", str(pair / "upstream.git"), cwd=repo)
    with (repo / "forkflow.toml").open("a", encoding="utf-8") as f:
        f.write('\n[ingest]\nl1_command = "true"\n')
    return repo


# -- truth ------------------------------------------------------------------------------------
PR = re.compile(r"\(#(\d+)\)\s*$")


def patch_ids(repo: Path, shas: list[str]) -> dict[str, str]:
    if not shas:
        return {}
    diff = subprocess.run(["git", "diff-tree", "--stdin", "-r", "-p", "--no-renames"], cwd=repo,
                          input=("\n".join(shas) + "\n").encode(), capture_output=True).stdout
    raw = subprocess.run(["git", "patch-id", "--stable"], cwd=repo, input=diff, capture_output=True).stdout
    return {sha: pid for pid, sha in (line.split() for line in raw.decode().splitlines())}


def truth_at(repo: Path, fork_ref: str, up_ref: str, t: int) -> dict[str, Any] | None:
    f = git("rev-list", "-1", "--first-parent", f"--before={t}", fork_ref, cwd=repo).strip()
    u = git("rev-list", "-1", "--first-parent", f"--before={t}", up_ref, cwd=repo).strip()
    if not f or not u:
        return None
    mb = git("merge-base", f, u, cwd=repo).strip()
    pending = git("rev-list", "--reverse", u, f"^{f}", cwd=repo).split()
    # a pick of a pending commit is committed after that commit was written
    oldest = min((int(x) for x in git("log", "--no-walk", "--format=%at", *pending, cwd=repo).split()),
                 default=t) if pending else t
    own = [line.split(" ", 1) for line in git("log", "--no-merges", f"--since={oldest}", "--format=%H %s", f,
                                              f"^{u}", cwd=repo).splitlines() if " " in line]
    subjects = dict(line.split(" ", 1) for line in git("log", "--no-walk=unsorted", "--format=%H %s", *pending,
                                                      cwd=repo).splitlines()) if pending else {}
    ids = patch_ids(repo, pending + [s for s, _ in own])
    own_ids = {ids[s] for s, _ in own if s in ids}
    picked = set()
    for u_sha in pending:
        subj = subjects.get(u_sha, "")
        m = PR.search(subj)
        title = PR.sub("", subj).strip()
        if ids.get(u_sha) in own_ids or (m and any(title in s and f"(#{m.group(1)})" in s for _, s in own)):
            picked.add(u_sha)
    point = mb
    for u_sha in pending:  # the point moves over picks right after the merge base
        if u_sha not in picked:
            break
        point = u_sha
    date = int(git("log", "-1", "--format=%ct", u, cwd=repo))
    pdate = int(git("log", "-1", "--format=%ct", point, cwd=repo))
    return {"fork": f, "upstream": u, "merge_base": mb, "pending": len(pending) - len(picked),
            "picked": len(picked), "days_behind": round(max(0, date - pdate) / 86400.0, 2)}


# -- figures ----------------------------------------------------------------------------------
def backfill_vs_truth(repo: Path, since: str, until: str) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from forkflow.context import open_context
    from forkflow.ledger.history import backfill

    ctx = open_context(repo)
    start = datetime.fromisoformat(since).replace(tzinfo=timezone.utc)
    stop = datetime.fromtimestamp(end_of(until), timezone.utc)
    t0 = time.monotonic()
    snaps = backfill(ctx.repo, ctx.config, ctx.store, ctx.fork_id, start, "week", until=stop)
    took = time.monotonic() - t0
    rows = []
    for s in snaps:
        tr = truth_at(repo, ctx.config.fork_ref, ctx.config.upstream_ref, int(s.taken_at.timestamp()))
        assert tr is not None
        rows.append({"week": s.taken_at.date().isoformat(), "days_behind": s.days_behind,
                     "truth_days": tr["days_behind"], "pending": s.counts["pending"], "truth_pending": tr["pending"],
                     "picked_after_merge_base": tr["picked"],
                     "exact": s.days_behind == tr["days_behind"] and s.counts["pending"] == tr["pending"]})
    return {"weeks": rows, "exact": sum(r["exact"] for r in rows), "of": len(rows), "seconds": round(took, 1)}


def exhaustive(repo: Path, base: str, chain: list[str]) -> tuple[int, int, float]:
    """(newest clean index, last index before the first conflict, seconds) by trying every commit."""
    t0 = time.monotonic()
    newest, boundary = -1, None
    for i, sha in enumerate(chain):
        rc = subprocess.run(["git", "merge-tree", "--write-tree", base, sha], cwd=repo, capture_output=True).returncode
        if rc == 0:
            newest = i
        elif boundary is None:
            boundary = i - 1
    return newest, (len(chain) - 1 if boundary is None else boundary), time.monotonic() - t0


def ingest_at(comb: Path, root: Path, scratch: Path, day: str) -> dict[str, Any]:
    pair = root / f"intel_{day[5:7]}{day[8:10]}"
    info = make_pair(comb, pair, day)
    repo = scratch_clone(pair, scratch)
    base = git("rev-parse", "main", cwd=repo).strip()
    chain = git("rev-list", "--first-parent", "--reverse", "refs/remotes/upstream/main", f"^{base}", cwd=repo).split()
    rc, out, took = forkflow("ingest", "--land", "--json", cwd=repo, ok=(0, 4))
    doc = json.loads(out)
    newest, boundary, scan_s = exhaustive(repo, base, chain)
    target, clean = doc["target"], doc["clean_target"]
    found = chain.index(clean) if clean in chain else -1
    row: dict[str, Any] = {
        "date": day, "pending": len(chain), "merge_base": info["merge_base"][:12],
        "clean_up_to": clean[:12] if clean else None, "index": found,
        "merged_up_to": target[:12] if target else None, "resolved_by": doc["resolved_by"],
        "newest_clean_by_scan": chain[newest][:12] if newest >= 0 else None, "scan_index": newest,
        "boundary_by_scan": boundary, "equal": found == newest, "trials": doc["trials"],
        "wall_s": round(took, 1), "scan_s": round(scan_s, 1), "landed": doc["landed"],
        "next_conflict": (doc["next"] or {}).get("sha", "")[:12] or None,
        "next_files": len((doc["next"] or {}).get("files", [])),
    }
    if doc["landed"] and not doc["resolved_by"]:
        tip = git("rev-parse", "main", cwd=repo).strip()
        theirs = git("merge-tree", "--write-tree", base, target, cwd=repo).split()[0]
        row["tree_equals_git_merge"] = git("rev-parse", f"{tip}^{{tree}}", cwd=repo).strip() == theirs
    return row


def replay_figures(repo: Path, since: str, until: str) -> dict[str, Any]:
    """`forkflow replay --every week` over the window on the pair's fork (merge-mode steps)."""
    _, out, took = forkflow("replay", "--since", since, "--until", until, "--every", "week", "--json", cwd=repo)
    d = json.loads(out)
    steps = [{"week": datetime.fromtimestamp(s["at"], timezone.utc).date().isoformat(),
              "real_days": s["real"]["days_behind"], "real_pending": s["real"]["pending"],
              "after_days": s["after"]["days_behind"], "after_pending": s["after"]["pending"],
              "landed": len(s["landed"]), "carried": s["fork_applied"]} for s in d["steps"]]
    keys = ("landed_commits", "lag_saved_median", "lag_saved_p90", "not_taken", "steps_open_not_larger")
    return {"seconds": round(took, 1), "steps": steps, "summary": {k: d["summary"][k] for k in keys}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--realfork", default="/work/realfork")
    ap.add_argument("--since", default="2026-01-05")
    ap.add_argument("--until", default="2026-04-30")
    ap.add_argument("--ingest-dates", default="2026-02-02,2026-02-16,2026-03-16,2026-03-30,2026-04-20,2026-04-27")
    ap.add_argument("--scratch", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--replay-since", default="", help="also replay weekly from this date to --until")
    a = ap.parse_args()
    root = Path(a.realfork)
    comb = root / "work" / "comb.git"
    if a.until > "2026-04-30":
        sys.exit("--until: dates after 2026-04-30 are kept for acceptance; pass an earlier one")
    scratch = Path(a.scratch or os.environ.get("TMPDIR", "/tmp")) / "bench_merge_fork"
    scratch.mkdir(parents=True, exist_ok=True)
    pair = root / f"intel_{a.until[5:7]}{a.until[8:10]}"
    make_pair(comb, pair, a.until)
    repo = scratch_clone(pair, scratch)
    intake = re.search(r'intake = "(\w+)"', (repo / "forkflow.toml").read_text())
    _, _, cold = forkflow("status", "--json", cwd=repo)
    _, status_out, warm = forkflow("status", "--json", cwd=repo)
    st = json.loads(status_out)
    tr = truth_at(repo, "refs/heads/main", "refs/remotes/upstream/main", end_of(a.until))
    result: dict[str, Any] = {
        "intake_detected": intake.group(1) if intake else None,
        "status": {"cold_s": round(cold, 2), "warm_s": round(warm, 2), "days_behind": st["days_behind"],
                   "pending": st["counts"]["pending"], "truth": tr},
        "backfill": backfill_vs_truth(repo, a.since, a.until),
        "ingest": [ingest_at(comb, root, scratch, d) for d in a.ingest_dates.split(",") if d],
    }
    if a.replay_since:
        result["replay"] = replay_figures(scratch_clone(pair, scratch), a.replay_since, a.until)
    text = json.dumps(result, indent=1)
    print(text)
    if a.json:
        Path(a.json).write_text(text)


if __name__ == "__main__":
    main()
