"""Tiers and suites: what `[[suite]]` in forkflow.toml declares, loaded into frozen values.

    [[suite]]
    name = "unit"
    tier = "L1"                        # L1 | L2 | L3
    command = "pytest -q -o junit_family=xunit1 --junitxml={report} {tests}"
    report = "junit"                   # junit | lit | metrics
    expect_tests = 120                 # the inventory: fewer is a failure
    paths = ["python/**", "lib/**"]    # what it covers, for selection
    resources = { cpus = 1, gpus = 0 } # custom labels too, e.g. h200 = 1
    timeout = "20m"
    owners = ["compiler-oncall"]       # who may sign off (L3)
    metrics = ["matmul.*"]             # L2: the metrics it reports (globs); bisect runs it for them
    per_sample = ["matmul.*.vs_cublas"] # L2: metrics whose samples bisect judges one by one

Placeholders in `command`: `{report}` (where the harness writes its report), `{artifacts}` (a
folder kept with the job), `{tests}` (the selected tests, shell-quoted; when everything runs it
is the suite's `all_tests` value, "" by default).  A suite without `{tests}` always runs whole.

`[validation]` holds tier-wide settings: `runner` ("local" | "ray"), `ray_address` ("auto",
"host:port" or "ray://host:port"), `retired` (suite names removed on purpose, so the
saturation check stops asking for them), `shrink_tolerance` (0.1: a suite running more than
10% fewer tests than its last green run fails).  This module is pure.
"""
from __future__ import annotations

import enum
import re
import shlex
from dataclasses import dataclass
from typing import Any

from forkflow.config import CONFIG_NAME, Config, config_error
from forkflow.errors import UserError

# Resource names a runner understands natively; any other label is a custom resource.
CPUS, GPUS = "cpus", "gpus"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
DEFAULT_TIMEOUT_S = 3600.0


class RunStatus(enum.StrEnum):
    """A validation run's or job's status, as stored: RUNNING (run) or PENDING (job) until it ends."""

    RUNNING = "RUNNING"
    PENDING = "PENDING"
    PASS = "PASS"
    FAIL = "FAIL"
    INFRA = "INFRA"


class Tier(str, enum.Enum):
    """Validation tiers: L1 diff tests, L2 trunk tests (metrics series), L3 manual tests."""

    L1 = "L1"
    L2 = "L2"
    L3 = "L3"


class ReportFormat(str, enum.Enum):
    """What a suite's report file is: JUnit XML, lit results (JSON or -v text), metrics JSON."""

    JUNIT = "junit"
    LIT = "lit"
    METRICS = "metrics"


@dataclass(frozen=True, slots=True)
class Suite:
    """One `[[suite]]` of forkflow.toml."""

    name: str
    tier: Tier
    command: str
    report: ReportFormat
    expect_tests: int | None = None
    paths: tuple[str, ...] = ()
    resources: tuple[tuple[str, float], ...] = ((CPUS, 1.0),)
    timeout_s: float = DEFAULT_TIMEOUT_S
    owners: tuple[str, ...] = ()
    all_tests: str = ""
    count_pattern: str = ""  # regex with one group: the test count the output prints
    env: tuple[tuple[str, str], ...] = ()
    metrics: tuple[str, ...] = ()  # globs of the metric names it reports (L2)
    # globs of metrics whose every sample is a judgement of its own (paired with a baseline timed
    # alongside it): bisect judges them sample by sample, not run by run (#16)
    per_sample: tuple[str, ...] = ()

    @property
    def can_select_tests(self) -> bool:
        """Tests can be narrowed when the command takes `{tests}` and reports per test."""
        return "{tests}" in self.command and self.report is not ReportFormat.METRICS

    @property
    def resource_map(self) -> dict[str, float]:
        return dict(self.resources)

    @property
    def report_file(self) -> str:
        """The name the suite's report gets in its run folder."""
        return "report.xml" if self.report is ReportFormat.JUNIT else "report.json"

    def command_for(self, report: str, artifacts: str, tests: str | None = None) -> str:
        """The command with `{report}`, `{artifacts}` (quoted) and `{tests}` filled; `tests` is
        already shell-quoted, None for the whole suite (`all_tests`)."""
        return (self.command.replace("{report}", shlex.quote(report))
                .replace("{artifacts}", shlex.quote(artifacts))
                .replace("{tests}", self.all_tests if tests is None else tests))

    def job_env(self, rev: str, report: str, artifacts: str) -> dict[str, str]:
        """The suite's own environment plus what every harness is told: FORKFLOW_REV/REPORT/ARTIFACTS."""
        return {**dict(self.env), "FORKFLOW_REV": rev, "FORKFLOW_REPORT": report, "FORKFLOW_ARTIFACTS": artifacts}


@dataclass(frozen=True, slots=True)
class ValidationSettings:
    """The `[validation]` section."""

    runner: str = "local"
    ray_address: str = "auto"
    retired: tuple[str, ...] = ()
    shrink_tolerance: float = 0.1
    jobs: int = 0  # local pool size; 0 = number of CPUs
    selection_budget: float = 1 / 3  # the share of known tests one change may run (--changed-from)


def parse_duration(value: Any) -> float | None:
    """Seconds from 90, "90s", "20m", "1.5h", "250ms"; None when it is not a duration."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if value > 0 else None
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            seconds = float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
            return seconds if seconds > 0 else None
    return None


def _suite_key_line(text: str, index: int, key: str) -> int | None:
    """The line of `key = ...` inside the index-th [[suite]] block (or of the block itself)."""
    lines = text.splitlines()
    starts = [no for no, line in enumerate(lines) if re.match(r"\s*\[\[\s*suite\s*\]\]", line)]
    if index >= len(starts):
        return None
    start = starts[index]
    for no in range(start + 1, len(lines)):
        if re.match(r"\s*\[", lines[no]):
            break
        if re.match(rf"\s*{re.escape(key)}\s*=", lines[no]):
            return no + 1
    return start + 1


class _Checker:
    """Raises config errors that name the key (`suite[2].timeout`) and its line."""

    def __init__(self, config: Config) -> None:
        self.path = config.path
        self.text = config.text
        self.index: int | None = None

    def fail(self, key: str, problem: str) -> UserError:
        """Inside a suite (`self.index` set) the line is found in its own [[suite]] block."""
        index = self.index
        if index is None:
            return config_error(self.path, self.text, key, problem)
        line = _suite_key_line(self.text, index, key.split(".")[-1])
        at = f":{line}" if line else ""
        return UserError(f"{self.path or CONFIG_NAME}{at}: key '{key}' {problem}; fix it and retry")

    def string(self, raw: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
        value = raw.get(key, default)
        if value is None:
            raise self.fail(f"{where}.{key}", "is missing")
        if not isinstance(value, str):
            raise self.fail(f"{where}.{key}", f"must be a string, not {type(value).__name__} {value!r}")
        return value

    def strings(self, raw: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{where}.{key}", f"must be a list of strings, not {value!r}")
        return tuple(value)


def _resources(chk: _Checker, raw: dict[str, Any], where: str) -> tuple[tuple[str, float], ...]:
    value = raw.get("resources", {CPUS: 1})
    if not isinstance(value, dict):
        raise chk.fail(f"{where}.resources", f"must be a table like {{ cpus = 1, gpus = 0 }}, not {value!r}")
    out: dict[str, float] = {CPUS: 1.0}
    for label, amount in value.items():
        if not _NAME.match(label):
            raise chk.fail(f"{where}.resources", f"has a bad resource name {label!r}")
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
            raise chk.fail(f"{where}.resources", f"'{label}' must be a number >= 0, not {amount!r}")
        out[label] = float(amount)
    return tuple(sorted((k, v) for k, v in out.items() if v > 0 or k == CPUS))


def _suite(chk: _Checker, raw: Any, index: int) -> Suite:
    where = f"suite[{index}]"
    chk.index = index
    if not isinstance(raw, dict):
        raise chk.fail(where, "must be a table ([[suite]])")
    name = chk.string(raw, "name", where)
    if not _NAME.match(name):
        raise chk.fail(f"{where}.name", f"{name!r} must be letters, digits, '.', '_' or '-'")
    where = f"suite.{name}"
    tier_s = chk.string(raw, "tier", where, "L1")
    try:
        tier = Tier(tier_s.upper())
    except ValueError:
        raise chk.fail(f"{where}.tier", f"is {tier_s!r}; use L1, L2 or L3") from None
    command = chk.string(raw, "command", where)
    if not command.strip():
        raise chk.fail(f"{where}.command", "is empty; give the shell command that runs the suite")
    report_s = chk.string(raw, "report", where, "junit")
    try:
        report = ReportFormat(report_s.lower())
    except ValueError:
        raise chk.fail(f"{where}.report", f"is {report_s!r}; use junit, lit or metrics") from None
    expect = raw.get("expect_tests")
    if expect is not None and (isinstance(expect, bool) or not isinstance(expect, int) or expect < 1):
        raise chk.fail(f"{where}.expect_tests", f"must be a whole number >= 1, not {expect!r}")
    timeout = parse_duration(raw.get("timeout", DEFAULT_TIMEOUT_S))
    if timeout is None:
        raise chk.fail(f"{where}.timeout", f"is {raw.get('timeout')!r}; write it like \"90s\", \"20m\" or \"2h\"")
    pattern = chk.string(raw, "count_pattern", where, "")
    if pattern:
        try:
            if re.compile(pattern).groups != 1:
                raise chk.fail(f"{where}.count_pattern", "needs exactly one (group) capturing the count")
        except re.error as e:
            raise chk.fail(f"{where}.count_pattern", f"is not a valid regex ({e})") from e
    env = raw.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise chk.fail(f"{where}.env", "must be a table of strings")
    known = {"name", "tier", "command", "report", "expect_tests", "paths", "resources", "timeout",
             "owners", "all_tests", "count_pattern", "env", "metrics", "per_sample"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise chk.fail(f"{where}.{unknown[0]}", f"is not a suite key (known: {', '.join(sorted(known))})")
    if tier is Tier.L3 and not chk.strings(raw, "owners", where):
        raise chk.fail(f"{where}.owners", "must name at least one owner for an L3 suite (who signs off)")
    suite = Suite(
        name=name, tier=tier, command=command, report=report, expect_tests=expect,
        paths=chk.strings(raw, "paths", where), resources=_resources(chk, raw, where),
        timeout_s=timeout, owners=chk.strings(raw, "owners", where),
        all_tests=chk.string(raw, "all_tests", where, ""), count_pattern=pattern,
        env=tuple(sorted(env.items())), metrics=chk.strings(raw, "metrics", where),
        per_sample=chk.strings(raw, "per_sample", where),
    )
    chk.index = None
    return suite


def load_suites(config: Config) -> tuple[Suite, ...]:
    """Every `[[suite]]` of the config, validated; a mistake names its key and line."""
    chk = _Checker(config)
    raw = config.raw.get("suite", [])
    if not isinstance(raw, list):
        raise chk.fail("suite", "must be an array of tables: write each one as [[suite]]")
    suites = tuple(_suite(chk, item, i) for i, item in enumerate(raw))
    seen: set[str] = set()
    for i, s in enumerate(suites):
        chk.index = i
        if s.name in seen:
            raise chk.fail("name", f"'{s.name}' names two suites; suite names must be unique")
        seen.add(s.name)
    return suites


def load_settings(config: Config) -> ValidationSettings:
    """The `[validation]` section, validated."""
    chk = _Checker(config)
    raw = config.raw.get("validation", {})
    if not isinstance(raw, dict):
        raise chk.fail("validation", "must be a table: [validation]")
    runner = chk.string(raw, "runner", "validation", "local")
    tol = raw.get("shrink_tolerance", 0.1)
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 <= tol < 1:
        raise chk.fail("validation.shrink_tolerance", f"must be a number in [0, 1), not {tol!r}")
    jobs = raw.get("jobs", 0)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 0:
        raise chk.fail("validation.jobs", f"must be a whole number >= 0, not {jobs!r}")
    budget = raw.get("selection_budget", 1 / 3)
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 < budget <= 1:
        raise chk.fail("validation.selection_budget", f"must be a number in (0, 1], not {budget!r}")
    return ValidationSettings(
        runner=runner, ray_address=chk.string(raw, "ray_address", "validation", "auto"),
        retired=chk.strings(raw, "retired", "validation"), shrink_tolerance=float(tol), jobs=jobs,
        selection_budget=float(budget),
    )


def suites_of(suites: tuple[Suite, ...], tier: Tier) -> tuple[Suite, ...]:
    return tuple(s for s in suites if s.tier is tier)
