"""A person's conflict loop on a real (upstream, fork) pair: who owns the open conflicts, and how
many commands it takes from `forkflow conflicts next` to a landed resolution.

    python benchmarks/bench_conflict_loop.py PAIR [PAIR ...] [--conflicts N] [--json OUT]

PAIR is a realfork pair (upstream.git, downstream/; see bench_realfork.py).  Nothing in PAIR is
changed: everything runs on copies in a temporary folder.  On each pair: `forkflow init`,
`[ingest] l1_command = "true"`, `forkflow ingest --land`, then

* owners: for every open conflict, where its owners come from (`forkflow conflicts --json`:
  [owners], the fork's own CODEOWNERS rules, blame of the fork's lines, the fork's commits to the
  file, or nobody), and what the CODEOWNERS in the fork's checkout said before (the rule owners
  had until now: upstream's file, which the fork inherited);
* the loop, on two copies of the fork after that ingest, for the N oldest conflicted upstream
  commits whose conflicts are all text (a delete/modify is settled in git by hand; such commits
  are deferred on both copies and not counted).  The editor is a script that writes upstream's
  side in each region (its own side when the guardrails refuse that, e.g. a Python file that
  would not parse); L1 is `true`.  A commit still waiting after 3 rounds is counted as not
  landed and deferred on both copies, so that `next` moves on.
  - today: `forkflow conflicts` (find the oldest), then per conflicted file `forkflow conflicts
    show ID` (run as `show ID --full`: the whole file, as `show` printed it until now),
    `forkflow conflicts show ID --json` (the only way to get the marked file out),
    `$EDITOR FILE`, `forkflow conflicts resolve ID --file FILE`, then `forkflow ingest --land`;
  - now: `forkflow conflicts next`, per file `forkflow conflicts edit ID` (opens $EDITOR) and
    `forkflow conflicts resolve ID`, then the land command `resolve` prints (`forkflow ingest
    --unit N`).
  A commit still not landed after its land command (it conflicts in other files on the fork's tip
  now) is worked again, up to 3 rounds.  Each command is counted once; a commit counts as landed when the fork branch has a commit with
  its `Upstream-Commit:` trailer.  Also printed: the lines `conflicts show` printed before (the
  whole file) and `conflicts next` prints now, for the first file of each commit.  The commands
  of both loops keep their meaning in this tree, so both run on it.
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
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ENV = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@localhost",
           GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@localhost", COLUMNS="200")
ENV.pop("FORKFLOW_STORE", None)
TEXT_KINDS = ("content", "add/add")
ROUNDS = 3  # a commit that conflicts again after its land command (new files on a moved tip) is worked again
# the editor: each region of the file (its last argument) becomes one side; BENCH_SIDE picks which
EDITOR = r'''
import os, pathlib, re, sys
p = pathlib.Path(sys.argv[-1])
side = os.environ.get("BENCH_SIDE", "theirs")
pat = re.compile(r"<<<<<<< fork\n(.*?)\|\|\|\|\|\|\| base\n.*?=======\n(.*?)>>>>>>> upstream\n", re.S)
p.write_bytes(pat.sub(lambda m: m.group(2 if side == "theirs" else 1), p.read_bytes().decode("utf-8", "surrogateescape"))
              .encode("utf-8", "surrogateescape"))
'''


class Session:
    """Runs a person's commands in one copy of the fork, counting them."""

    def __init__(self, down: Path, editor: Path) -> None:
        self.down, self.editor, self.count = down, editor, 0
        exe = Path(sys.executable).parent / "forkflow"
        self.cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "forkflow"]

    def forkflow(self, *args: str, ok: tuple[int, ...] = (0,), side: str = "theirs",
                 counted: bool = True) -> subprocess.CompletedProcess[str]:
        self.count += counted
        env = dict(ENV, EDITOR=f"{sys.executable} {self.editor}", BENCH_SIDE=side)
        p = subprocess.run([*self.cmd, *args, "--repo", str(self.down)], capture_output=True, text=True, env=env,
                           cwd=self.down)
        if p.returncode not in ok:
            raise RuntimeError(f"forkflow {' '.join(args)} exited {p.returncode}: {p.stderr.strip()[-600:]}")
        return p

    def edit_file(self, path: Path, side: str) -> None:
        """`$EDITOR FILE`: a person's command."""
        self.count += 1
        subprocess.run([sys.executable, str(self.editor), str(path)], check=True, env=dict(ENV, BENCH_SIDE=side))


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=ENV,
                          check=True).stdout


def landed(down: Path, sha: str) -> bool:
    return bool(git(down, "log", "--format=%H", f"--grep=Upstream-Commit: {sha}", "main").strip())


def open_conflicts(s: Session) -> list[dict[str, Any]]:
    doc = json.loads(s.forkflow("conflicts", "--json", counted=False).stdout)
    return list(doc["conflicts"])


def loop_now(s: Session, skip: set[str]) -> dict[str, Any]:
    """From `conflicts next` to landed, for the oldest text-only conflicted commit not in `skip`."""
    while True:
        doc = json.loads(s.forkflow("conflicts", "next", "--json", counted=False).stdout)
        x = doc["conflict"]
        if x is None or x["upstream_sha"] in skip:  # none left, or one that did not land
            return {}
        if x["upstream_sha"] not in skip and x["kind"] in TEXT_KINDS and all(
                y["kind"] in TEXT_KINDS for y in x["same_commit"]):
            break
        skip.add(x["upstream_sha"])  # `next` passes over a commit a person decided on
        s.forkflow("decide", x["upstream_sha"][:12], "--defer", "--reason", "bench: needs git by hand",
                   counted=False)
    s.count = 0
    sha, lines, rounds = x["upstream_sha"], 0, 0
    while rounds < ROUNDS and not landed(s.down, sha):
        rounds += 1
        shown = s.forkflow("conflicts", "next", "--json")  # what the person reads first (as text below)
        x = json.loads(shown.stdout)["conflict"]
        if x is None or x["upstream_sha"] != sha:
            break
        if not lines:
            lines = len(s.forkflow("conflicts", "next", counted=False).stdout.splitlines())
        land = ""
        for cid in [x["id"], *(y["id"] for y in x["same_commit"])]:
            if s.forkflow("conflicts", "edit", str(cid), ok=(0, 1)).returncode:  # merges cleanly on the tip now
                continue
            r = s.forkflow("conflicts", "resolve", str(cid), ok=(0, 1))
            if r.returncode:  # the guardrails refused upstream's side: the fork's then
                s.forkflow("conflicts", "edit", str(cid), "--fresh", side="ours")
                r = s.forkflow("conflicts", "resolve", str(cid), ok=(0, 1))
            if r.returncode:  # neither side parses in the merged file: a person writes the merge
                return {"sha": sha, "files": 1 + len(x["same_commit"]), "commands": s.count, "landed": False,
                        "lines_read": lines, "rounds": rounds, "why": "neither side alone parses: needs a person"}
            land = " ".join(r.stdout.split()).partition("land it: forkflow ")[2].partition(" (")[0] or land
        if land:
            s.forkflow(*land.split(), ok=(0, 4, 5))
    return {"sha": sha, "files": 1 + len(x["same_commit"]) if x else 0, "commands": s.count,
            "landed": landed(s.down, sha), "lines_read": lines, "rounds": rounds}


def loop_today(s: Session, sha: str, scratch: Path) -> dict[str, Any]:
    """Today's commands for the same commit: the list, show, the file out of --json, the editor,
    resolve --file, ingest --land."""
    s.count = 0
    lines, rounds, files = 0, 0, 0
    while rounds < ROUNDS and not landed(s.down, sha):
        rounds += 1
        s.forkflow("conflicts")  # find the oldest in the table
        ids = [c for c in open_conflicts(s) if c["upstream_sha"] == sha]
        if not ids:
            break
        files = files or len(ids)
        for c in ids:
            shown = s.forkflow("conflicts", "show", str(c["id"]), "--full")  # what `show` printed until now
            lines = lines or len(shown.stdout.splitlines())
            doc = json.loads(s.forkflow("conflicts", "show", str(c["id"]), "--json").stdout)
            f = scratch / f"{c['id']}-{Path(c['path']).name}"
            f.write_bytes(doc["conflicted"].encode("utf-8", "surrogateescape"))
            s.edit_file(f, "theirs")
            r = s.forkflow("conflicts", "resolve", str(c["id"]), "--file", str(f), ok=(0, 1))
            if r.returncode:
                f.write_bytes(doc["conflicted"].encode("utf-8", "surrogateescape"))
                s.edit_file(f, "ours")
                r = s.forkflow("conflicts", "resolve", str(c["id"]), "--file", str(f), ok=(0, 1))
            if r.returncode:  # neither side parses in the merged file: a person writes the merge
                return {"sha": sha, "files": files, "commands": s.count, "landed": False, "lines_read": lines,
                        "rounds": rounds, "why": "neither side alone parses: needs a person"}
        s.forkflow("ingest", "--land", ok=(0, 4, 5))
    return {"sha": sha, "files": files, "commands": s.count, "landed": landed(s.down, sha), "lines_read": lines,
            "rounds": rounds}


def _checkout_codeowners(down: Path) -> Callable[[str], tuple[str, ...]]:
    """The owners rule forkflow had before: the last matching line of the CODEOWNERS file in the
    checkout (on a fork, the one inherited from upstream)."""
    from forkflow.conflicts.owners import codeowners_globs, parse_codeowners
    from forkflow.tiers.selection import matches

    for where in ("CODEOWNERS", ".github/CODEOWNERS", "docs/CODEOWNERS", ".gitlab/CODEOWNERS"):
        f = down / where
        if f.is_file():
            rules = parse_codeowners(f.read_text(encoding="utf-8", errors="replace"))
            return lambda path: next((people for pattern, people in reversed(rules)
                                      if matches(path, codeowners_globs(pattern))), ())
    return lambda path: ()


def owners_figures(down: Path) -> dict[str, Any]:
    from forkflow.conflicts import owners as cowners
    from forkflow.conflicts import records
    from forkflow.context import open_context

    ctx = open_context(down)
    inherited = _checkout_codeowners(down)  # the rule until now: CODEOWNERS in the checkout, upstream's
    with ctx.store.session_scope() as s:
        rows = records.conflicts(s, ctx.fork_id, "open")
    s_ = Session(down, Path("/nonexistent"))
    listed = {c["id"]: c for c in json.loads(s_.forkflow("conflicts", "--json", counted=False).stdout)["conflicts"]}
    sources = Counter(listed[x.id]["owners_source"] or "nobody" for x in rows)
    from_fork = sum(n for k, n in sources.items() if k in cowners.FROM_FORK)
    before = Counter("upstream CODEOWNERS" if inherited(x.path) else "nobody" for x in rows)
    return {"open_conflicts": len(rows), "commits": len({x.upstream_sha for x in rows}), "sources": dict(sources),
            "from_fork": from_fork, "from_fork_pct": round(100 * from_fork / len(rows), 1) if rows else None,
            "before": dict(before)}


def run_pair(pair: Path, n: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="forkflow-bench-loop-"))
    try:
        for name in ("upstream.git", "downstream"):
            shutil.copytree(pair / name, work / name, symlinks=True)
        down = work / "downstream"
        git(down, "remote", "set-url", "upstream", str(work / "upstream.git"))
        shutil.rmtree(down / ".git" / "forkflow", ignore_errors=True)
        editor = work / "editor.py"
        editor.write_text(EDITOR)
        setup = Session(down, editor)
        setup.forkflow("init", "--upstream", "upstream", counted=False)
        with (down / "forkflow.toml").open("a") as f:
            f.write('\n[ingest]\nl1_command = "true"\n')
        t0 = time.perf_counter()
        setup.forkflow("ingest", "--land", "--json", ok=(0, 4, 5), counted=False)
        ingest_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        figures = owners_figures(down)
        owners_s = time.perf_counter() - t0
        copies = {}
        for name in ("today", "now"):
            shutil.copytree(down, work / name, symlinks=True)
            copies[name] = Session(work / name, editor)
        now: list[dict[str, Any]] = []
        skip: set[str] = set()
        while len(now) < n:
            row = loop_now(copies["now"], skip)
            if not row:
                break
            now.append(row)
            skip.add(row["sha"])
            if not row["landed"]:  # worked ROUNDS times and still waiting: set aside so that `next` moves on
                copies["now"].forkflow("decide", row["sha"][:12], "--defer", "--reason", "bench: did not land",
                                       counted=False)
        deferred = sorted(skip - {r["sha"] for r in now})
        for sha in deferred:
            copies["today"].forkflow("decide", sha[:12], "--defer", "--reason", "bench: needs git by hand",
                                     counted=False)
        scratch = work / "scratch"
        scratch.mkdir()
        today = []
        for r in now:
            today.append(loop_today(copies["today"], r["sha"], scratch))
            if not today[-1]["landed"]:
                copies["today"].forkflow("decide", r["sha"][:12], "--defer", "--reason", "bench: did not land",
                                         counted=False)
        return {"pair": pair.name, "ingest_s": round(ingest_s, 1), "owners_s": round(owners_s, 1), **figures,
                "deferred_not_text": len(deferred), "today": today, "now": now}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", type=Path, nargs="+")
    ap.add_argument("--conflicts", type=int, default=5, help="conflicted upstream commits worked (default 5)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    out = []
    for pair in args.pairs:
        if not (pair / "upstream.git").is_dir() or not (pair / "downstream").is_dir():
            raise SystemExit(f"bench_conflict_loop: {pair} is not a realfork pair (upstream.git, downstream/)")
        r = run_pair(pair.resolve(), args.conflicts)
        out.append(r)
        print(f"== {r['pair']}: ingest --land {r['ingest_s']} s; {r['open_conflicts']} open conflicts "
              f"({r['commits']} upstream commits)")
        print(f"owners named from the fork: {r['from_fork']} of {r['open_conflicts']} ({r['from_fork_pct']}%), "
              f"by source: " + ", ".join(f"{k} {v}" for k, v in sorted(r["sources"].items(), key=lambda kv: -kv[1]))
              + f"; owners for all of them in {r['owners_s']} s (cold, with the ledger)")
        print("  before (the checkout's CODEOWNERS, upstream's): "
              + ", ".join(f"{k} {v}" for k, v in sorted(r["before"].items())))
        print(f"  commits with a delete/modify conflict, deferred and not counted: {r['deferred_not_text']}")
        print(f"{'upstream commit':<14} {'files':>5} {'today':>6} {'now':>4} {'landed today/now':>17} "
              f"{'lines read today/now':>21} {'rounds':>7}")
        for a, b in zip(r["today"], r["now"]):
            print(f"{a['sha'][:12]:<14} {a['files']:>5} {a['commands']:>6} {b['commands']:>4} "
                  f"{str(a['landed']) + '/' + str(b['landed']):>17} {str(a['lines_read']) + '/' + str(b['lines_read']):>21}"
                  f" {str(a['rounds']) + '/' + str(b['rounds']):>7}")
        ta, tb = sum(a["commands"] for a in r["today"]), sum(b["commands"] for b in r["now"])
        print(f"{'total':<14} {'':>5} {ta:>6} {tb:>4}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
