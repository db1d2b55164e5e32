"""The workload pack's registry, report writers, harness statistics, dtype rules, and CLI.

Nothing here needs the `gpu` extra: these run wherever forkflow's own tests run.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from forkflow.errors import UserError
from forkflow.models import Better
from forkflow.workloads import ReportFormat, Tier, Workload, all_workloads, get_workload
from forkflow.workloads.device import (
    Backend,
    DeviceInfo,
    ClockSampler,
    parse_dtypes,
    unsupported_reason,
)
from forkflow.workloads.harness import (
    Timing,
    calls_per_sample,
    coefficient_of_variation,
    measure_paired,
    paired_ratios,
    quantile,
    rotations_needed,
)
from forkflow.workloads.junit import CaseOutcome, CaseResult, to_xml, write_junit
from forkflow.workloads.matmul_sweep import (
    Shape,
    bytes_per_call,
    memory_shortfall,
    parse_shapes,
)
from forkflow.models import Metric
from forkflow.workloads.metrics import MetricsReport, write_metrics
from forkflow.workloads.suite_toml import add_suite, render_suite

H100 = DeviceInfo(Backend.CUDA, "NVIDIA H100", (9, 0), 80 << 30)
A100 = DeviceInfo(Backend.CUDA, "NVIDIA A100", (8, 0), 80 << 30)
T4 = DeviceInfo(Backend.CUDA, "Tesla T4", (7, 5), 16 << 30)


# -- registry -----------------------------------------------------------------------------------

def test_registry_lists_every_workload_as_data() -> None:
    ws = all_workloads()
    assert list(ws) == ["kernels", "customer-kernels", "matmul-sweep", "compile-time", "fsdp2"]
    for w in ws.values():
        assert "{report}" in w.command and w.command.startswith("python -m forkflow.workloads.")
        assert (w.report is ReportFormat.JUNIT) == (w.tier is Tier.L1)
        assert (w.expect_tests is not None) == (w.report is ReportFormat.JUNIT)
    assert ws["matmul-sweep"].needs_gpu and not ws["kernels"].needs_gpu
    assert ws["kernels"].expect_tests == 21
    # what runs without a GPU fits a 2-core CI machine (the local runner refuses more CPUs than it has)
    assert all(dict(w.resources)["cpus"] <= 2 for w in ws.values() if not w.needs_gpu)


def test_listing_imports_no_gpu_package() -> None:
    # `forkflow workloads list` must work without the gpu extra: torch/triton/helion blocked.
    code = ("import sys\nfor m in ('torch', 'triton', 'helion'): sys.modules[m] = None\n"
            "from forkflow.workloads import all_workloads\nprint(len(all_workloads()))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "5"


def test_unknown_workload_names_the_known_ones() -> None:
    with pytest.raises(UserError, match="no workload named 'matmul-fp9'; known: kernels"):
        get_workload("matmul-fp9")


def test_missing_packages_are_named() -> None:
    w = Workload(name="x", tier=Tier.L1, module="kernels", report=ReportFormat.JUNIT,
                 description="", requires=("json", "no_such_package_xyz"))
    assert w.missing_packages() == ("no_such_package_xyz",)


def test_list_says_a_gpu_workload_needs_a_gpu_where_there_is_none(cli) -> None:  # type: ignore[no-untyped-def]
    torch = pytest.importorskip("torch")
    gpu = bool(torch.cuda.is_available())
    w = Workload(name="x", tier=Tier.L2, module="matmul_sweep", report=ReportFormat.METRICS,
                 description="", needs_gpu=True, requires=("json",))
    assert w.missing_here() == (() if gpu else ("a CUDA GPU",))
    assert replace(w, needs_gpu=False).missing_here() == ()
    rows = {r["name"]: r for r in cli("workloads", "list", "--json").json()}
    sweep = rows["matmul-sweep"]
    assert ("a CUDA GPU" in sweep["missing"]) is not gpu and sweep["ready"] is (sweep["missing"] == [])
    if not gpu:
        assert not sweep["ready"]


def _cli_without(blocked: tuple[str, ...], *argv: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process where `blocked` packages cannot be imported (as if not installed)."""
    code = (f"import sys\nfor m in {blocked!r}: sys.modules[m] = None\n"
            f"from forkflow.cli.main import main\nsys.exit(main({list(argv)!r}))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)


def test_compile_time_needs_torch_alone() -> None:
    # compile_time imports torch only (Inductor: C++ on CPU, the triton torch's CUDA build brings)
    p = _cli_without(("triton", "helion"), "workloads", "list", "--json")
    assert p.returncode == 0, p.stderr
    missing = {w["name"]: w["missing"] for w in json.loads(p.stdout)}
    assert missing["compile-time"] == [] and missing["fsdp2"] == []
    assert missing["kernels"] == ["triton"]


def test_run_without_its_packages_names_them_and_what_to_install(tmp_path: Path) -> None:
    p = _cli_without(("torch",), "workloads", "run", "compile-time", "--report", str(tmp_path / "r.json"))
    assert p.returncode == 1
    assert "workload 'compile-time' needs torch, not installed here; run: pip install 'forkflow[gpu]'" \
        in " ".join(p.stderr.split())
    assert not (tmp_path / "r.json").exists()


# -- JUnit and metrics ---------------------------------------------------------------------------

CASES = [
    CaseResult("kernels.matmul", "matmul[fp16-8x8x8]", CaseOutcome.PASSED, 0.5),
    CaseResult("kernels.matmul", "matmul[fp8-8x8x8]", CaseOutcome.SKIPPED, 0.0, "fp8 needs 8.9"),
    CaseResult("kernels.softmax", "softmax[fp32-4x4]", CaseOutcome.FAILED, 0.1, "1 non-finite value(s)",
               "NaN at [3, 0] <&>"),
    CaseResult("kernels.rope", "rope[bf16-1x1x1x2]", CaseOutcome.ERROR, 0.2, "out of memory on CPU"),
]


def test_junit_counts_and_outcomes_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "r.xml"
    write_junit(path, "kernels", CASES, {"device": "cpu"})
    ts = ET.parse(path).getroot().find("testsuite")
    assert ts is not None
    assert (ts.get("tests"), ts.get("failures"), ts.get("errors"), ts.get("skipped")) == ("4", "1", "1", "1")
    tcs = ts.findall("testcase")
    assert [tc.get("name") for tc in tcs] == [c.name for c in CASES]
    assert tcs[2].find("failure").text == "NaN at [3, 0] <&>"  # type: ignore[union-attr]
    assert tcs[1].find("skipped").get("message") == "fp8 needs 8.9"  # type: ignore[union-attr]
    assert not list(tmp_path.joinpath("deep").glob(".r.xml.*"))  # no temporary left behind


def test_junit_is_what_the_validation_tier_reads(tmp_path: Path) -> None:
    from forkflow.tiers.reports import parse_junit

    path = tmp_path / "r.xml"
    path.write_bytes(to_xml("kernels", CASES))
    parsed = parse_junit(path)
    assert not parsed.problem
    assert len(parsed.results) == 4
    assert sorted(r.outcome.name for r in parsed.results) == ["ERROR", "FAIL", "PASS", "SKIP"]


def test_metrics_json_is_what_the_validation_tier_reads(tmp_path: Path) -> None:
    from forkflow.tiers.reports import parse_metrics

    path = tmp_path / "m.json"
    write_metrics(path, MetricsReport((Metric("matmul.bf16.8x8x8.tflops", 1.5, "TFLOP/s", Better.HIGHER,
                                              (1.4, 1.5, 1.6)),), info={"device": "x"}))
    doc = json.loads(path.read_text())
    assert doc["metrics"][0] == {"name": "matmul.bf16.8x8x8.tflops", "value": 1.5, "unit": "TFLOP/s",
                                 "better": "higher", "samples": [1.4, 1.5, 1.6]}
    parsed = parse_metrics(path)
    assert not parsed.problem and [m.name for m in parsed.metrics] == ["matmul.bf16.8x8x8.tflops"]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_metric_is_refused_and_nothing_written(tmp_path: Path, bad: float) -> None:
    path = tmp_path / "m.json"
    with pytest.raises(ValueError, match="refusing"):
        write_metrics(path, MetricsReport((Metric("x", bad, "s", Better.LOWER),)))
    assert not path.exists()


# -- harness statistics (pure) --------------------------------------------------------------------

def test_quantiles_and_cv_match_numpy() -> None:
    import numpy as np

    xs = [3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.0, 6.0]
    for q in (0.0, 0.25, 0.5, 0.75, 1.0):
        assert quantile(xs, q) == pytest.approx(float(np.quantile(xs, q)))
    assert coefficient_of_variation(xs) == pytest.approx(float(np.std(xs, ddof=1) / np.mean(xs)))
    assert coefficient_of_variation([2.0]) == 0.0
    with pytest.raises(ValueError):
        quantile([], 0.5)


def test_rotation_covers_twice_the_l2_and_samples_are_whole_rotations() -> None:
    l2 = 60 << 20
    assert rotations_needed(400 << 20, l2) == 1        # one call already streams past L2
    assert rotations_needed(96 << 20, l2) == 2         # 4096^3 bf16: a, b, c = 96 MiB
    assert rotations_needed(1 << 20, l2) == 64         # capped
    assert calls_per_sample(1.6, 40.0, 1) == 25
    n = calls_per_sample(0.03, 40.0, 3)
    assert n % 3 == 0 and n >= 1333
    assert calls_per_sample(100.0, 40.0, 2) == 2       # at least one full rotation


def test_paired_samples_alternate_and_their_ratio_is_per_sample() -> None:
    order: list[str] = []
    got = measure_paired({"a": [lambda: order.append("a")], "b": [lambda: order.append("b")]},
                         device="cpu", repeats=3, target_ms=0.0)
    assert [len(t.samples_ms) for t in got.values()] == [3, 3]
    assert order[-2:] == ["a", "b"] and order.count("a") == order.count("b")
    a = Timing((2.0, 4.0, 3.0), "cuda-graph", 1)
    b = Timing((1.0, 2.0, 1.5), "cuda-graph", 1)
    assert paired_ratios(a, b) == (2.0, 2.0, 2.0)


def test_clock_sampler_without_nvml_reads_nothing_and_says_so() -> None:
    with ClockSampler(period_s=0.001) as s:
        pass
    assert s.summary() == {} or s.summary()["reads"] >= 1


# -- dtypes and hardware ------------------------------------------------------------------------

def test_dtype_the_hardware_lacks_is_named_with_its_need() -> None:
    assert unsupported_reason("bf16", H100) is None and unsupported_reason("fp8", H100) is None
    assert unsupported_reason("fp8", A100) == ("fp8 (float8_e4m3fn) needs compute capability 8.9 or "
                                               "newer; NVIDIA A100 has 8.0")
    assert "bf16 (bfloat16) needs compute capability 8.0" in str(unsupported_reason("bf16", T4))
    assert unsupported_reason("fp16", T4) is None
    assert "TRITON_INTERPRET=1" in str(unsupported_reason("fp32", DeviceInfo(Backend.CPU, "CPU")))
    assert unsupported_reason("fp8", DeviceInfo(Backend.INTERPRETER, "interp")) is None


def test_unknown_dtype_is_a_user_error() -> None:
    assert parse_dtypes("bf16, fp8") == ("bf16", "fp8")
    with pytest.raises(UserError, match="unknown dtype 'fp4'; use one or more of fp32, fp16, bf16, fp8"):
        parse_dtypes("bf16,fp4")
    with pytest.raises(UserError, match="no dtype"):
        parse_dtypes(" , ")


# -- sweep shapes and memory --------------------------------------------------------------------

@pytest.mark.parametrize("text", ["8192x8192", "0x8x8", "axbxc", "8x8x-8", ","])
def test_bad_shape_is_a_user_error(text: str) -> None:
    with pytest.raises(UserError):
        parse_shapes(text)


def test_shape_that_does_not_fit_is_reported_as_out_of_memory() -> None:
    s = parse_shapes("16x8192x8192, 300000x300000x300000")
    assert s == (Shape(16, 8192, 8192), Shape(300000, 300000, 300000))
    assert bytes_per_call(s[0], "bf16") == 2 * (16 * 8192 + 8192 * 8192 + 16 * 8192)
    assert memory_shortfall(s[0], "bf16", 1, 139 << 30) is None
    msg = memory_shortfall(s[1], "fp16", 1, 139 << 30)
    assert msg == ("out of memory: 300000x300000x300000 fp16 needs 670.6 GiB of device memory "
                   "(1 operand set(s)), 139.0 GiB free")


# -- forkflow.toml ------------------------------------------------------------------------------

def _config(tmp_path: Path, extra: str = "") -> Path:
    p = tmp_path / "forkflow.toml"
    p.write_text('[upstream]\nremote = "upstream"\n' + extra)
    return p


def test_add_appends_a_suite_the_loader_accepts(tmp_path: Path) -> None:
    from forkflow.config import load_config
    from forkflow.tiers.tiers import load_suites

    cfg = _config(tmp_path)
    add_suite(tmp_path, get_workload("kernels").suite_entry())
    add_suite(tmp_path, get_workload("matmul-sweep").suite_entry(
        "sweep-h200", ("python/triton/**",), gpus=1, timeout="45m"))
    suites = load_suites(load_config(cfg))
    assert [s.name for s in suites] == ["kernels", "sweep-h200"]
    k, s = suites
    assert k.tier.value == "L1" and k.report.value == "junit" and k.expect_tests == 21
    assert k.command == "python -m forkflow.workloads.kernels --report {report}"
    assert s.tier.value == "L2" and s.report.value == "metrics" and s.expect_tests is None
    assert s.paths == ("python/triton/**",) and s.timeout_s == 45 * 60
    assert s.resource_map["gpus"] == 1
    assert s.metrics == ("matmul.*",) and k.metrics == ()  # bisect finds the sweep by its metrics
    assert s.per_sample == ("matmul.*.vs_cublas",) and k.per_sample == ()  # paired: judged per sample


def test_add_refuses_a_taken_name_and_leaves_the_file_alone(tmp_path: Path) -> None:
    cfg = _config(tmp_path, '\n[[suite]]\nname = "kernels"\ncommand = "true"\n')
    before = cfg.read_bytes()
    with pytest.raises(UserError, match=r"forkflow.toml:5: a suite named 'kernels' already exists"):
        add_suite(tmp_path, get_workload("kernels").suite_entry())
    assert cfg.read_bytes() == before


def test_add_refuses_an_entry_the_loader_rejects(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    entry = get_workload("fsdp2").suite_entry(timeout="soon")
    with pytest.raises(UserError, match="timeout"):
        add_suite(tmp_path, entry)
    assert "[[suite]]" not in cfg.read_text()


def test_add_without_config_says_to_init(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no forkflow.toml .* forkflow init"):
        add_suite(tmp_path, get_workload("kernels").suite_entry())


@pytest.mark.parametrize("args,line", [
    (("--timeout", "soon"), "error: --timeout 'soon' is not a duration; write it like 90s, 20m or 2h"),
    (("--suite", "a b"), "error: --suite 'a b' is not a suite name; use up to 100 letters, digits, '.', '_' "
                         "or '-', starting with a letter or digit"),
])
def test_cli_add_names_the_option_it_refuses(cli, tmp_path: Path, args: tuple[str, ...],  # type: ignore[no-untyped-def]
                                             line: str) -> None:
    cfg = _config(tmp_path)
    before = cfg.read_bytes()
    r = cli("workloads", "add", "customer-kernels", *args, repo=tmp_path)
    assert r.rc == 1 and " ".join(r.err.split()) == line  # not a line of a file that was never written
    assert cfg.read_bytes() == before


def test_suite_strings_are_escaped() -> None:
    import tomllib

    entry = {"name": "q", "command": 'echo "a\\b" {report}', "paths": ["é/**"], "resources": {"gpus": 1}}
    assert tomllib.loads(render_suite(entry))["suite"][0] == entry


def test_cli_list_and_add(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("workloads", "list", "--json")
    assert r.rc == 0
    names = [w["name"] for w in r.json()]
    assert names == ["kernels", "customer-kernels", "matmul-sweep", "compile-time", "fsdp2"]
    _config(tmp_path)
    r = cli("workloads", "add", "compile-time", "--gpus", "1", "--path", "python/**", repo=tmp_path)
    assert r.rc == 0, r.err
    assert "added suite 'compile-time' (L2, metrics)" in r.out
    text = (tmp_path / "forkflow.toml").read_text()
    assert 'command = "python -m forkflow.workloads.compile_time --report {report}"' in text
    assert "resources = { cpus = 2, gpus = 1 }" in text
    r = cli("workloads", "add", "compile-time", repo=tmp_path)
    assert r.rc == 1 and "already exists" in r.err
    r = cli("workloads", "run", "no-such")
    assert r.rc == 1 and "no workload named 'no-such'" in r.err


def test_reports_are_written_with_the_users_umask_not_0600(tmp_path: Path) -> None:
    import os
    import stat

    from forkflow.workloads.junit import write_atomic

    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "r" / "report.json", b"{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r" / "report.json").stat().st_mode) == 0o644
    assert [p.name for p in (tmp_path / "r").iterdir()] == ["report.json"]  # no temporary left
