"""Parse what a suite leaves behind: JUnit XML, lit results, metrics JSON, and its log.

Pure apart from reading the given files, and always as streams: JUnit is read with
`iterparse` (elements freed as they are read), logs line by line with bounded line length or
from the end, so a multi-gigabyte log or report never sits in memory.  Binary garbage is
decoded with replacement and ANSI escapes are stripped.  A malformed or truncated report is
not an exception: `ParsedReport.problem` says what is wrong and the tests read before the
damage are kept.

Test ids: JUnit `file::Class::name` when the testcase has a `file` attribute (pytest with
`-o junit_family=xunit1`), else `classname::name`; lit `Suite :: path/to/test`; metrics: the
metric's name.
"""
from __future__ import annotations

import enum
import io
import json
import math
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from forkflow.models import Better, Metric

MAX_MESSAGE = 4000       # characters of a failure message kept per test
MAX_LINE = 64 * 1024     # bytes of one log line looked at
MAX_JSON_BYTES = 256 * 1024 * 1024

_ANSI = re.compile(r"(?:\x1b|#x1B)\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class Outcome(str, enum.Enum):
    """One test's outcome."""

    PASS = "PASS"
    FAIL = "FAIL"
    SKIP = "SKIP"
    ERROR = "ERROR"

    @property
    def ran(self) -> bool:
        return self is not Outcome.SKIP

    @property
    def bad(self) -> bool:
        return self in (Outcome.FAIL, Outcome.ERROR)


@dataclass(frozen=True, slots=True)
class TestResult:
    __test__ = False  # not a pytest class

    test_id: str
    outcome: Outcome
    duration_s: float = 0.0
    message: str = ""


@dataclass(frozen=True, slots=True)
class ParsedReport:
    """What a report said.  `problem` is set when the file is missing, empty or damaged."""

    results: tuple[TestResult, ...] = ()
    metrics: tuple[Metric, ...] = ()
    problem: str = ""
    exists: bool = True

    @property
    def total(self) -> int:
        return len(self.results)

    @property
    def ran(self) -> int:
        return sum(1 for r in self.results if r.outcome.ran)

    def count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.results if r.outcome is outcome)


def clean_text(text: str, limit: int = MAX_MESSAGE) -> str:
    """Text for people and the store: ANSI codes and control characters gone, length bounded."""
    text = _CONTROL.sub("", _ANSI.sub("", text))
    cut = "\n...[truncated]"
    return text if len(text) <= limit else text[: limit - len(cut)] + cut


def _missing(path: Path) -> ParsedReport | None:
    if not path.exists():
        return ParsedReport(problem="no report was written", exists=False)
    size = path.stat().st_size
    if size == 0:
        return ParsedReport(problem="the report is empty (0 bytes)")
    return None


# -- JUnit -------------------------------------------------------------------------------------

def _junit_id(el: ET.Element) -> str:
    name = el.get("name", "")
    classname = el.get("classname", "")
    file = el.get("file", "")
    if file:
        mod = file[:-3].replace("/", ".") if file.endswith(".py") else ""
        rest = classname[len(mod) + 1:] if mod and classname.startswith(mod + ".") else ""
        return "::".join(p for p in (file, rest.replace(".", "::"), name) if p)
    return f"{classname}::{name}" if classname else name


def _junit_result(el: ET.Element) -> TestResult:
    outcome, message = Outcome.PASS, ""
    for child in el:
        tag = child.tag.rsplit("}", 1)[-1]
        if tag in ("failure", "error", "skipped"):
            outcome = {"failure": Outcome.FAIL, "error": Outcome.ERROR, "skipped": Outcome.SKIP}[tag]
            text = child.get("message", "") or ""
            body = child.text or ""
            message = (text + ("\n" + body if body and body != text else "")).strip()
            if outcome is not Outcome.SKIP:
                break
    try:
        duration = float(el.get("time", "0") or 0)
    except ValueError:
        duration = 0.0
    return TestResult(_junit_id(el), outcome, duration if math.isfinite(duration) else 0.0,
                      clean_text(message))


_XML_ILLEGAL = bytes(b for b in range(32) if b not in (9, 10, 13))


class _XmlBytes(io.RawIOBase):
    """A report file with bytes XML forbids (raw ANSI escapes, NULs) dropped as it is read."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self.f.read(len(b)).translate(None, _XML_ILLEGAL)
        while not data and len(b):
            more = self.f.read(len(b))
            if not more:
                return 0
            data = more.translate(None, _XML_ILLEGAL)
        b[: len(data)] = data
        return len(data)


def parse_junit(path: Path) -> ParsedReport:
    """Read a JUnit XML report as a stream; damage after some tests keeps those tests."""
    missing = _missing(path)
    if missing:
        return missing
    results: list[TestResult] = []
    problem = ""
    depth = 0
    try:
        with path.open("rb") as raw:
            for event, el in ET.iterparse(_XmlBytes(raw), events=("start", "end")):
                tag = el.tag.rsplit("}", 1)[-1]
                if event == "start":
                    depth += tag == "testcase"
                    continue
                if tag == "testcase":
                    results.append(_junit_result(el))
                    depth -= 1
                    el.clear()
                elif depth == 0 and tag in ("testsuite", "system-out", "system-err"):
                    el.clear()
    except ET.ParseError as e:
        problem = f"the JUnit XML is malformed or truncated ({e}) after {len(results)} tests"
    except OSError as e:
        problem = f"cannot read the report ({e})"
    if not problem and not results:
        problem = "the report lists no tests"
    return ParsedReport(results=tuple(results), problem=problem)


# -- lit ---------------------------------------------------------------------------------------

_LIT_CODES = {
    "PASS": Outcome.PASS, "XFAIL": Outcome.PASS, "FLAKYPASS": Outcome.PASS,
    "FAIL": Outcome.FAIL, "XPASS": Outcome.FAIL, "TIMEOUT": Outcome.FAIL,
    "UNRESOLVED": Outcome.ERROR,
    "UNSUPPORTED": Outcome.SKIP, "SKIPPED": Outcome.SKIP, "EXCLUDED": Outcome.SKIP,
}
_LIT_LINE = re.compile(r"^(?P<code>[A-Z]+): (?P<name>.+? :: .+?)(?: \(\d+ of \d+\))?\s*$")


def parse_lit(path: Path) -> ParsedReport:
    """lit's `-o results.json`, or the `-v` text output (`PASS: Suite :: test (1 of 9)`)."""
    missing = _missing(path)
    if missing:
        return missing
    with path.open("rb") as f:
        head = f.read(64).lstrip()
    if head.startswith(b"{"):
        return _parse_lit_json(path)
    results = []
    for line in iter_log_lines(path):
        m = _LIT_LINE.match(line)
        if m and m.group("code") in _LIT_CODES:
            results.append(TestResult(m.group("name"), _LIT_CODES[m.group("code")]))
    return ParsedReport(results=tuple(results),
                        problem="" if results else "the report lists no lit tests")


def _json_list(path: Path, what: str, key: str) -> list[Any] | ParsedReport:
    """The list under `key` of a JSON report, or the ParsedReport that says why there is none."""
    size = path.stat().st_size
    if size > MAX_JSON_BYTES:
        return ParsedReport(problem=f"the {what} is {size} bytes, over the limit")
    try:
        doc = json.loads(path.read_bytes().decode("utf-8", "replace"))
    except ValueError as e:
        return ParsedReport(problem=f"the {what} is malformed or truncated ({e})")
    items = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(items, list):
        return ParsedReport(problem=f"the {what} has no '{key}' list")
    return items


def _parse_lit_json(path: Path) -> ParsedReport:
    tests = _json_list(path, "lit JSON report", "tests")
    if isinstance(tests, ParsedReport):
        return tests
    results = []
    for t in tests:
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            continue
        outcome = _LIT_CODES.get(str(t.get("code", "")), Outcome.ERROR)
        elapsed = t.get("elapsed")
        duration = float(elapsed) if isinstance(elapsed, (int, float)) else 0.0
        msg = clean_text(str(t.get("output", ""))) if outcome.bad else ""
        results.append(TestResult(t["name"], outcome, duration, msg))
    return ParsedReport(results=tuple(results),
                        problem="" if results else "the report lists no lit tests")


# -- metrics -----------------------------------------------------------------------------------

def _metric(item: object, i: int) -> Metric | str:
    if not isinstance(item, dict):
        return f"metrics[{i}] is not an object"
    name, value, unit = item.get("name"), item.get("value"), item.get("unit", "")
    if not isinstance(name, str) or not name:
        return f"metrics[{i}].name must be a non-empty string"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"metric '{name}': value must be a finite number, not {value!r}"
    if not isinstance(unit, str):
        return f"metric '{name}': unit must be a string"
    try:
        better = Better(item.get("better", "higher"))
    except ValueError:
        return f"metric '{name}': better must be 'higher' or 'lower', not {item.get('better')!r}"
    samples = item.get("samples", [])
    if not isinstance(samples, list) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in samples):
        return f"metric '{name}': samples must be a list of finite numbers"
    context = item.get("context", {})
    if not isinstance(context, dict) or not all(isinstance(v, (str, int, float)) for v in context.values()):
        return f"metric '{name}': context must be an object of strings and numbers"
    return Metric(name, float(value), unit, better, tuple(float(x) for x in samples),
                  tuple(sorted((str(k), str(v)) for k, v in context.items())))


def parse_metrics(path: Path) -> ParsedReport:
    """`{"metrics": [{"name", "value", "unit", "better", "samples"}]}`; each metric is a test."""
    missing = _missing(path)
    if missing:
        return missing
    items = _json_list(path, "metrics report", "metrics")
    if isinstance(items, ParsedReport):
        return items
    metrics: list[Metric] = []
    results: list[TestResult] = []
    problems: list[str] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        m = _metric(item, i)
        if isinstance(m, str):
            problems.append(m)
            name = item.get("name") if isinstance(item, dict) else None
            results.append(TestResult(str(name or f"metrics[{i}]"), Outcome.ERROR, 0.0, m))
            continue
        if m.name in seen:
            problems.append(f"metric '{m.name}' appears twice")
            continue
        seen.add(m.name)
        metrics.append(m)
        results.append(TestResult(m.name, Outcome.PASS, 0.0, f"{m.value:g} {m.unit}".strip()))
    problem = "; ".join(problems[:5])
    if not results and not problem:
        problem = "the metrics report lists no metrics"
    return ParsedReport(results=tuple(results), metrics=tuple(metrics), problem=problem)


PARSERS = {"junit": parse_junit, "lit": parse_lit, "metrics": parse_metrics}


def parse_report(fmt: str, path: Path) -> ParsedReport:
    return PARSERS[fmt](path)


# -- logs --------------------------------------------------------------------------------------

def iter_log_lines(path: Path) -> Iterator[str]:
    """Lines of a log, decoded with replacement, ANSI stripped, each at most MAX_LINE bytes."""
    with path.open("rb") as f:
        while True:
            raw = f.readline(MAX_LINE)
            if not raw:
                return
            if not raw.endswith(b"\n") and len(raw) == MAX_LINE:
                # an over-long line: keep its start, skip the rest in bounded reads
                while (more := f.readline(MAX_LINE)) and not more.endswith(b"\n"):
                    pass
            yield _ANSI.sub("", raw.decode("utf-8", "replace")).rstrip("\r\n")


def log_tail(path: Path, max_bytes: int = 8192) -> str:
    """The last `max_bytes` of a log as clean text (for failure messages and triage)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            end = f.tell()
            f.seek(max(0, end - max_bytes))
            data = f.read(max_bytes)
    except OSError:
        return ""
    return clean_text(data.decode("utf-8", "replace"), limit=max_bytes)


_PYTEST_SUMMARY = re.compile(
    r"^=*\s*((?:\d+ (?:passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?|rerun)"
    r"(?:, )?)+) in [\d.]+s")
_PYTEST_NO_TESTS = re.compile(r"^=*\s*no tests ran in [\d.]+s")
_LIT_TOTAL = re.compile(r"^\s*Total Discovered Tests:\s*(\d+)")
_LIT_CATEGORY = re.compile(r"^\s*(Excluded|Skipped)\s*:\s*(\d+)")
_PYTEST_COUNTED = ("passed", "failed", "skipped", "error", "errors", "xfailed", "xpassed")


def count_from_output(path: Path, pattern: str = "") -> int | None:
    """forkflow's own test count, read from the harness output (the second, independent count).

    Knows pytest's summary line and lit's `Total Discovered Tests` (minus excluded/skipped);
    `pattern` (a regex with one group) adds any other harness.  None when the output says nothing.
    """
    custom = re.compile(pattern) if pattern else None
    found: int | None = None
    lit_total: int | None = None
    lit_minus = 0
    if not path.exists():
        return None
    for line in iter_log_lines(path):
        if custom is not None:
            m = custom.search(line)
            if m:
                found = int(m.group(1))
            continue
        m = _PYTEST_SUMMARY.match(line)
        if m:
            found = 0
            for part in m.group(1).split(", "):
                n, word = part.strip().split(" ", 1)
                if word in _PYTEST_COUNTED:
                    found += int(n)
            continue
        if _PYTEST_NO_TESTS.match(line):
            found = 0
            continue
        m = _LIT_TOTAL.match(line)
        if m:
            lit_total, lit_minus = int(m.group(1)), 0
            continue
        m = _LIT_CATEGORY.match(line)
        if m and lit_total is not None:
            lit_minus += int(m.group(2))
    if found is None and lit_total is not None:
        found = lit_total - lit_minus
    return found
