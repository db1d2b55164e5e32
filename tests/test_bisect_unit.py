"""Which unit a metric bisection judges by default: what the suite and the stored points declare (#16)."""
from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from forkflow.bisect.workflow import verdict_unit
from forkflow.config import load_config
from forkflow.context import open_context
from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.models import PAIRED_SAMPLES, Better, MetricPoint, Sha
from forkflow.store import queries
from forkflow.testing.gitrepo import ForkBuilder
from forkflow.tiers.tiers import ReportFormat, Suite, Tier, load_suites
from tests.test_bisect_git import _add_config, _measured_fork, _perf_suite, _store_point

GPU = (("device", "NVIDIA H200"),)
PAIRED = tuple(sorted((*GPU, PAIRED_SAMPLES)))


def _suite(per_sample: tuple[str, ...] = ()) -> Suite:
    return Suite("sweep", Tier.L2, "python sweep.py --report {report}", ReportFormat.METRICS,
                 metrics=("matmul.*",), per_sample=per_sample)


def test_the_flag_wins_over_every_declaration() -> None:
    suite = _suite(("matmul.*.vs_cublas",))
    u = verdict_unit("matmul.x.vs_cublas", True, PAIRED, suite)
    assert u.per_run and u.name == "run" and u.reason == "--per-run given"
    u = verdict_unit("matmul.x.ms", False, GPU, None)
    assert not u.per_run and u.reason == "--per-sample given"


def test_paired_samples_are_judged_one_by_one_on_a_gpu_too() -> None:
    u = verdict_unit("matmul.x.vs_cublas", None, PAIRED, None)
    assert u.name == "sample" and "samples are paired" in u.reason
    u = verdict_unit("matmul.x.tflops", None, GPU, None)
    assert u.name == "run" and "ran on a GPU (NVIDIA H200)" in u.reason


def test_the_suite_declares_per_sample_metrics_by_glob() -> None:
    suite = _suite(("matmul.*.vs_cublas",))
    u = verdict_unit("matmul.bf16.8192x8192x8192.vs_cublas", None, GPU, suite)
    assert u.name == "sample" and u.reason == "suite 'sweep' declares it per_sample ('matmul.*.vs_cublas')"
    assert verdict_unit("matmul.bf16.8192x8192x8192.tflops", None, GPU, suite).name == "run"


def test_without_a_stored_point_or_a_gpu_samples_are_the_unit() -> None:
    assert verdict_unit("m", None, None, None).reason == "no stored point says how it was measured"
    assert verdict_unit("m", None, (("device", "CPU"),), _suite()).name == "sample"
    assert verdict_unit("m", None, (), None).name == "sample"


def test_per_sample_is_a_list_of_strings_in_forkflow_toml(tmp_path: Path) -> None:
    cfg = tmp_path / "forkflow.toml"
    suite = '[[suite]]\nname = "sweep"\ntier = "L2"\nreport = "metrics"\ncommand = "true"\n'
    cfg.write_text(suite + 'per_sample = ["matmul.*.vs_cublas"]\n')
    (s,) = load_suites(load_config(cfg))
    assert s.per_sample == ("matmul.*.vs_cublas",)
    cfg.write_text(suite + 'per_sample = "matmul.*"\n')
    with pytest.raises(UserError, match="per_sample.*must be a list of strings"):
        load_suites(load_config(cfg))


def test_bisect_judges_a_paired_metric_per_sample_and_says_why(  # type: ignore[no-untyped-def]
        builder: ForkBuilder, tmp_path: Path, cli) -> None:
    good, bad, ups, script = _measured_fork(builder, tmp_path, cli)
    cmd = f"{sys.executable} {script}"
    _store_point(builder.f.path, "lat", bad, PAIRED)
    r = cli("bisect", "--metric", "lat", "--good", good, "--bad", bad, "--command", cmd, repo=builder.f.path)
    assert r.rc == 0, r.err
    assert "judging each sample: its stored points say its samples are paired" in " ".join(r.err.split())
    assert f"culprit: upstream commit {ups[5][:12]}" in " ".join(r.out.split())
    r = cli("bisect", "--metric", "lat", "--good", good, "--bad", bad, "--command", cmd, "--per-run", "--json",
            repo=builder.f.path)
    assert (r.json()["verdict_unit"], r.json()["verdict_unit_reason"]) == ("run", "--per-run given")


def test_bisect_follows_the_suites_per_sample_declaration(  # type: ignore[no-untyped-def]
        builder: ForkBuilder, tmp_path: Path, cli) -> None:
    good, bad, ups, script = _measured_fork(builder, tmp_path, cli)
    _add_config(builder.f.path, f'''
[[suite]]
name = "bench"
tier = "L2"
report = "metrics"
metrics = ["lat*"]
per_sample = ["lat.ratio"]
command = "{sys.executable} {script} --report {{report}}"
''')
    for metric in ("lat.ratio", "lat.ms"):  # both measured on a GPU, neither context says paired
        _store_point(builder.f.path, metric, bad, GPU)
    doc = cli("bisect", "--metric", "lat.ratio", "--good", good, "--bad", bad, "--json", repo=builder.f.path).json()
    assert doc["verdict_unit"] == "sample" and doc["verdict_unit_reason"] == \
        "suite 'bench' declares it per_sample ('lat.ratio')"
    assert doc["culprit"]["upstream_commit"] == ups[5]
    doc = cli("bisect", "--metric", "lat.ms", "--good", good, "--bad", bad, "--json", repo=builder.f.path).json()
    assert doc["verdict_unit"] == "run" and "ran on a GPU" in doc["verdict_unit_reason"]


def test_detect_bisect_judges_a_paired_metric_per_sample(  # type: ignore[no-untyped-def]
        builder: ForkBuilder, tmp_path: Path, cli) -> None:
    """`detect --bisect` picks the unit as `bisect` does: a paired GPU metric per sample."""
    good, bad, ups, script = _measured_fork(builder, tmp_path, cli)
    _add_config(builder.f.path, _perf_suite(script))
    for i in range(12):
        builder.fork_commit({"later.txt": f"{i}\n"}, f"fork: later work {i}")
    repo = Repo.open(builder.f.path)
    commits = repo.log("-1", good, reverse=False) + repo.log(f"{good}..HEAD", first_parent=True)
    rng = random.Random(5)
    points = [MetricPoint("matmul/m128/vs_cublas", c.sha, (106.0 if k >= 5 else 100.0) * (1 + 0.01 * rng.gauss(0, 1)),
                          "ratio", Better.LOWER, suite="perf", commit_date=c.date, measured_at=k, context=PAIRED)
              for k, c in enumerate(commits)]
    ctx = open_context(builder.f.path)
    with ctx.store.session_scope() as s:
        queries.add_metric_points(s, ctx.fork_id, points)
    r = cli("detect", "--bisect", repo=builder.f.path)
    assert r.rc == 0, r.err
    text = " ".join(r.out.split())
    assert "bisection 1 found" in text and "(judged each sample: its stored points say its samples are paired" in text
    b = cli("bisect", "--alert", "1", "--json", repo=builder.f.path).json()
    assert b["verdict_unit"] == "sample" and b["culprit"]["upstream_commit"] == ups[5]
