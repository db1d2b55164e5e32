"""Report and log parsing: JUnit (good, truncated, malformed, garbage), lit, metrics, huge logs."""
from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from forkflow.tiers.reports import (
    TestOutcome,
    clean_text,
    count_from_output,
    log_tail,
    parse_junit,
    parse_lit,
    parse_metrics,
)

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.test_a" name="test_ok" file="tests/test_a.py" time="0.5"/>
<testcase classname="tests.test_a.TestK" name="test_bad" file="tests/test_a.py" time="0.1">
  <failure message="assert 1 == 2">E   assert 1 == 2#x1B[31m red\x1b[0m\x00</failure></testcase>
<testcase classname="tests.test_b" name="test_skip"><skipped message="no gpu"/></testcase>
<testcase classname="tests.test_b" name="test_err"><error message="fixture boom"/></testcase>
</testsuite></testsuites>"""


def test_junit_outcomes_ids_and_messages(tmp_path: Path) -> None:
    p = tmp_path / "r.xml"
    p.write_text(JUNIT)
    r = parse_junit(p)
    assert r.problem == ""
    assert [(t.test_id, t.outcome) for t in r.results] == [
        ("tests/test_a.py::test_ok", TestOutcome.PASS),
        ("tests/test_a.py::TestK::test_bad", TestOutcome.FAIL),
        ("tests.test_b::test_skip", TestOutcome.SKIP),
        ("tests.test_b::test_err", TestOutcome.ERROR),
    ]
    assert r.total == 4 and r.ran == 3
    bad = r.results[1]
    assert "assert 1 == 2" in bad.message and bad.duration_s == 0.1
    assert "\x1b" not in bad.message and "#x1B" not in bad.message and " red" in bad.message


def test_junit_truncated_keeps_tests_read_before_the_damage(tmp_path: Path) -> None:
    p = tmp_path / "r.xml"
    p.write_text(JUNIT[: JUNIT.index("<testcase classname=\"tests.test_b\" name=\"test_skip\"") + 30])
    r = parse_junit(p)
    assert "malformed or truncated" in r.problem and "after 2 tests" in r.problem
    assert r.total == 2


def test_junit_malformed_binary_and_empty(tmp_path: Path) -> None:
    garbage = tmp_path / "g.xml"
    garbage.write_bytes(b"\x00\xff\xfe<<not xml" * 100)
    assert "malformed" in parse_junit(garbage).problem
    empty = tmp_path / "e.xml"
    empty.write_bytes(b"")
    assert parse_junit(empty).problem == "the report is empty (0 bytes)"
    none = tmp_path / "n.xml"
    none.write_text("<testsuites><testsuite/></testsuites>")
    assert parse_junit(none).problem == "the report lists no tests"
    missing = parse_junit(tmp_path / "absent.xml")
    assert not missing.exists and missing.problem == "no report was written"


def test_lit_json_and_text(tmp_path: Path) -> None:
    j = tmp_path / "lit.json"
    j.write_text(json.dumps({"__version__": [18], "tests": [
        {"name": "Triton :: conv/a.mlir", "code": "PASS", "elapsed": 0.2},
        {"name": "Triton :: conv/b.mlir", "code": "FAIL", "output": "CHECK: not found\x1b[1m"},
        {"name": "Triton :: conv/c.mlir", "code": "UNSUPPORTED"},
        {"name": "Triton :: conv/d.mlir", "code": "XFAIL"}]}))
    r = parse_lit(j)
    assert [t.outcome for t in r.results] == [TestOutcome.PASS, TestOutcome.FAIL, TestOutcome.SKIP, TestOutcome.PASS]
    assert r.results[1].message == "CHECK: not found"
    t = tmp_path / "lit.txt"
    t.write_text("-- Testing: 3 tests --\nPASS: Triton :: a.mlir (1 of 3)\nFAIL: Triton :: b.mlir (2 of 3)\n"
                 "noise\nUNSUPPORTED: Triton :: c.mlir (3 of 3)\n")
    assert [x.test_id for x in parse_lit(t).results] == ["Triton :: a.mlir", "Triton :: b.mlir", "Triton :: c.mlir"]
    bad = tmp_path / "bad.json"
    bad.write_text('{"tests": [{"name": "x", "co')
    assert "malformed or truncated" in parse_lit(bad).problem


def test_metrics_good_and_bad(tmp_path: Path) -> None:
    p = tmp_path / "m.json"
    p.write_text(json.dumps({"metrics": [
        {"name": "mm.tflops", "value": 10.5, "unit": "TFLOP/s", "better": "higher", "samples": [10.4, 10.6]},
        {"name": "compile.s", "value": 3, "unit": "s", "better": "lower"},
        {"name": "broken", "value": "fast", "unit": "x"},
        {"name": "dir", "value": 1, "better": "sideways"}]}))
    r = parse_metrics(p)
    assert [m.name for m in r.metrics] == ["mm.tflops", "compile.s"]
    assert r.metrics[0].samples == (10.4, 10.6)
    assert "metric 'broken': value must be a finite number" in r.problem
    assert "better must be 'higher' or 'lower'" in r.problem
    assert r.count(TestOutcome.ERROR) == 2
    p.write_text('{"metrics": [{"name": "a", "value": 1')
    assert "malformed or truncated" in parse_metrics(p).problem
    p.write_text('{"values": []}')
    assert "no 'metrics' list" in parse_metrics(p).problem


def test_count_from_output_pytest_lit_custom_and_ansi(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_bytes(b"\x1b[32m==== 5 passed, 2 failed, 3 skipped, 4 deselected, 1 warning in 0.5s ====\x1b[0m\n")
    assert count_from_output(log) == 10
    log.write_text("stuff\n3 passed, 1 error in 0.02s\n")
    assert count_from_output(log) == 4
    log.write_text("Testing Time: 1.0s\n\nTotal Discovered Tests: 12\n  Passed  : 9\n  Excluded: 2\n  Unsupported: 1\n")
    assert count_from_output(log) == 10
    log.write_text("Ran 7 tests in 0.1s\n")
    assert count_from_output(log) is None
    assert count_from_output(log, r"Ran (\d+) tests") == 7


def test_huge_log_is_streamed_not_loaded(tmp_path: Path) -> None:
    log = tmp_path / "huge.log"
    line = b"\x1b[31mnoise \xff\xfe binary " + b"x" * 200 + b"\n"
    with log.open("wb") as f:
        chunk = line * 10_000
        for _ in range(5):  # ~12 MB
            f.write(chunk)
        f.write(b"y" * 3_000_000 + b"\n")  # one 3 MB line
        f.write(b"42 passed in 9.0s\n")
    tracemalloc.start()
    n = count_from_output(log)
    tail = log_tail(log, 4096)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert n == 42
    assert tail.endswith("42 passed in 9.0s\n") and len(tail) <= 4096
    assert peak < 2_000_000, peak


def test_clean_text_strips_ansi_and_control() -> None:
    assert clean_text("\x1b[1;31mred\x1b[0m \x07bell\x00") == "red bell"
    assert len(clean_text("x" * 10_000, limit=100)) == 100
