"""Culprits of red trunk tests, end to end: real git, a real pytest suite, `forkflow trunk --bisect`.

Fork main: G (green) then 5 landing units: two picks, a bundle of 3 upstream commits (the
second one breaks `lib.value`), two more picks.  Two trunk runs of the suite (at G and at the
tip) leave `test_value` red and `test_timing` red; `test_timing` is flaky: it fails on every
other run, so its bisection must blame nobody.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from forkflow.cli.main import main
from forkflow import wiring
from forkflow.context import open_context
from forkflow.models import Sha
from forkflow.testing.gitrepo import ForkBuilder
from forkflow.tiers.tiers import Tier
from forkflow.tiers.validate import ValidateRequest, validate

VALUE = "tests/test_value.py::test_value"
TIMING = "tests/test_timing.py::test_timing"
SUITE = ("\n[[suite]]\nname = \"unit\"\ntier = \"L2\"\n"
         f"command = '{sys.executable} -m pytest -q -p no:cacheprovider -o junit_family=xunit1 "
         "--junitxml={report} {tests}'\nall_tests = \"tests\"\nexpect_tests = 2\n"
         "env = { PYTEST_DISABLE_PLUGIN_AUTOLOAD = \"1\" }\n"
         # a suite that cannot build anywhere: every commit is untestable (exit 125)
         "\n[[suite]]\nname = \"build\"\ntier = \"L1\"\ncommand = 'echo build broken >&2; exit 125 # {report} {tests}'\n")


def _timing_test(counter: Path) -> str:
    return (f"from pathlib import Path\n\ndef test_timing():\n    p = Path({str(counter)!r})\n"
            "    n = int(p.read_text()) if p.exists() else 0\n    p.write_text(str(n + 1))\n"
            "    assert n % 2 == 0, 'deadline exceeded: took 1.7s'\n")


@dataclass(frozen=True)
class Trunk:
    path: Path
    good: Sha
    bad: Sha
    bundle: Sha
    breaker: Sha      # the upstream commit inside the bundle that breaks test_value
    counter: Path
    first_pick: Sha   # the first landing unit after the good end (test_value still passes)


def cli(*args: str, repo: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main([*args, "--repo", str(repo)])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture(scope="module")
def trunk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trunk]:
    root = tmp_path_factory.mktemp("trunk")
    counter = root / "timing-runs.txt"
    b = ForkBuilder(root / "repos")
    b.upstream_commit({"lib.py": "def value():\n    return 2\n",
                       "tests/test_value.py": "from lib import value\n\ndef test_value():\n"
                                              "    assert value() == 2, 'value changed'\n",
                       "tests/test_timing.py": _timing_test(counter)}, "Initial (#1)")
    b.branch_fork()
    ups = [b.upstream_commit({f"u{i}.txt": f"{i}\n"} | ({"lib.py": "def value():\n    return 3\n"}
                                                       if i == 3 else {}), f"upstream change {i} (#{10 + i})")
           for i in range(7)]
    assert main(["init", "--upstream", "upstream", "--repo", str(b.f.path)]) == 0
    cfg = b.f.path / "forkflow.toml"
    cfg.write_text(cfg.read_text() + SUITE)
    good = b.fork_commit({"fork.txt": "own\n"}, "[fork] own feature")
    first_pick = b.pick(ups[0])
    b.pick(ups[1])
    b.fetch()
    for u in ups[2:5]:  # a bundle of 3: ups[3] breaks lib.value
        b.f.git("cherry-pick", "--no-commit", u)
    b.f.git("commit", "-q", "-m", "Cherry-pick 3 upstream (#12 #13 #14)\n\n" + "\n".join(
        f"Upstream-Commit: {u}" for u in ups[2:5]), env=b.f.env())
    bundle = b.f.head()
    b.pick(ups[5])
    bad = b.pick(ups[6])
    ctx = open_context(b.f.path)
    assert validate(wiring.validator(ctx), ValidateRequest(Tier.L2, good)).status == "PASS"
    assert validate(wiring.validator(ctx), ValidateRequest(Tier.L2, bad)).status == "FAIL"
    yield Trunk(b.f.path, good, bad, bundle, ups[3], counter, first_pick)


def _red(doc: dict[str, Any], test: str) -> dict[str, Any]:
    items = [i for i in doc["red"] if i["test"] == test]
    assert len(items) == 1, doc
    return dict(items[0])


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # tables print whole lines


def test_trunk_bisect_names_unit_and_upstream_commit_in_bundle(trunk: Trunk, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = cli("trunk", "--json", repo=trunk.path, capsys=capsys)
    before = _red(json.loads(out), VALUE)
    assert before["culprit"] is None and before["bisection"] is None  # 5 commits: nobody yet
    assert before["last_green_rev"] == trunk.good and before["since_rev"] == trunk.bad
    rc, out, err = cli("trunk", "--bisect", "--test", VALUE, "--reruns", "1", "--json",
                       repo=trunk.path, capsys=capsys)
    assert rc == 0, err
    doc = json.loads(out)
    [done] = doc["bisected"]
    assert done["status"] == "found" and done["culprit"]["upstream_commit"] == trunk.breaker
    item = _red(doc, VALUE)
    c = item["culprit_detail"]
    assert isinstance(c, dict)
    assert c["fork_commit"] == c["landing_unit"] == trunk.bundle
    assert c["upstream_commit"] == trunk.breaker and c["pr"] == 13 and c["source"] == "bisection"
    assert c["upstream_subject"] == "upstream change 3 (#13)"
    assert item["culprit"].startswith(trunk.bundle[:12])
    # the table and the tracking issue say the same
    rc, out, _ = cli("trunk", repo=trunk.path, capsys=capsys)
    assert rc == 0 and trunk.bundle[:12] in out and trunk.breaker[:12] in out
    rc, out, err = cli("issues", "sync", "--json", repo=trunk.path, capsys=capsys)
    assert rc == 0, err
    bodies = "\n".join(p.read_text() for p in (trunk.path / ".git" / "forkflow" / "issues").glob("*.md"))
    # the upstream subject is untrusted text: quoted as code in the tracking issue (issue 13)
    assert f"upstream commit ` {trunk.breaker[:12]} ` ` upstream change 3 (#13) `; found by bisection" in bodies
    assert f"fork commit ` {trunk.bundle[:12]} `" in bodies
    # a second --bisect does not measure again
    rc, out, err = cli("trunk", "--bisect", "--test", VALUE, "--json", repo=trunk.path, capsys=capsys)
    [again] = json.loads(out)["bisected"]
    assert rc == 0 and not again["bisected"] and "already bisected" in again["reason"]


def test_trunk_bisect_blames_nobody_for_a_flaky_test(trunk: Trunk, capsys: pytest.CaptureFixture[str]) -> None:
    runs = int(trunk.counter.read_text())
    rc, out, err = cli("trunk", "--bisect", "--test", TIMING, "--json", repo=trunk.path, capsys=capsys)
    assert rc == 0, err
    doc = json.loads(out)
    [done] = doc["bisected"]
    assert done["status"] == "flaky" and done["culprit"] is None
    assert "does not reproduce" in done["reason"]
    item = _red(doc, TIMING)
    assert item["culprit"] is None and item["culprit_detail"] is None
    assert item["bisection"]["status"] == "flaky"
    assert int(trunk.counter.read_text()) > runs    # it really ran the test again
    assert item["flaky"].startswith(f"bisection {item['bisection']['id']} found it flaky")
    rc, out, _ = cli("trunk", repo=trunk.path, capsys=capsys)
    assert "known flaky: bisection" in out and "next: forkflow trunk --bisect" not in out


def test_bisect_test_bad_inputs_one_line_each(trunk: Trunk, capsys: pytest.CaptureFixture[str]) -> None:
    def one_line(rc: int, err: str, expect_rc: int, words: str) -> None:
        assert rc == expect_rc and words in err, (rc, err)
        assert len(err.strip().splitlines()) == 1, err

    # good and bad swapped
    rc, _, err = cli("bisect", "--test", VALUE, "--good", trunk.bad, "--bad", trunk.good, repo=trunk.path,
                     capsys=capsys)
    one_line(rc, err, 1, "swap them")
    # no difference between the ends: the test passes at the bad end
    rc, out, err = cli("bisect", "--test", VALUE, "--good", trunk.good, "--bad", trunk.first_pick, "--json",
                       repo=trunk.path, capsys=capsys)
    one_line(rc, err, 2, "passes at the bad end; nobody to blame")
    assert json.loads(out)["culprit"] is None and json.loads(out)["status"] == "no-difference"
    # every commit untestable (the suite exits 125 everywhere)
    rc, out, err = cli("bisect", "--test", VALUE, "--suite", "build", "--good", trunk.good, "--bad", trunk.bad,
                       "--json", repo=trunk.path, capsys=capsys)
    one_line(rc, err, 2, "cannot measure the good end and the bad end: exit 125: build broken\n")
    assert json.loads(out)["status"] == "untestable"
    rc, out, err = cli("bisect", "--test", VALUE, "--suite", "build", "--good", trunk.good, "--bad", trunk.bad,
                       repo=trunk.path, capsys=capsys)  # without --json: progress, then the one line
    assert rc == 2 and err.strip().splitlines()[-1].startswith("no culprit (untestable): cannot measure")
    # options that do not go together, unknown tests and suites
    for args, words in (
            (("bisect", "--test", VALUE, "--metric", "x", "--good", "a", "--bad", "b"), "drop --metric"),
            (("bisect", "--test", VALUE), "--good A --bad B"),
            (("bisect", "--test", "tests/nope.py::test_x", "--good", "a", "--bad", "b"), "no stored run has"),
            (("bisect", "--test", VALUE, "--suite", "nope", "--good", "a", "--bad", "b"), "no suite 'nope'"),
            (("bisect", "--test", VALUE, "--good", "nope", "--bad", trunk.bad), "is not a commit"),
            (("trunk", "--test", VALUE), "go with --bisect"),
            (("trunk", "--bisect", "--test", "tests/nope.py::test_x"), "is not red on fork main"),
            (("trunk", "--bisect", "--reruns", "0"), "at least 1")):
        rc, _, err = cli(*args, repo=trunk.path, capsys=capsys)
        one_line(rc, err, 1, words)
