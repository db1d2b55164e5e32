"""Hostile and broken input to the report parsers and to signatures: a report fails, nothing
crashes, memory stays bounded (issues 13 and 14)."""
from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forkflow.tiers.reports import (
    MAX_MESSAGE,
    MAX_TEST_ID,
    TestOutcome,
    parse_junit,
    parse_lit,
    parse_metrics,
)
from forkflow.triage.signature import MAX_SIGNATURE, signature_of

FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


def _junit(tmp_path: Path, cases: str, name: str = "r.xml") -> Path:
    p = tmp_path / name
    p.write_text(f'<?xml version="1.0"?><testsuite>{cases}</testsuite>', encoding="utf-8")
    return p


def test_junit_with_no_failures(tmp_path: Path) -> None:
    r = parse_junit(_junit(tmp_path, '<testcase classname="a" name="t1"/><testcase name="t2"/>'))
    assert r.problem == "" and r.count(TestOutcome.PASS) == 2


def test_junit_with_10000_failures(tmp_path: Path) -> None:
    cases = "".join(f'<testcase classname="m" name="t{i}"><failure message="boom {i}">x</failure>'
                    f'</testcase>' for i in range(10_000))
    r = parse_junit(_junit(tmp_path, cases))
    assert r.count(TestOutcome.FAIL) == 10_000


def test_junit_50mb_failure_keeps_head_and_tail(tmp_path: Path) -> None:
    p = tmp_path / "big.xml"
    with p.open("w") as f:
        f.write('<testsuite><testcase name="t"><failure message="m">START\n')
        block = "noise line of a long failure\n" * 10_000
        for _ in range(170):  # about 50 MB
            f.write(block)
        f.write("RuntimeError: the real error at the end\n</failure>"
                "<system-out>captured tail</system-out></testcase></testsuite>")
    r = parse_junit(p)
    msg = r.results[0].message
    assert len(msg) <= MAX_MESSAGE and "START" in msg and "the real error at the end" in msg
    assert "captured tail" in msg
    assert signature_of(msg).text == "EXCEPTION: RuntimeError: the real error at the end"


def test_junit_binary_junk_and_invalid_utf8(tmp_path: Path) -> None:
    p = tmp_path / "junk.xml"
    p.write_bytes(b'<testsuite><testcase name="t"><failure message="x">\xff\xfe\x00\x1b[31m'
                  b'bad \xc3\x28 bytes</failure></testcase></testsuite>')
    r = parse_junit(p)  # invalid UTF-8 is a malformed report, never an exception
    assert r.problem or r.results
    junk = tmp_path / "random.xml"
    junk.write_bytes(bytes(range(256)) * 100)
    assert "malformed" in parse_junit(junk).problem


def test_junit_empty_message(tmp_path: Path) -> None:
    r = parse_junit(_junit(tmp_path, '<testcase name="t"><failure/></testcase>'))
    assert r.results[0].outcome is TestOutcome.FAIL and r.results[0].message == ""
    assert signature_of("").text.startswith("NO_OUTPUT")


def test_junit_50mb_test_id_is_capped(tmp_path: Path) -> None:
    p = tmp_path / "id.xml"
    p.write_text('<testsuite><testcase name="' + "n" * 50_000_000 + '"><failure/></testcase>'
                 '</testsuite>')
    r = parse_junit(p)
    assert len(r.results[0].test_id) == MAX_TEST_ID and "...#" in r.results[0].test_id


def test_junit_unknown_encoding_is_a_problem(tmp_path: Path) -> None:
    p = tmp_path / "enc.xml"
    p.write_bytes(b'<?xml version="1.0" encoding="no-such-enc"?><testsuite/>')
    assert "malformed" in parse_junit(p).problem


def test_junit_system_out_is_kept_for_failures(tmp_path: Path) -> None:
    r = parse_junit(_junit(tmp_path, '<testcase name="t"><failure message="Exit Code: 1"/>'
                           '<system-err>LLVM ERROR: out of registers</system-err></testcase>'))
    assert "LLVM ERROR: out of registers" in r.results[0].message
    assert signature_of(r.results[0].message).text == "CRASH: LLVM ERROR: out of registers"


def test_metrics_huge_integers_and_deep_nesting(tmp_path: Path) -> None:
    p = tmp_path / "m.json"
    big = "9" * 400
    p.write_text('{"metrics": [{"name": "a", "value": %s}, {"name": "b", "value": 1, '
                 '"samples": [%s]}]}' % (big, big))
    r = parse_metrics(p)
    assert "finite number" in r.problem and not r.metrics
    deep = tmp_path / "deep.json"
    deep.write_text('{"metrics": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert "nested too deeply" in parse_metrics(deep).problem


def test_lit_huge_elapsed(tmp_path: Path) -> None:
    p = tmp_path / "lit.json"
    p.write_text(json.dumps({"tests": [{"name": "S :: a.mlir", "code": "FAIL"}]})
                 .replace('"code"', '"elapsed": %s, "code"' % ("9" * 400)))
    r = parse_lit(p)
    assert r.results[0].outcome is TestOutcome.FAIL and r.results[0].duration_s == 0.0


@FUZZ
@given(st.binary(max_size=3000))
def test_fuzz_junit_never_raises(tmp_path: Path, data: bytes) -> None:
    p = tmp_path / "f.xml"
    p.write_bytes(b'<testsuite><testcase name="t"><failure>' + data)
    r = parse_junit(p)
    assert isinstance(r.problem, str)


@FUZZ
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids,
                                                                             max_size=4),
                    max_leaves=20))
def test_fuzz_metrics_and_lit_json_never_raise(tmp_path: Path, doc: object) -> None:
    p = tmp_path / "m.json"
    p.write_text(json.dumps({"metrics": doc, "tests": doc}))
    assert isinstance(parse_metrics(p).problem, str)
    assert isinstance(parse_lit(p).problem, str)


_PIECES = st.sampled_from(["Traceback (most recent call last):\n", '  File "/a/b.py", line 3, in f\n',
                           "E   AssertionError: x\n", "Assertion `x' failed.\n", "Stack dump:\n",
                           "# | ", "/~", "\x1b[31m", "\xff", "error: ", " #0 0x1 in f ", "\n",
                           "Exception ignored in: <x>\n", "t87: ", "::", " - "])


@FUZZ
@given(st.lists(_PIECES | st.text(max_size=30), max_size=60))
def test_fuzz_failure_text_gives_a_bounded_signature(parts: list[str]) -> None:
    sig = signature_of("".join(parts))
    assert len(sig.text) <= MAX_SIGNATURE


def test_pathological_lines_stay_linear() -> None:
    # sizes, not timings, are asserted: the time bound is measured in benchmarks/bench_triage.py
    for text in ("/~" * 500_000, "x" * 1_000_000, "Assertion `" + "a:" * 300_000,
                 " #0 0x1 " + "( (" * 200_000, "error: " + "/a" * 500_000):
        assert len(signature_of(text).text) <= MAX_SIGNATURE
