"""Bisection on real git repositories with a real measurement command, through the CLI."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from forkflow.bisect.probes import CommandProbe, MeasureStatus
from forkflow.bisect.units import landing_units, replay_prefixes, resolve_range
from forkflow.context import open_context
from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.models import Better, MetricPoint, Sha
from forkflow.store import queries
from forkflow.testing.gitrepo import ForkBuilder

# Reads perf.txt (the "true" latency) and reports 8 noisy samples; knobs via files in the tree.
MEASURE = r'''
import json, os, random, sys
from pathlib import Path
if Path("untestable").exists():
    sys.exit(125)
rev = os.environ.get("FORKFLOW_REV", "")
runs = Path(__file__).with_name(f"runs-{rev[:12]}")  # noise as before, but the same in every run
k = int(runs.read_text()) if runs.exists() else 0  # of the test: seeded by revision and attempt
runs.write_text(str(k + 1))
rng = random.Random(f"{rev}:{k}")
rate = float(os.environ.get("CRASH_RATE", "0"))
if rate:  # crashes at random, but the same attempt of the same commit always does the same
    counter = Path(os.environ["CRASH_DIR"]) / os.environ["FORKFLOW_REV"]
    n = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(n + 1))
    if random.Random(f"{os.environ['FORKFLOW_REV']}:{n}").random() < rate:
        sys.exit(139)
v = float(Path("perf.txt").read_text())
name = "other" if Path("no-metric").exists() else os.environ["FORKFLOW_METRIC"]
s = [v * (1 + 0.03 * rng.gauss(0, 1)) for _ in range(8)]
doc = {"metrics": [{"name": name, "value": sum(s) / 8, "unit": "ms", "better": "lower", "samples": s}]}
Path(os.environ["FORKFLOW_METRICS_OUT"]).write_text(json.dumps(doc))
'''


def _measure_cmd(tmp_path: Path) -> str:
    script = tmp_path / "measure.py"
    script.write_text(MEASURE)
    return f"{sys.executable} {script}"


def _fork(builder: ForkBuilder, culprit_in_bundle: int = 2) -> tuple[Sha, Sha, list[Sha]]:
    """Fork main: good end, 3 picks, a fork-own commit, a bundle of 4 (one slows perf.txt), 1 pick."""
    builder.upstream_commit({"perf.txt": "100\n"}, "base (#1)")
    builder.branch_fork()
    ups = [builder.upstream_commit({f"f{i}.txt": f"{i}\n"} | (
        {"perf.txt": "106\n"} if i == 3 + culprit_in_bundle else {}), f"upstream change {i} (#{20 + i})")
        for i in range(8)]
    good = builder.f.head()
    for u in ups[:3]:
        builder.pick(u)
    builder.fork_commit({"own.txt": "1\n"}, "fork: own feature")
    builder.fetch()
    for u in ups[3:7]:
        builder.f.git("cherry-pick", "--no-commit", u)
    builder.f.git("commit", "-q", "-m", "Cherry-pick 4 upstream commits\n\n" + "\n".join(
        f"Upstream-Commit: {u}" for u in ups[3:7]), env=builder.f.env())
    builder.pick(ups[7])
    builder.f.git("config", "forkflow.test", "1")
    return good, builder.f.head(), ups


def _init(cli, path: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("init", "--upstream", "upstream", repo=path).rc == 0


def _measured_fork(builder: ForkBuilder, tmp_path: Path, cli) -> tuple[Sha, Sha, list[Sha], Path]:  # type: ignore[no-untyped-def]
    """`_fork` with forkflow set up in it, and the MEASURE script in `tmp_path` (its path last)."""
    good, bad, ups = _fork(builder)
    _init(cli, builder.f.path)
    script = tmp_path / "measure.py"
    script.write_text(MEASURE)
    return good, bad, ups, script


def _add_config(path: Path, text: str) -> None:
    """Append `text` (suites, mostly) to the forkflow.toml of the checkout at `path`."""
    cfg = path / "forkflow.toml"
    cfg.write_text(cfg.read_text() + text)


def _perf_suite(script: Path) -> str:
    """An L2 suite "perf" that runs the MEASURE script, reporting through FORKFLOW_METRICS_OUT."""
    return ("\n[[suite]]\nname = \"perf\"\ntier = \"L2\"\n"
            f"command = 'FORKFLOW_METRICS_OUT={{report}} {sys.executable} {script}'\n"
            "report = \"metrics\"\n")


def _store_point(path: Path, metric: str, rev: Sha, context: tuple[tuple[str, str], ...]) -> None:
    """One stored point of `metric` at `rev` (106 ms, lower is better), measured in `context`."""
    ctx = open_context(path)
    with ctx.store.session_scope() as s:
        queries.add_metric_points(s, ctx.fork_id, [MetricPoint(metric, rev, 106.0, "ms", Better.LOWER,
                                                               context=context)])


def test_units_and_prefix_replay_in_memory(builder: ForkBuilder) -> None:
    good, bad, ups = _fork(builder)
    repo = Repo.open(builder.f.path)
    units = landing_units(repo, good, bad)
    assert [len(u.upstream) for u in units] == [1, 1, 1, 0, 4, 1]
    bundle = units[4]
    prefixes = replay_prefixes(repo, bundle)
    assert [p.upstream for p in prefixes] == ups[3:6]
    status_before = builder.f.git("status", "--porcelain")
    # prefix 3 (base + 3 picks) holds the slow perf.txt, prefix 2 does not
    assert repo.git("show", f"{prefixes[2].sha}:perf.txt").strip() == "106"
    assert repo.git("show", f"{prefixes[1].sha}:perf.txt").strip() == "100"
    assert builder.f.git("status", "--porcelain") == status_before  # no work tree touched


def test_resolve_range_good_and_bad_swapped(builder: ForkBuilder) -> None:
    good, bad, _ = _fork(builder)
    repo = Repo.open(builder.f.path)
    with pytest.raises(UserError, match="swap them"):
        resolve_range(repo, bad, good)
    with pytest.raises(UserError, match="not a commit"):
        resolve_range(repo, "nope", bad)


def test_command_probe_statuses(builder: ForkBuilder, tmp_path: Path) -> None:
    good, bad, _ = _fork(builder)
    repo = Repo.open(builder.f.path)
    probes: list[CommandProbe] = []

    def probe(command: str, metric: str | None) -> CommandProbe:
        probes.append(CommandProbe(repo, command, metric))
        return probes[-1]

    try:
        m = probe(_measure_cmd(tmp_path), "lat").measure(bad)
        assert m.status is MeasureStatus.OK and len(m.samples) == 8 and m.better is Better.LOWER
        assert probe("exit 125", "lat").measure(good).status is MeasureStatus.UNTESTABLE
        assert probe("exit 3", "lat").measure(good).status is MeasureStatus.ERROR
        assert probe("echo '{\"metrics\": []}'", "lat").measure(good).status is MeasureStatus.MISSING
        assert probe("echo garbage", "lat").measure(good).status is MeasureStatus.ERROR
        assert probe("true", None).measure(good).passed is True
        assert probe("false", None).measure(good).passed is False
        assert probe("true", "lat").measure(Sha("0" * 40)).status is MeasureStatus.UNTESTABLE
    finally:
        for p in probes:
            p.close()
    assert "forkflow-bisect" not in repo.git("worktree", "list")


def test_cli_bisect_names_upstream_commit_inside_bundle(builder: ForkBuilder, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    good, bad, ups = _fork(builder)
    _init(cli, builder.f.path)
    r = cli("bisect", "--metric", "lat", "--good", good, "--bad", bad, "--parallel", "2",
            "--command", _measure_cmd(tmp_path), "--json", repo=builder.f.path)
    assert r.rc == 0, r.err
    doc = r.json()
    assert doc["status"] == "found"
    assert doc["culprit"]["upstream_commit"] == ups[5] and doc["culprit"]["pr"] == 25
    assert doc["culprit"]["subject"] == "upstream change 5 (#25)"
    assert [s["name"].split()[0] for s in doc["stages"]] == ["landing", "bundle"]
    assert doc["confidence"] > 0.8 and doc["measurements"] >= doc["rounds"]
    assert all(r["measurements"] > 0 for s in doc["stages"] for r in s["rounds"])
    out = cli("bisect", "--metric", "lat", "--good", good, "--bad", bad, "--command", _measure_cmd(tmp_path),
              repo=builder.f.path).out
    text = " ".join(out.split())
    # the subject belongs to the upstream commit, which landed inside the bundle's fork commit
    assert f"culprit: upstream commit {ups[5][:12]} upstream change 5 (#25) (PR #25)" in text
    assert f"landed in fork commit {doc['culprit']['fork_commit'][:12]}" in text


def test_cli_detect_then_bisect_from_alert(builder: ForkBuilder, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    good, bad, ups = _fork(builder)
    _init(cli, builder.f.path)
    for i in range(12):
        builder.fork_commit({"later.txt": f"{i}\n"}, f"fork: later work {i}")
    ctx = open_context(builder.f.path)
    repo = Repo.open(builder.f.path)
    commits = repo.log("-1", good, reverse=False) + repo.log(f"{good}..HEAD", first_parent=True)
    import random
    rng = random.Random(3)
    points = []
    for k, c in enumerate(commits):  # the bundle (commits[5]) and everything after is 6 % slower
        for shape in ("m128", "m256", "m512"):
            v = (106.0 if k >= 5 else 100.0) * (1 + 0.01 * rng.gauss(0, 1))
            points.append(MetricPoint(f"matmul/{shape}/latency", c.sha, v, "ms", Better.LOWER,
                                      commit_date=c.date, measured_at=k))
    with ctx.store.session_scope() as s:
        queries.add_metric_points(s, ctx.fork_id, points)
    r = cli("detect", "--json", repo=builder.f.path)
    assert r.rc == 0, r.err
    alerts = r.json()["alerts"]
    assert len(alerts) == 1 and len(alerts[0]["members"]) == 3  # three shapes, one alert
    a = alerts[0]
    assert (a["good"], a["bad"]) == (commits[4].sha, commits[5].sha)
    assert a["direction"] == "regression" and all(m["magnitude"] > 0.03 for m in a["members"])
    again = cli("detect", "--json", repo=builder.f.path).json()["alerts"]
    assert [x["id"] for x in again] == [a["id"]]  # refreshed, not duplicated
    b = cli("bisect", "--alert", str(a["id"]), "--command", _measure_cmd(tmp_path), "--json",
            repo=builder.f.path)
    assert b.rc == 0, b.err
    assert b.json()["culprit"]["upstream_commit"] == ups[5]
    after = cli("detect", "--json", repo=builder.f.path).json()["alerts"][0]
    assert after["status"] == "bisected" and after["bisection"] == b.json()["id"]
    table = cli("detect", repo=builder.f.path)
    assert "forkflow bisect --alert" in table.out and "matmul/m128/latency" in table.out
    assert f"bisected: bisection {after['bisection']}" in table.out and "next:" not in table.out


def test_cli_bisect_merge_in_range(builder: ForkBuilder, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"perf.txt": "100\n"}, "base (#1)")
    builder.branch_fork()
    good = builder.fork_commit({"a.txt": "1\n"}, "fork: a")
    builder.f.git("checkout", "-q", "-b", "side")
    builder.fork_commit({"perf.txt": "107\n"}, "side: slow path")
    builder.fork_commit({"b.txt": "1\n"}, "side: b")
    builder.f.git("checkout", "-q", "main")
    builder.fork_commit({"c.txt": "1\n"}, "fork: c")
    builder.f.git("merge", "-q", "--no-ff", "side", "-m", "Merge branch side", env=builder.f.env())
    merge = builder.f.head()
    builder.fork_commit({"d.txt": "1\n"}, "fork: d")
    _init(cli, builder.f.path)
    r = cli("bisect", "--metric", "lat", "--good", good, "--bad", "HEAD", "--command",
            _measure_cmd(tmp_path), "--json", repo=builder.f.path)
    assert r.rc == 0, r.err
    assert r.json()["culprit"]["fork_commit"] == merge  # the merge is the landing unit


def test_cli_bisect_no_difference_names_nobody(builder: ForkBuilder, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    good, bad, _ = _fork(builder, culprit_in_bundle=9)  # nothing slows down
    _init(cli, builder.f.path)
    r = cli("bisect", "--metric", "lat", "--good", good, "--bad", bad, "--command",
            _measure_cmd(tmp_path), "--json", repo=builder.f.path)
    assert r.rc == 0, r.err
    assert r.json()["status"] == "no-difference" and r.json()["culprit"] is None


def test_cli_bisect_untestable_and_missing_metric(builder: ForkBuilder, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    builder.upstream_commit({"perf.txt": "100\n"}, "base (#1)")
    builder.branch_fork()
    good = builder.fork_commit({"a.txt": "1\n"}, "fork: a")
    builder.fork_commit({"untestable": "x"}, "fork: build break")
    builder.fork_commit({"perf.txt": "108\n", "untestable": None}, "fork: slow")
    builder.fork_commit({"no-metric": "x"}, "fork: metric renamed")
    builder.fork_commit({"no-metric": None}, "fork: metric back")
    _init(cli, builder.f.path)
    cmd = _measure_cmd(tmp_path)
    r = cli("bisect", "--metric", "lat", "--good", good, "--bad", "HEAD", "--command", cmd, "--json",
            repo=builder.f.path)
    doc = r.json()
    assert r.rc == 2 and doc["status"] == "suspects"  # the build break hides the culprit
    skipped = doc["stages"][0]["skipped"]
    assert any("exit 125" in why for why in skipped.values())
    assert len(doc["stages"][0]["suspects"]) == 2
    every = cli("bisect", "--metric", "lat", "--good", good, "--bad", "HEAD", "--command",
                f"test -e untestable && exit 125; exit 125", "--json", repo=builder.f.path)
    assert every.rc == 2 and every.json()["status"] == "untestable"


def test_cli_bisect_with_random_crashes(builder: ForkBuilder, tmp_path: Path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    good, bad, ups = _fork(builder)
    _init(cli, builder.f.path)
    monkeypatch.setenv("CRASH_RATE", "0.3")
    monkeypatch.setenv("CRASH_DIR", str(tmp_path))
    r = cli("bisect", "--metric", "lat", "--good", good, "--bad", bad, "--command",
            _measure_cmd(tmp_path), "--json", repo=builder.f.path)
    assert r.rc == 0, r.err
    assert r.json()["culprit"]["upstream_commit"] == ups[5]


def test_cli_bisect_bad_inputs(builder: ForkBuilder, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    good, bad, _ = _fork(builder)
    _init(cli, builder.f.path)
    cmd = _measure_cmd(tmp_path)
    swapped = cli("bisect", "--metric", "lat", "--good", bad, "--bad", good, "--command", cmd,
                  repo=builder.f.path)
    assert swapped.rc == 1 and "swap them" in swapped.err
    assert "no measurement command" in cli("bisect", "--metric", "lat", "--good", good, "--bad", bad,
                                           repo=builder.f.path).err
    assert cli("bisect", "--alert", "99", "--command", cmd, repo=builder.f.path).rc == 1
    assert "--parallel" in cli("bisect", "--metric", "lat", "--good", good, "--bad", bad, "--parallel",
                               "0", "--command", cmd, repo=builder.f.path).err
    assert "say what to bisect" in cli("bisect", "--command", cmd, repo=builder.f.path).err
    nothing = cli("detect", "--metric", "nope*", repo=builder.f.path)
    assert nothing.rc == 1 and "no stored L2 metric" in nothing.err


def test_cli_bisect_pass_fail_inside_bundle(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    good, bad, ups = _fork(builder)
    _init(cli, builder.f.path)
    r = cli("bisect", "--pass-fail", "--good", good, "--bad", bad, "--command",
            "test \"$(cat perf.txt)\" = 100", "--json", repo=builder.f.path)
    assert r.rc == 0, r.err
    doc = r.json()
    assert doc["mode"] == "pass-fail" and doc["culprit"]["upstream_commit"] == ups[5]


def test_cli_bisect_pass_fail_bad_inputs_one_line_each(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    good, bad, _ = _fork(builder)
    _init(cli, builder.f.path)
    for args, rc, words in (
            (("--good", bad, "--bad", good, "--command", "true"), 1, "swap them"),
            (("--good", good, "--bad", bad, "--command", "true"), 2, "the test passes at the bad end; nobody"),
            (("--good", good, "--bad", bad, "--command", "false"), 2, "fails at the good end too; pick an older"),
            (("--good", good, "--bad", bad, "--command", "exit 125"), 2, "cannot measure the good end and the bad end"),
            (("--good", good, "--bad", bad, "--command", "true", "--timeout", "0"), 1, "--timeout must be more than 0")):
        r = cli("bisect", "--pass-fail", *args, "--json", repo=builder.f.path)
        assert r.rc == rc and words in r.err, (args, r.rc, r.err)
        assert len(r.err.strip().splitlines()) == 1, r.err
        if rc == 2:
            assert r.json()["culprit"] is None


def test_cli_detect_bisect_starts_from_alert_with_the_l2_suite(builder: ForkBuilder, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """`detect --bisect`: a new regression alert is bisected at once, measured by its own L2 suite."""
    good, bad, ups, script = _measured_fork(builder, tmp_path, cli)
    _add_config(builder.f.path, _perf_suite(script))
    for i in range(12):
        builder.fork_commit({"later.txt": f"{i}\n"}, f"fork: later work {i}")
    ctx = open_context(builder.f.path)
    repo = Repo.open(builder.f.path)
    commits = repo.log("-1", good, reverse=False) + repo.log(f"{good}..HEAD", first_parent=True)
    import random
    rng = random.Random(5)
    points = [MetricPoint("matmul/m128/latency", c.sha,
                          (106.0 if k >= 5 else 100.0) * (1 + 0.01 * rng.gauss(0, 1)), "ms", Better.LOWER,
                          suite="perf", commit_date=c.date, measured_at=k)
              for k, c in enumerate(commits)]
    with ctx.store.session_scope() as s:
        queries.add_metric_points(s, ctx.fork_id, points)
    r = cli("detect", "--bisect", "--json", repo=builder.f.path)
    assert r.rc == 0, r.err
    doc = r.json()
    assert len(doc["alerts"]) == 1 and len(doc["bisections"]) == 1
    b = doc["bisections"][0]
    assert b["status"] == "found" and b["alert"] == doc["alerts"][0]["id"]
    assert doc["alerts"][0]["status"] == "bisected" and doc["alerts"][0]["bisection"] == b["id"]
    again = cli("detect", "--bisect", "--json", repo=builder.f.path).json()
    assert again["bisections"] == []  # an alert is bisected once
    # the culprit is the upstream commit inside the bundle, as with `bisect --alert`
    shown = cli("bisect", "--alert", str(b["alert"]), "--json", repo=builder.f.path)
    assert shown.rc == 0, shown.err
    assert shown.json()["culprit"]["upstream_commit"] == ups[5]
