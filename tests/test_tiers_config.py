"""`[[suite]]` and `[validation]` loading: good values, and every bad one named with its line."""
from __future__ import annotations

from pathlib import Path

import pytest

from forkflow.config import parse_config
from forkflow.errors import UserError
from forkflow.tiers.tiers import ReportFormat, Tier, load_settings, load_suites, parse_duration

GOOD = '''
[[suite]]
name = "unit"
tier = "L1"
command = "pytest -q --junitxml={report} {tests}"
report = "junit"
expect_tests = 120
paths = ["python/**", "lib/**"]
resources = { cpus = 1, gpus = 0, h200 = 1 }
timeout = "20m"
owners = ["compiler-oncall"]

[[suite]]
name = "fsdp"
tier = "L3"
command = "run.sh {report}"
report = "metrics"
owners = ["training-oncall"]

[validation]
runner = "ray"
retired = ["old"]
'''


def _load(text: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    p = tmp_path / "forkflow.toml"
    p.write_text(text)
    return parse_config(text, p)


def test_suites_load_every_key(tmp_path: Path) -> None:
    cfg = _load(GOOD, tmp_path)
    unit, fsdp = load_suites(cfg)
    assert unit.tier is Tier.L1 and unit.report is ReportFormat.JUNIT
    assert unit.expect_tests == 120 and unit.paths == ("python/**", "lib/**")
    assert unit.resource_map == {"cpus": 1.0, "h200": 1.0}  # gpus = 0 asks for nothing
    assert unit.timeout_s == 1200 and unit.owners == ("compiler-oncall",)
    assert unit.can_select_tests and not fsdp.can_select_tests
    assert fsdp.tier is Tier.L3 and fsdp.report is ReportFormat.METRICS
    s = load_settings(cfg)
    assert s.runner == "ray" and s.retired == ("old",) and s.shrink_tolerance == 0.1


@pytest.mark.parametrize("key,value,fragment", [
    ("tier", '"L9"', "use L1, L2 or L3"),
    ("report", '"tap"', "use junit, lit or metrics"),
    ("expect_tests", "0", "whole number >= 1"),
    ("timeout", '"soon"', '"90s", "20m"'),
    ("resources", '{ gpus = -1 }', "must be a number >= 0"),
    ("paths", '"lib/**"', "list of strings"),
    ("count_pattern", '"no group"', "exactly one (group)"),
    ("colour", '"red"', "is not a suite key"),
])
def test_bad_suite_key_names_key_and_line(tmp_path: Path, key: str, value: str, fragment: str) -> None:
    text = '[[suite]]\nname = "a"\ncommand = "true"\n\n[[suite]]\nname = "b"\ncommand = "true"\n' \
           f"{key} = {value}\n"
    with pytest.raises(UserError) as e:
        load_suites(_load(text, tmp_path))
    msg = str(e.value)
    assert f"forkflow.toml:8: key 'suite.b.{key}'" in msg
    assert fragment in msg


def test_missing_command_and_duplicate_names(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"forkflow.toml:1: key 'suite\[0\].name' is missing"):
        load_suites(_load('[[suite]]\ncommand = "x"\n', tmp_path))
    with pytest.raises(UserError, match=r"suite.a.command' is missing"):
        load_suites(_load('[[suite]]\nname = "a"\n', tmp_path))
    with pytest.raises(UserError, match="names two suites"):
        load_suites(_load('[[suite]]\nname = "a"\ncommand = "x"\n[[suite]]\nname = "a"\ncommand = "y"\n', tmp_path))
    with pytest.raises(UserError, match="at least one owner"):
        load_suites(_load('[[suite]]\nname = "a"\ntier = "L3"\ncommand = "x"\n', tmp_path))
    with pytest.raises(UserError, match=r"write each one as \[\[suite\]\]"):
        load_suites(_load('[suite]\nname = "a"\n', tmp_path))


def test_durations() -> None:
    assert parse_duration("90s") == 90 and parse_duration("20m") == 1200
    assert parse_duration("1.5h") == 5400 and parse_duration(30) == 30
    assert parse_duration("250ms") == 0.25
    for bad in ("0s", "-1m", "soon", True, None, "5d"):
        assert parse_duration(bad) is None


def test_bad_validation_section(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="shrink_tolerance"):
        load_settings(_load("[validation]\nshrink_tolerance = 1.5\n", tmp_path))


def test_selection_budget_setting(tmp_path: Path) -> None:
    assert load_settings(_load("[validation]\n", tmp_path)).selection_budget == pytest.approx(1 / 3)
    assert load_settings(_load("[validation]\nselection_budget = 0.5\n", tmp_path)).selection_budget == 0.5
    for bad in ("0", "1.5", '"half"', "true"):
        with pytest.raises(UserError, match=r"forkflow.toml:2: key 'validation.selection_budget'"):
            load_settings(_load(f"[validation]\nselection_budget = {bad}\n", tmp_path))
