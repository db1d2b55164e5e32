"""Validation in daily use on a real project: 20 nights of a fork of a public Python project.

    python benchmarks/bench_daily.py /path/to/a/clone/of/click [--nights 20] [--seed 7] [--keep]

From a local clone of a project with a CPU pytest suite (pallets/click was used), it builds an
"upstream" repository (the clone) and a fork 40 upstream commits behind with commits of its
own: forkflow.toml (L1: the project's pytest suite whole; L2: the same suite plus the fork's
nightly tests, and a timing benchmark), a seeded flaky test that fails 30% of its runs (a hash
of a seed and a run counter decides), a feature of the fork with a nightly test, and the
benchmark.  Then, night after night, it lands two upstream commits (each with its
`Upstream-Commit:` trailer), runs L1 on each landing as documented (`forkflow validate --tier L1
--rev HEAD --changed-from HEAD~1`, then `forkflow triage` when it is red), and runs the nightly
cron line of docs/automation.md exactly as written (`sh -c '...'`).  Seeded on the way: a real
break of the fork's feature (night 6) and a 20% slowdown of the benchmarked code path
(night 11).  It prints:

- the flaky test: its runs and failures in L1 and nightly runs, when it was first classed FLAKY
  (in runs of the test), and every tracking issue that names it (none must, once classed);
- the break: the night it was filed, how many issues name it, and whether the culprit named is
  the seeded commit;
- the slowdown: the night it was alerted, its magnitude and p-value, the bisection's culprit,
  and the night its tracking issue was filed; any other alert (a false one) too.

Nothing of the project is changed but in the temporary fork; the clone is only read.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BEHIND = 40
BREAK_NIGHT, SLOW_NIGHT = 6, 11
FLAKY_ID = "tests/test_fork_flaky.py::test_fork_flaky"
BREAK_ID = "tests_nightly/test_fork_feature.py::test_banner"

FLAKY_TEST = '''"""Seeded flaky test: fails 30% of its runs (a hash of the seed and a run counter)."""
import hashlib
import os
from pathlib import Path


def test_fork_flaky():
    state = Path(os.environ["FORK_FLAKY_STATE"])
    n = int(state.read_text()) if state.exists() else 0
    state.write_text(str(n + 1))
    h = int(hashlib.sha256(f"{os.environ['FORK_FLAKY_SEED']}:{n}".encode()).hexdigest()[:8], 16)
    failed = h / 2**32 < 0.3
    with open(str(state) + ".log", "a") as log:
        log.write(f"{n} {os.environ.get('FORKFLOW_REV', '')[:12]} {'fail' if failed else 'pass'}\\n")
    assert not failed, "deadline exceeded waiting for the terminal: took 1.73s"
'''
FEATURE = 'def banner() -> str:\n    """The fork\'s own banner, shown by its tools."""\n    return "click-fork"\n'
FEATURE_TEST = ("import click._fork as fork\n\n\ndef test_banner():\n"
                "    assert fork.banner() == \"click-fork\", fork.banner()\n")
CONFTEST = ('import sys\nfrom pathlib import Path\n\n'
            'sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))  # the fork\'s click\n')
BENCH = '''"""The fork's timing benchmark: CPU time of 300 invocations of a 20-option command (ms)."""
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
import click  # noqa: E402


@click.command()
@click.option("--name", default="x")
''' + "".join(f'@click.option("--opt{i}", default={i}, type=int)\n' for i in range(20)) + '''def cli(**kw):
    return kw


def sample():
    t = time.process_time()
    for _ in range(300):
        cli.main(["--name", "y", "--opt3", "4"], standalone_mode=False)
    return (time.process_time() - t) * 1000


samples = [sample() for _ in range(9)]
json.dump({"metrics": [{"name": "click.invoke_300", "value": statistics.median(samples), "unit": "ms",
                        "better": "lower", "samples": samples}]}, open(sys.argv[1], "w"))
'''


def toml(state: Path, seed: int) -> str:
    py = sys.executable
    env = (f'env = {{ PYTEST_DISABLE_PLUGIN_AUTOLOAD = "1", FORK_FLAKY_STATE = "{state}", '
           f'FORK_FLAKY_SEED = "{seed}" }}')
    return f'''
[triage]
close_after = 3

[[suite]]
name = "unit"
tier = "L1"
command = "{py} -m pytest -q -p no:cacheprovider -W ignore::pytest.PytestRemovedIn10Warning -o junit_family=xunit1 --junitxml={{report}} tests"
report = "junit"
{env}

[[suite]]
name = "nightly-tests"
tier = "L2"
command = "{py} -m pytest -q -p no:cacheprovider -W ignore::pytest.PytestRemovedIn10Warning -o junit_family=xunit1 --junitxml={{report}} {{tests}}"
all_tests = "tests tests_nightly"
report = "junit"
{env}

[[suite]]
name = "bench"
tier = "L2"
command = "{py} bench/bench_fork.py {{report}}"
report = "metrics"
metrics = ["click.*"]
'''


@dataclass
class Fork:
    path: Path
    env: dict[str, str]
    ups: list[str]                       # upstream commits still to land, oldest first
    log: list[str] = field(default_factory=list)

    def git(self, *args: str, check: bool = True) -> str:
        p = subprocess.run(["git", *args], cwd=self.path, capture_output=True, text=True, env=self.env)
        if check and p.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)}: {p.stderr.strip()}")
        return p.stdout.strip()

    def commit(self, files: dict[str, str], message: str) -> str:
        for name, text in files.items():
            (self.path / name).parent.mkdir(parents=True, exist_ok=True)
            (self.path / name).write_text(text)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def forkflow(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["forkflow", *args], cwd=self.path, capture_output=True, text=True, env=self.env)

    def land_upstream(self) -> str | None:
        """The next upstream commit that applies, picked with its trailer (merges by first parent)."""
        while self.ups:
            sha = self.ups.pop(0)
            diff = self.git("diff", "--binary", f"{sha}^1", sha)
            if not diff.strip():
                continue
            p = subprocess.run(["git", "apply", "--index", "-3"], cwd=self.path, input=diff + "\n",
                               capture_output=True, text=True, env=self.env)
            if p.returncode != 0:
                self.git("reset", "-q", "--hard")
                continue
            subject = self.git("log", "-1", "--format=%s", sha)
            self.git("commit", "-q", "-m", f"{subject}\n\nUpstream-Commit: {sha}")
            return self.git("rev-parse", "HEAD")
        return None


def build(clone: Path, work: Path, seed: int) -> tuple[Fork, dict[str, str]]:
    upstream = work / "upstream"
    subprocess.run(["git", "clone", "-q", "--no-local", str(clone), str(upstream)], check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=upstream, capture_output=True, text=True,
                          check=True).stdout.strip()
    line = subprocess.run(["git", "rev-list", "--first-parent", "--reverse", f"{head}~{BEHIND}..{head}"],
                          cwd=upstream, capture_output=True, text=True, check=True).stdout.split()
    path = work / "fork"
    subprocess.run(["git", "clone", "-q", "--no-local", str(upstream), str(path)], check=True)
    env = dict(os.environ, GIT_AUTHOR_NAME="fork", GIT_AUTHOR_EMAIL="fork@example.com",
               GIT_COMMITTER_NAME="fork", GIT_COMMITTER_EMAIL="fork@example.com", COLUMNS="300",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    fork = Fork(path, env, [])
    branch = fork.git("rev-parse", "--abbrev-ref", "HEAD")
    fork.git("reset", "-q", "--hard", f"{head}~{BEHIND}")
    fork.git("remote", "rename", "origin", "upstream")
    fork.ups = line
    seeded: dict[str, str] = {}
    fork.commit({"conftest.py": CONFTEST, "src/click/_fork.py": FEATURE,
                 "tests_nightly/test_fork_feature.py": FEATURE_TEST}, "[fork] banner of the fork's tools")
    fork.commit({"bench/bench_fork.py": BENCH}, "[fork] timing benchmark of command invocation")
    state = work / "flaky-state"
    seeded["flaky"] = fork.commit({"tests/test_fork_flaky.py": FLAKY_TEST}, "[fork] terminal wait test")
    r = fork.forkflow("init", "--upstream", "upstream")
    assert r.returncode == 0, r.stdout + r.stderr
    cfg = path / "forkflow.toml"
    text = cfg.read_text().replace(f'branch = "{branch}"', f'branch = "{branch}"')
    cfg.write_text(text + toml(state, seed))
    fork.commit({}, "[fork] forkflow.toml")
    return fork, seeded


def slowdown_patch(fork: Fork) -> dict[str, str]:
    """Make Context creation about 20% more costly for the benchmark's workload."""
    core = fork.path / "src" / "click" / "core.py"
    text = core.read_text()
    anchor = "        self.parent = parent\n"
    assert anchor in text, "click's Context.__init__ moved; adapt the seeded slowdown"
    # calibrated below: the extra work per Context is `_FORK_EXTRA` list items
    extra = ("        # the fork checks option names eagerly\n"
             "        _ = [str(i) for i in range(_FORK_EXTRA)]\n")
    text = text.replace(anchor, anchor + extra, 1)
    text = text.replace("\nclass Context:", "\n_FORK_EXTRA = {n}\n\n\nclass Context:", 1)
    return {"src/click/core.py": text}


def calibrate(fork: Fork) -> int:
    """How many list items make one invocation of the benchmark's command 20% dearer."""
    bench = (fork.path / "bench" / "bench_fork.py").read_text().split("samples =")[0]
    script = fork.path.parent / "calibrate.py"
    script.write_text(bench.replace("Path(__file__).resolve().parent.parent", f"Path({str(fork.path)!r})") + (
        "base = sorted(sample() for _ in range(7))[3] / 300\n"
        "t = time.process_time()\n"
        "for _ in range(300):\n    _ = [str(i) for i in range(1000)]\n"
        "per = (time.process_time() - t) / 300 * 1000 / 1000\n"
        "print(int(0.2 * base / per))\n"))
    p = subprocess.run([sys.executable, str(script)], cwd=fork.path, capture_output=True, text=True, env=fork.env)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    return max(1, int(p.stdout.strip()))


def issues(fork: Fork) -> dict[str, str]:
    folder = fork.path / ".git" / "forkflow" / "issues"
    return {p.name: p.read_text() for p in sorted(folder.glob("*.md"))} if folder.is_dir() else {}


def cron_line() -> str:
    [line] = [x for x in (ROOT / "docs" / "automation.md").read_text().splitlines() if x.startswith("0 2 * * *")]
    m = re.search(r"chronic sh -c '(.*)'$", line)
    assert m is not None, line
    return m.group(1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("clone", type=Path, help="a local clone of the project (pallets/click)")
    ap.add_argument("--nights", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", action="store_true", help="keep the temporary fork")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-daily-"))
    started = time.monotonic()
    fork, seeded = build(args.clone.resolve(), work, args.seed)
    line = cron_line()
    nights: list[dict[str, Any]] = []
    l1_runs: list[dict[str, Any]] = []
    flaky_classed_at: tuple[str, int] | None = None  # (where, runs of the flaky test so far)
    flaky_filed_after: list[str] = []
    state_log = work / "flaky-state.log"
    k = calibrate(fork)

    def flaky_runs() -> int:
        return len(state_log.read_text().splitlines()) if state_log.exists() else 0

    for night in range(args.nights + 1):
        landed: list[str] = []
        if night:
            for _ in range(2):
                sha = fork.land_upstream()
                if sha is not None:
                    landed.append(sha)
            if night == BREAK_NIGHT:
                landed.insert(1, seeded.setdefault("break", fork.commit(
                    {"src/click/_fork.py": FEATURE.replace('"click-fork"', '"click fork"')},
                    "[fork] banner without the dash")))
            if night == SLOW_NIGHT:
                patch = slowdown_patch(fork)
                seeded["slow"] = fork.commit({p: t.replace("{n}", str(k)) for p, t in patch.items()},
                                             "[fork] check option names eagerly")
                landed.append(seeded["slow"])
            # L1 on each landing as documented, triage when red (reruns on the same commit)
            for sha in landed:
                r = fork.forkflow("validate", "--tier", "L1", "--rev", sha, "--changed-from", f"{sha}~1", "--json")
                doc = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
                entry: dict[str, Any] = {"night": night, "rev": sha[:12], "rc": r.returncode,
                                         "run_id": doc.get("run_id")}
                if r.returncode == 1:
                    t = fork.forkflow("triage", "--json")
                    tdoc = json.loads(t.stdout) if t.returncode == 0 else {}
                    entry["verdicts"] = {f["test"]: f["classification"] for f in tdoc.get("failures", [])}
                    if entry["verdicts"].get(FLAKY_ID) == "FLAKY" and flaky_classed_at is None:
                        flaky_classed_at = (f"L1 run {doc.get('run_id')} (night {night})", flaky_runs())
                l1_runs.append(entry)
        before = set(issues(fork))
        c = subprocess.run(["sh", "-c", line], cwd=fork.path, capture_output=True, text=True, env=fork.env)
        trunk = json.loads(fork.forkflow("trunk", "--json").stdout or "{}").get("red", [])
        flaky_item = next((i for i in trunk if i["test"] == FLAKY_ID), None)
        if flaky_item and flaky_item["flaky"] and flaky_classed_at is None:
            flaky_classed_at = (f"nightly (night {night})", flaky_runs())
        now = issues(fork)
        opened = sorted(set(now) - before)
        for name in opened:
            if FLAKY_ID in now[name] and flaky_classed_at is not None:
                flaky_filed_after.append(f"night {night}: {name}")
        nights.append({"night": night, "landed": len(landed), "cron_rc": c.returncode, "opened": opened,
                       "red": [(i["test"], bool(i["flaky"]), i["culprit"]) for i in trunk],
                       "cron_tail": c.stdout[-600:] + c.stderr[-400:]})
        print(f"night {night:2}: landed {len(landed)}, cron exit {c.returncode}, issues opened {opened}, "
              f"red {[(t.split('::')[-1], 'flaky' if f else 'red') for t, f, _ in nights[-1]['red']]}",
              flush=True)

    final = issues(fork)
    detect = json.loads(fork.forkflow("detect", "--json").stdout or "{}")
    alerts = detect.get("alerts", [])
    log = state_log.read_text().splitlines() if state_log.exists() else []
    flaky_fail = sum(1 for x in log if x.endswith("fail"))
    names_flaky = [n for n, t in final.items() if FLAKY_ID in t]
    names_break = [n for n, t in final.items() if BREAK_ID in t]
    break_night = next((n["night"] for n in nights if any(BREAK_ID in final.get(o, "") for o in n["opened"])), None)
    break_body = final[names_break[0]] if names_break else ""
    slow_issue = [(n["night"], o) for n in nights for o in n["opened"] if o.startswith("alert-")]
    slow_alert = next((a for a in alerts if a.get("direction") == "regression"), None)
    slow_body = final.get(f"alert-{slow_alert['id']}.md", "") if slow_alert else ""
    print("\n== figures ==")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}; project {args.clone.name} at "
          f"{subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=args.clone, capture_output=True, text=True).stdout.strip()}, "
          f"fork {BEHIND} upstream commits behind; {args.nights} nights, seed {args.seed}; "
          f"wall {time.monotonic() - started:.0f} s")
    print(f"flaky test: {len(log)} runs ({flaky_fail} failed, {flaky_fail / max(1, len(log)):.0%}); "
          f"first classed FLAKY at {flaky_classed_at[0] if flaky_classed_at else 'never'}, "
          f"after {flaky_classed_at[1] if flaky_classed_at else '-'} runs of the test; "
          f"issues naming it: {len(names_flaky)} in all, {len(flaky_filed_after)} after it was classed; "
          f"nightlies where it was red: {sum(1 for n in nights if any(t == FLAKY_ID for t, _f, _c in n['red']))}, "
          f"all listed as flaky: {all(f for n in nights for t, f, _c in n['red'] if t == FLAKY_ID)}")
    print(f"break (night {BREAK_NIGHT}, {seeded.get('break', '')[:12]}): filed on night {break_night}, "
          f"issues naming it: {len(names_break)}, culprit is the seeded commit: "
          f"{seeded.get('break', 'x')[:12] in break_body}, cron exit that night: "
          f"{nights[BREAK_NIGHT]['cron_rc'] if len(nights) > BREAK_NIGHT else '-'}")
    if slow_alert is not None:
        m = max(slow_alert["members"], key=lambda x: abs(x["magnitude"]))
        print(f"slowdown (night {SLOW_NIGHT}, {seeded.get('slow', '')[:12]}, extra {k} items): alert "
              f"{slow_alert['id']} {m['metric']} {m['magnitude']:+.1%} p {m['pvalue']:.3g}, range "
              f"{slow_alert['good'][:12]}..{slow_alert['bad'][:12]}, status {slow_alert['status']}, "
              f"bisection {slow_alert['bisection']}; tracking issue filed on night "
              f"{slow_issue[0][0] if slow_issue else 'never'}, naming the seeded commit as culprit: "
              f"{bool(slow_body) and ('fork commit ` ' + seeded.get('slow', '-')[:12]) in slow_body}")
        print("  " + next((x for x in slow_body.splitlines() if x.startswith("**Culprit**")), "no culprit line"))
    else:
        print("slowdown: no alert")
    others = sorted({t for n in nights for t, _f, _c in n["red"] if t not in (FLAKY_ID, BREAK_ID)})
    print(f"other tests red in a nightly: {len(others)} ({', '.join(o.split('::')[-1] for o in others[:4])}); "
          f"listed as flaky every time: {all(f for n in nights for t, f, _c in n['red'] if t in others)}; "
          f"issues naming them: {sum(1 for t in final.values() if any(o in t for o in others))}")
    fails_log = [x for x in log if x.endswith("fail")]
    print(f"flaky test failures before it was classed FLAKY: "
          f"{sum(1 for x in fails_log[:flaky_fail] if flaky_classed_at and int(x.split()[0]) < flaky_classed_at[1])}")
    print(f"alerts in all: {len(alerts)} ({sum(1 for a in alerts if a.get('direction') == 'regression')} "
          f"regression); L1 runs {len(l1_runs)}, red {sum(1 for e in l1_runs if e['rc'] == 1)}; "
          f"tracking issues {len(final)}: {sorted(final)}")
    print(f"cron exit codes: {[n['cron_rc'] for n in nights]}")
    if args.keep:
        print(f"fork kept at {fork.path}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
