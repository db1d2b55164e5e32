"""Bisecting an L2 metric: which suite measures it, runs as the statistical unit, the alert's span."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from forkflow.bisect.probes import Measurement, MeasureStatus
from forkflow.bisect.workflow import RunMedians, measurement_suite, suite_command
from forkflow.errors import UserError
from forkflow.models import Better, MetricPoint, Sha
from forkflow.regress.alerts import config_changes, series_changes
from forkflow.regress.detect import detect_change_points
from forkflow.testing.gitrepo import ForkBuilder
from forkflow.tiers.tiers import ReportFormat, Suite, Tier
from tests.test_bisect_git import _add_config, _init, _measured_fork, _store_point


def _suite(name: str, metrics: tuple[str, ...] = (), report: ReportFormat = ReportFormat.METRICS) -> Suite:
    return Suite(name, Tier.L2, f"python {name}.py --report {{report}}", report, metrics=metrics)


def test_the_suite_that_stored_the_metric_comes_first() -> None:
    suites = [_suite("a", ("matmul.*",)), _suite("b")]
    assert measurement_suite(suites, "matmul.x", "b").name == "b"


def test_the_suite_that_declares_the_metric_is_used_without_a_stored_point() -> None:
    suites = [_suite("unit", report=ReportFormat.JUNIT), _suite("sweep", ("matmul.*",)), _suite("fsdp", ("fsdp2.*",))]
    assert measurement_suite(suites, "matmul.bf16.8192.tflops", None).name == "sweep"
    assert measurement_suite(suites, "fsdp2.tokens_per_s", "gone-suite").name == "fsdp"


def test_the_only_metrics_suite_is_used() -> None:
    assert measurement_suite([_suite("unit", report=ReportFormat.JUNIT), _suite("bench")], "lat", None).name == "bench"


def test_the_error_names_the_suites_it_considered() -> None:
    suites = [_suite("sweep", ("matmul.*",)), _suite("fsdp", ("fsdp2.*",))]
    with pytest.raises(UserError) as e:
        measurement_suite(suites, "softmax.ms", None)
    assert "no metrics suite declares it; considered 'sweep' (L2, metrics = ['matmul.*']); " \
           "'fsdp' (L2, metrics = ['fsdp2.*'])" in str(e.value)
    assert "pass --command CMD" in str(e.value)
    with pytest.raises(UserError, match="all declare it"):
        measurement_suite([_suite("a", ("*",)), _suite("b", ("m*",))], "ms", None)
    with pytest.raises(UserError, match="has no metrics suite"):
        measurement_suite([_suite("unit", report=ReportFormat.JUNIT)], "ms", None)


def test_suite_command_writes_to_the_bisection_output() -> None:
    cmd, env = suite_command(_suite("bench"))
    assert cmd == 'python bench.py --report "$FORKFLOW_METRICS_OUT"' and env == {}


def test_bisect_without_command_or_points_uses_the_declaring_suite(  # type: ignore[no-untyped-def]
        builder: ForkBuilder, tmp_path: Path, cli) -> None:
    good, bad, ups, script = _measured_fork(builder, tmp_path, cli)
    _add_config(builder.f.path, f'''
[[suite]]
name = "unit"
command = "true"

[[suite]]
name = "bench"
tier = "L2"
report = "metrics"
metrics = ["lat*"]
command = "python3 {script} --report {{report}}"
''')
    r = cli("bisect", "--metric", "lat", "--good", good, "--bad", bad, "--json", repo=builder.f.path)
    assert r.rc == 0, r.err
    assert r.json()["culprit"]["upstream_commit"] == ups[5]
    r = cli("bisect", "--metric", "other", "--good", good, "--bad", bad, repo=builder.f.path)
    assert r.rc == 1 and "considered 'bench' (L2, metrics = ['lat*'])" in " ".join(r.err.split())


class _Fixed:
    def __init__(self, m: Measurement) -> None:
        self.m = m

    def measure(self, rev: Sha) -> Measurement:
        return self.m

    def close(self) -> None:
        pass


def test_run_medians_count_each_run_once() -> None:
    ok = Measurement(MeasureStatus.OK, (3.0, 1.0, 2.0, 10.0), unit="ms", better=Better.LOWER)
    assert RunMedians(_Fixed(ok)).measure(Sha("a")).samples == (2.5,)
    bad = Measurement(MeasureStatus.ERROR, detail="crashed")
    assert RunMedians(_Fixed(bad)).measure(Sha("a")) == bad


def test_the_alert_span_covers_points_that_could_sit_on_either_side() -> None:
    # a 2% step at index 20 with 0.7% noise; point 18 looks like the after level
    base = [100.0, 100.6, 99.5, 100.2, 99.4, 100.9, 99.8, 100.1, 99.3, 100.5,
            99.9, 100.4, 99.6, 100.7, 99.2, 100.0, 100.3, 99.7, 101.9, 99.9]
    after = [102.1, 101.6, 102.5, 101.9, 102.3, 102.0, 101.4, 102.6, 102.2, 101.8]
    (c,) = detect_change_points(base + after)
    assert c.index == 20 and c.span[0] <= 18 and c.span[1] >= 20
    clean = [100.0] * 10 + [110.0] * 10
    (c2,) = detect_change_points(clean)
    assert c2.span == (10, 10)


def _pts(values: list[float], configs: list[str]) -> list[MetricPoint]:
    return [MetricPoint("m", Sha(f"{i:040x}"), v, "ms", Better.LOWER, commit_date=i,
                        context=(("config", c), ("device", "H200")))
            for i, (v, c) in enumerate(zip(values, configs))]


def test_a_changed_config_is_its_own_event_not_a_regression() -> None:
    pts = _pts([100.0] * 10 + [108.0] * 10, ["A"] * 10 + ["B"] * 10)
    assert series_changes(pts) == []  # the 8% step came with the new config
    (c,) = config_changes(pts)
    assert (c.good_rev, c.bad_rev) == (Sha(f"{9:040x}"), Sha(f"{10:040x}"))
    assert (c.before_config, c.after_config, c.before, c.after) == ("A", "B", 100.0, 108.0)
    same = _pts([100.0] * 10 + [108.0] * 10, ["A"] * 20)
    assert len(series_changes(same)) == 1 and config_changes(same) == []


def test_the_context_travels_from_the_report_to_the_store(tmp_path: Path) -> None:
    from forkflow.store import queries
    from forkflow.store.session import Store
    from forkflow.tiers.reports import parse_metrics

    report = tmp_path / "r.json"
    report.write_text(json.dumps({"metrics": [{"name": "m", "value": 1.5, "unit": "ms", "better": "lower",
                                               "context": {"config": "BLOCK_M=128", "sm_clock_mhz": 1980}}]}))
    (m,) = parse_metrics(report).metrics
    assert m.context == (("config", "BLOCK_M=128"), ("sm_clock_mhz", "1980"))
    assert m.to_json()["context"] == {"config": "BLOCK_M=128", "sm_clock_mhz": "1980"}
    store = Store.open(f"sqlite:///{tmp_path / 's.db'}")
    with store.session_scope() as s:
        fid = queries.fork_id(s, "f")
        queries.add_metric_points(s, fid, [MetricPoint("m", Sha("a" * 40), 1.5, "ms", Better.LOWER,
                                                       context=m.context)])
    with store.session_scope() as s:
        (p,) = queries.metric_series(s, fid, "m")
        assert p.context == m.context and p.config == "BLOCK_M=128"
    store.dispose()
    report.write_text(json.dumps({"metrics": [{"name": "m", "value": 1.5, "context": ["x"]}]}))
    assert "context must be an object" in parse_metrics(report).problem


def test_detect_reports_a_config_change_and_no_alert(builder: ForkBuilder, cli) -> None:  # type: ignore[no-untyped-def]
    from forkflow.context import open_context
    from forkflow.git.repo import Repo
    from forkflow.store import queries

    builder.upstream_commit({"a.txt": "0\n"}, "base (#1)")
    builder.branch_fork()
    for i in range(16):
        builder.fork_commit({"a.txt": f"{i}\n"}, f"fork: {i}")
    _init(cli, builder.f.path)
    commits = Repo.open(builder.f.path).log("HEAD", first_parent=True)
    pts = [MetricPoint("mm.tflops", c.sha, 600.0 if k < 8 else 640.0, "TFLOP/s", Better.HIGHER,
                       commit_date=c.date, context=(("config", "A" if k < 8 else "B"),))
           for k, c in enumerate(commits)]
    ctx = open_context(builder.f.path)
    with ctx.store.session_scope() as s:
        queries.add_metric_points(s, ctx.fork_id, pts)
    r = cli("detect", "--json", repo=builder.f.path)
    assert r.rc == 0, r.err
    doc = r.json()
    assert doc["alerts"] == []
    (c,) = doc["config_changes"]
    assert (c["before_config"], c["after_config"], c["bad"]) == ("A", "B", commits[8].sha)
    text = " ".join(cli("detect", repo=builder.f.path).out.split())
    assert "config change on mm.tflops" in text and "A -> B" in text


def test_the_l2_metric_page_shows_config_context_and_changes(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from forkflow.store import queries
    from forkflow.store.session import Store
    from forkflow.web.app import create_app

    url = f"sqlite:///{tmp_path / 'w.db'}"
    store = Store.open(url)
    with store.session_scope() as s:
        fid = queries.fork_id(s, "triton:main")
        queries.add_metric_points(s, fid, [
            MetricPoint("mm.tflops", Sha(f"{i:040x}"), 600.0 + (40 if i >= 4 else 0), "TFLOP/s", Better.HIGHER,
                        commit_date=1000 + i, context=(("config", "A<b>" if i < 4 else "B"), ("driver", "580.159.04")))
            for i in range(8)])
    store.dispose()
    with TestClient(create_app(url)) as c:
        html = c.get("/l2/metrics/mm.tflops").text
        doc = c.get("/l2/metrics/mm.tflops", headers={"accept": "application/json"}).json()
    assert "measured with" in html and "580.159.04" in html and "config changes" in html
    assert "A&lt;b&gt;" in html and "A<b>" not in html  # escaped
    assert doc["measured_with"] == {"config": "B", "driver": "580.159.04"}
    assert [(c["before_config"], c["after_config"]) for c in doc["config_changes"]] == [("A<b>", "B")]
    assert [p["config"] for p in doc["points"]][:2] == ["A<b>", "A<b>"]


def test_gpu_metrics_are_bisected_run_by_run(builder: ForkBuilder, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    from forkflow.bisect.workflow import runs_are_the_unit

    assert runs_are_the_unit((("device", "NVIDIA H200"),)) and not runs_are_the_unit((("device", "CPU"),))
    assert not runs_are_the_unit(())
    good, bad, ups, script = _measured_fork(builder, tmp_path, cli)
    cmd = f"python3 {script}"
    _store_point(builder.f.path, "lat", bad, (("device", "NVIDIA H200"),))
    r = cli("bisect", "--metric", "lat", "--good", good, "--bad", bad, "--command", cmd, "--json", repo=builder.f.path)
    assert r.rc == 0, r.err
    doc = r.json()
    assert doc["verdict_unit"] == "run" and doc["culprit"]["upstream_commit"] == ups[5]
    ends = doc["stages"][0]["measurements"]
    assert len(ends[good]) >= 5 and doc["measurements"] == sum(len(v) for st in doc["stages"]
                                                               for v in st["measurements"].values())
    r = cli("bisect", "--metric", "lat", "--good", good, "--bad", bad, "--command", cmd, "--per-sample", "--json",
            repo=builder.f.path)
    assert r.json()["verdict_unit"] == "sample"
