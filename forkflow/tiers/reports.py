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
import hashlib
import json
import math
import os
import re
from xml.parsers import expat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forkflow.models import Better, Metric

MAX_MESSAGE = 16000      # characters of a failure message kept per test (head and tail)
MAX_LINE = 64 * 1024     # bytes of one log line looked at
MAX_JSON_BYTES = 256 * 1024 * 1024

_ANSI = re.compile(r"(?:\x1b|#x1B)\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class TestOutcome(str, enum.Enum):
    """One test's outcome."""

    __test__ = False  # not a pytest class

    PASS = "PASS"
    FAIL = "FAIL"
    SKIP = "SKIP"
    ERROR = "ERROR"

    @property
    def ran(self) -> bool:
        return self is not TestOutcome.SKIP

    @property
    def bad(self) -> bool:
        return self in (TestOutcome.FAIL, TestOutcome.ERROR)


@dataclass(frozen=True, slots=True)
class TestResult:
    __test__ = False  # not a pytest class

    test_id: str
    outcome: TestOutcome
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

    def count(self, outcome: TestOutcome) -> int:
        return sum(1 for r in self.results if r.outcome is outcome)


def clean_text(text: str, limit: int = MAX_MESSAGE) -> str:
    """Text for people and the store: ANSI codes and control characters gone, length bounded."""
    text = _CONTROL.sub("", _ANSI.sub("", text))
    if len(text) <= limit:
        return text
    # the error is as often at the end (teardown noise, a footer) as at the start: keep both
    cut = "\n...[truncated]...\n"
    head = (limit - len(cut)) // 4
    return text[:head] + cut + text[len(text) - (limit - len(cut) - head):]


def _missing(path: Path) -> ParsedReport | None:
    if not path.exists():
        return ParsedReport(problem="no report was written", exists=False)
    size = path.stat().st_size
    if size == 0:
        return ParsedReport(problem="the report is empty (0 bytes)")
    return None


# -- JUnit -------------------------------------------------------------------------------------

MAX_TEST_ID = 1024       # characters of a test id kept; longer ids are cut and given a hash
MAX_CAPTURED = 16 * 1024 # characters of a test's <system-out>/<system-err> kept (the end)


def cap_test_id(test_id: str) -> str:
    """A test id of at most MAX_TEST_ID characters: a longer one keeps its start and a hash."""
    if len(test_id) <= MAX_TEST_ID:
        return test_id
    digest = hashlib.sha1(test_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{test_id[:MAX_TEST_ID - 16]}...#{digest}"


class _Capped:
    """Text fed in pieces, of which only the head and the tail are kept (bounded memory)."""

    __slots__ = ("head", "tail", "limit", "dropped")

    def __init__(self, limit: int) -> None:
        self.head: list[str] = []
        self.tail = ""
        self.limit = limit
        self.dropped = 0

    def add(self, text: str) -> None:
        have = sum(map(len, self.head))
        room = self.limit // 4 - have
        if room > 0:
            self.head.append(text[:room])
            text = text[room:]
        if text:
            joined = self.tail + text
            keep = self.limit - self.limit // 4
            self.dropped += max(0, len(joined) - keep)
            self.tail = joined[-keep:]

    def text(self) -> str:
        mid = f"\n...[{self.dropped} characters cut]...\n" if self.dropped else ""
        return "".join(self.head) + mid + self.tail


@dataclass(slots=True)
class _Case:
    test_id: str
    time: str
    outcome: TestOutcome = TestOutcome.PASS
    message: _Capped | None = None
    captured: dict[str, _Capped] | None = None


def _junit_id(attrs: dict[str, str]) -> str:
    name = attrs.get("name", "")
    classname = attrs.get("classname", "")
    file = attrs.get("file", "")
    if file:
        mod = file[:-3].replace("/", ".") if file.endswith(".py") else ""
        rest = classname[len(mod) + 1:] if mod and classname.startswith(mod + ".") else ""
        return cap_test_id("::".join(p for p in (file, rest.replace(".", "::"), name) if p))
    return cap_test_id(f"{classname}::{name}" if classname else name)


def _duration(raw: str) -> float:
    try:
        duration = float(raw or 0)
    except (ValueError, OverflowError):
        return 0.0
    return duration if math.isfinite(duration) else 0.0


def _case_result(case: _Case) -> TestResult:
    message = case.message.text().strip() if case.message else ""
    if case.outcome.bad and case.captured:
        for tag in ("system-out", "system-err"):
            if tag in case.captured:
                text = case.captured[tag].text().strip()
                if text:
                    message += f"\n----- captured {tag} -----\n{text}"
    return TestResult(case.test_id, case.outcome, _duration(case.time), clean_text(message))


_OUTCOME_TAGS = {"failure": TestOutcome.FAIL, "error": TestOutcome.ERROR, "skipped": TestOutcome.SKIP}


class _JUnitReader:
    """expat callbacks: one `_Case` at a time, its texts capped as they stream in."""

    def __init__(self) -> None:
        self.results: list[TestResult] = []
        self.case: _Case | None = None
        self.sink: _Capped | None = None

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        tag = tag.rsplit("}", 1)[-1]
        if tag == "testcase":
            self.case = _Case(_junit_id(attrs), attrs.get("time", "0"))
        elif self.case is None:
            return
        elif tag in _OUTCOME_TAGS and (self.case.outcome is TestOutcome.PASS
                                       or self.case.outcome is TestOutcome.SKIP):
            self.case.outcome = _OUTCOME_TAGS[tag]
            self.case.message = _Capped(MAX_MESSAGE)
            if attrs.get("message"):
                self.case.message.add(attrs["message"][:MAX_MESSAGE] + "\n")
            self.sink = self.case.message
        elif tag in ("system-out", "system-err"):
            captured = self.case.captured = self.case.captured or {}
            self.sink = captured.setdefault(tag, _Capped(MAX_CAPTURED))

    def end(self, tag: str) -> None:
        tag = tag.rsplit("}", 1)[-1]
        self.sink = None
        if tag == "testcase" and self.case is not None:
            self.results.append(_case_result(self.case))
            self.case = None

    def data(self, text: str) -> None:
        if self.sink is not None:
            self.sink.add(text)


_XML_ILLEGAL = bytes(b for b in range(32) if b not in (9, 10, 13))


def parse_junit(path: Path) -> ParsedReport:
    """Read a JUnit XML report as a stream with bounded memory; damage keeps the tests before it.

    Each failure text and captured output (`<system-out>`, `<system-err>`) keeps its start and
    its end (MAX_MESSAGE, MAX_CAPTURED characters): a 200 MB `<failure>` never sits in memory.
    """
    missing = _missing(path)
    if missing:
        return missing
    reader = _JUnitReader()
    parser = expat.ParserCreate(namespace_separator="}")
    parser.buffer_text = True
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    parser.CharacterDataHandler = reader.data
    problem = ""
    try:
        with path.open("rb") as raw:
            while chunk := raw.read(1 << 20):
                # raw ANSI escapes and NULs are not XML: drop them instead of failing
                parser.Parse(chunk.translate(None, _XML_ILLEGAL), False)
            parser.Parse(b"", True)
    except (expat.ExpatError, LookupError, ValueError) as e:
        problem = (f"the JUnit XML is malformed or truncated ({e}) after "
                   f"{len(reader.results)} tests")
    except OSError as e:
        problem = f"cannot read the report ({e})"
    if not problem and not reader.results:
        problem = "the report lists no tests"
    return ParsedReport(results=tuple(reader.results), problem=problem)


# -- lit ---------------------------------------------------------------------------------------

_LIT_CODES = {
    "PASS": TestOutcome.PASS, "XFAIL": TestOutcome.PASS, "FLAKYPASS": TestOutcome.PASS,
    "FAIL": TestOutcome.FAIL, "XPASS": TestOutcome.FAIL, "TIMEOUT": TestOutcome.FAIL,
    "UNRESOLVED": TestOutcome.ERROR,
    "UNSUPPORTED": TestOutcome.SKIP, "SKIPPED": TestOutcome.SKIP, "EXCLUDED": TestOutcome.SKIP,
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
            results.append(TestResult(cap_test_id(m.group("name")), _LIT_CODES[m.group("code")]))
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
    except RecursionError:
        return ParsedReport(problem=f"the {what} is nested too deeply")
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
        outcome = _LIT_CODES.get(str(t.get("code", "")), TestOutcome.ERROR)
        elapsed = t.get("elapsed")
        duration = _finite(elapsed) or 0.0
        output = t.get("output", "")
        msg = clean_text(output if isinstance(output, str) else "") if outcome.bad else ""
        results.append(TestResult(cap_test_id(t["name"]), outcome, max(duration, 0.0), msg))
    return ParsedReport(results=tuple(results),
                        problem="" if results else "the report lists no lit tests")


# -- metrics -----------------------------------------------------------------------------------

def _finite(x: object) -> float | None:
    """`x` as a finite float, or None (not a number, a bool, NaN, infinite or too large)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        f = float(x)  # a 400-digit int overflows here
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _metric(item: object, i: int) -> Metric | str:
    if not isinstance(item, dict):
        return f"metrics[{i}] is not an object"
    name, value, unit = item.get("name"), item.get("value"), item.get("unit", "")
    if not isinstance(name, str) or not name:
        return f"metrics[{i}].name must be a non-empty string"
    number = _finite(value)
    if number is None:
        return f"metric '{name}': value must be a finite number, not {str(value)[:40]!r}"
    if not isinstance(unit, str):
        return f"metric '{name}': unit must be a string"
    try:
        better = Better(item.get("better", "higher"))
    except ValueError:
        return f"metric '{name}': better must be 'higher' or 'lower', not {item.get('better')!r}"
    samples = item.get("samples", [])
    floats = [_finite(x) for x in samples] if isinstance(samples, list) else [None]
    if any(f is None for f in floats):
        return f"metric '{name}': samples must be a list of finite numbers"
    context = item.get("context", {})
    if not isinstance(context, dict) or len(context) > 64 or not all(
            isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in context.values()):
        return f"metric '{name}': context must be an object of at most 64 strings and numbers"
    # context comes from the run's own report: capped so a hostile value cannot fill the store
    pairs = tuple(sorted((str(k)[:200], str(v)[:200]) for k, v in context.items()))
    return Metric(cap_test_id(name), number, unit, better, tuple(f for f in floats if f is not None), pairs)


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
            results.append(TestResult(cap_test_id(str(name or f"metrics[{i}]")), TestOutcome.ERROR, 0.0, m))
            continue
        if m.name in seen:
            problems.append(f"metric '{m.name}' appears twice")
            continue
        seen.add(m.name)
        metrics.append(m)
        results.append(TestResult(m.name, TestOutcome.PASS, 0.0, f"{m.value:g} {m.unit}".strip()))
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


_DESELECTED = re.compile(r"\b(\d+) deselected\b")


def deselected_from_output(path: Path) -> int:
    """How many tests the harness says it deselected (pytest's `-k`/`-m`: "284 deselected"), from
    its last summary line; 0 when it says nothing."""
    found = 0
    if not path.exists():
        return 0
    for line in iter_log_lines(path):
        if _PYTEST_SUMMARY.match(line) or _PYTEST_NO_TESTS.match(line) or "deselected" in line:
            m = _DESELECTED.search(line)
            if m:
                found = int(m.group(1))
    return found


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
