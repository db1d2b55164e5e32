"""The `forkflow ...` commands the docs show, checked against the CLI they describe.

Every command in a fenced shell block of README.md or docs/*.md must parse: it is run with
`--help` appended, so a renamed or removed option, or a command that no longer exists, fails
here with the page and line.  The read-only ones (and a few that only write forkflow's own store)
then run for real on the sample fork `forkflow demo --keep` generates, with one failing L1 suite
added so that `validate` and `triage` have something to work on.  What cannot run on the sample
is listed in NOT_RUN with the reason.
"""
from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from forkflow.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Fenced blocks read as shell: the labelled ones, unlabelled ones, and CI YAML's `run:` lines.
SHELL_LANGS = {"", "bash", "sh", "shell", "console", "yaml", "yml"}
_FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```", re.S | re.M)
_WRAPPERS = {"chronic", "time", "/usr/bin/time", "exec", "env", "sudo", "nice"}
_OPERATORS = {";", "&&", "||", "|", "&"}
_REDIRECTS = re.compile(r"^\d*(>|>>|<)")
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# `forkflow` in command position: at the start, after an operator, a quote, a variable or a wrapper
_COMMAND_WORD = re.compile(r"(^|[;&|('\"]\s*)(([A-Za-z_][A-Za-z0-9_]*=\S*|chronic|time|/usr/bin/time|exec|env"
                           r"|sudo|nice|sh -c)\s+)*forkflow(\s|$)")


@dataclass(frozen=True)
class Shown:
    page: str
    line: int
    argv: tuple[str, ...]

    @property
    def text(self) -> str:
        return "forkflow " + " ".join(shlex.quote(a) for a in self.argv)

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def _segments(tokens: list[str]) -> Iterator[list[str]]:
    """Split a tokenised shell line at ;, &&, ||, | (a token may end with `;`)."""
    seg: list[str] = []
    for tok in tokens:
        if tok in _OPERATORS:
            yield seg
            seg = []
        elif tok.endswith(";") and len(tok) > 1:
            seg.append(tok[:-1])
            yield seg
            seg = []
        else:
            seg.append(tok)
    yield seg


def _commands_in(line: str) -> Iterator[tuple[str, ...]]:
    """The forkflow argvs in one shell line (also inside `sh -c '...'`)."""
    # usage notation: [--all] is an optional option, shown as the option itself
    line = line.replace("[", " ").replace("]", " ")
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError as e:
        raise AssertionError(f"cannot read this shell line ({e}): {line}") from e
    for seg in _segments(tokens):
        for i, tok in enumerate(seg):
            if " " in tok and "forkflow " in tok:  # sh -c 'forkflow nightly || ...'
                yield from _commands_in(tok)
        start = 0
        while start < len(seg) and (_ENV_ASSIGN.match(seg[start]) or seg[start] in _WRAPPERS):
            start += 1
        if start < len(seg) and Path(seg[start]).name == "forkflow":
            argv: list[str] = []
            for tok in seg[start + 1:]:
                if _REDIRECTS.match(tok):
                    break
                argv.append(tok)
            yield tuple(argv)


def commands_in_markdown(text: str, page: str) -> list[Shown]:
    """Every forkflow command of the page's fenced shell blocks.

    In a block where some line starts with `$ `, only those lines are commands (the rest is the
    output shown); elsewhere every line is.  A line ending in a backslash goes on.
    """
    shown: list[Shown] = []
    for m in _FENCE.finditer(text):
        lang = m.group(1).lower()
        if lang not in SHELL_LANGS:
            continue
        first = text.count("\n", 0, m.start(2)) + 1
        raw = m.group(2).splitlines()
        prompted = any(r.lstrip().startswith("$ ") for r in raw)
        i = 0
        while i < len(raw):
            lineno, line = first + i, raw[i]
            while line.endswith("\\") and i + 1 < len(raw):
                i += 1
                line = line[:-1] + " " + raw[i]
            i += 1
            stripped = line.strip()
            if prompted:
                if not stripped.startswith("$ "):
                    continue
                stripped = stripped[2:]
            if lang in ("yaml", "yml"):
                stripped = re.sub(r"^(-\s+)?(run:\s*)?", "", stripped)
            if not _COMMAND_WORD.search(stripped):
                continue
            shown += [Shown(page, lineno, argv) for argv in _commands_in(stripped)]
    return shown


def commands_in_headings(text: str, page: str) -> list[Shown]:
    """The `forkflow ...` synopses of a page's headings, as in ingest.md's `forkflow plan [--json]`."""
    shown: list[Shown] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            for span in re.findall(r"`(forkflow [^`]*)`", line):
                shown += [Shown(page, lineno, argv) for argv in _commands_in(span)]
    return shown


def shown_commands() -> list[Shown]:
    out: list[Shown] = []
    for page in PAGES:
        out += commands_in_markdown(page.read_text(encoding="utf-8"), page.relative_to(ROOT).as_posix())
    return out


SHOWN = shown_commands()
SYNOPSES = [s for page in PAGES
            for s in commands_in_headings(page.read_text(encoding="utf-8"), page.relative_to(ROOT).as_posix())]

# Commands that do not run on the sample fork, and why; the `--help` parse still checks them.
# A key matches a command whose words start with the key's words and that has the key's options.
NOT_RUN: dict[str, str] = {
    "serve": "starts a long-running web server (tests/test_web.py drives the dashboard)",
    "demo --serve": "starts a long-running web server",
    "ingest --push": "pushes to the fork's forge remote (network)",
    "ingest --unit": "the unit id is the reader's own",
    "validate --runner": "needs a Ray cluster",
    "nightly": "L2 suites measure on GPUs; the sample declares none",
    "l3 signoff": "signs as a forge account ([l3] identity): network",
    "l3 request": "the sample declares no L3 suite",
    "l3 run": "the sample declares no L3 suite",
    "bisect": "needs stored L2 series or a red test between two of the reader's commits",
    "detect --metric": "needs stored L2 series (a GPU fleet's nightlies)",
    "replay": "its window must hold the fork's own history (the real pair's dates), not the sample's",
    "decide": "the SHAs and PR numbers shown are examples, not commits of the sample",
    "conflicts resolve": "needs a person's edited file",
    "conflicts approve": "needs a resolver's waiting proposal and its hash",
    "workloads run": "runs Triton kernels: a GPU, or minutes in Triton's CPU interpreter",
    "workloads add": "writes a GPU suite into forkflow.toml",
}
# The exit codes a real run may end with, by command (default: 0).
EXPECTED_RC: dict[str, set[int]] = {
    "ingest": {0, 4, 5},   # 4: conflicts or reviews wait, 5: a unit failed (the sample has both)
    "validate": {1},       # the sample's suite reports one failing test on purpose
}
_PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$|^\.\.\.$")


def _words_match(argv: tuple[str, ...], key: str) -> bool:
    words = key.split()
    path = [w for w in words if not w.startswith("-")]
    opts = [w for w in words if w.startswith("-")]
    if list(argv[:len(path)]) != path:
        return False
    given = {a.split("=", 1)[0] for a in argv}
    return all(o in given for o in opts)


# Arguments that name something outside the sample, and why a command with one is not run.
NOT_RUN_ARGS: dict[str, str] = {
    "postgresql": "needs the team's PostgreSQL server (network)",
}


def _not_run_reason(shown: Shown) -> str | None:
    for prefix, reason in NOT_RUN_ARGS.items():
        if any(a.startswith(prefix) for a in shown.argv):
            return reason
    if (shown.argv[:1] == ("init",) and any(a.startswith(("https://", "git@")) for a in shown.argv)):
        return None  # the URL is replaced with the sample's upstream below
    for key, reason in NOT_RUN.items():
        if _words_match(shown.argv, key):
            return reason
    return None


def _help_parse(argv: tuple[str, ...] | list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    rc = main([*argv, "--help"])
    cap = capsys.readouterr()
    return rc, cap.out + cap.err


def test_the_docs_show_commands() -> None:
    """The extraction finds the pages' commands (an empty list would make the checks vacuous)."""
    pages = {s.page for s in SHOWN}
    assert "README.md" in pages and "docs/ingest.md" in pages, pages
    assert ("status", "--commits") in {s.argv for s in SHOWN}
    assert len(SHOWN) >= 40, len(SHOWN)


def test_extraction_reads_shell_lines() -> None:
    md = (
        "```bash\n"
        "pip install . && forkflow demo   # the two commands\n"
        "FORKFLOW_TOKEN=... forkflow serve --port 8040\n"
        "forkflow conflicts [--all] [--json]\n"
        "forkflow replay --since 2026-01-05 \\\n    --every week\n"
        "```\n"
        "```\n$ forkflow detect\nnext: forkflow bisect --alert 1\n```\n"
        "```text\nforkflow in memory: 0.166s\n```\n"
        "```\n0 2 * * *  cd /srv && chronic sh -c 'r=0; forkflow nightly || r=$?; exit $r'\n```\n"
    )
    got = [s.argv for s in commands_in_markdown(md, "x.md")]
    assert got == [("demo",), ("serve", "--port", "8040"), ("conflicts", "--all", "--json"),
                   ("replay", "--since", "2026-01-05", "--every", "week"), ("detect",), ("nightly",)]


def test_a_page_showing_a_missing_option_fails(capsys: pytest.CaptureFixture[str]) -> None:
    """The check itself: an option the CLI lacks, or a command it lacks, is a failure."""
    shown = commands_in_markdown("```bash\nforkflow status --no-such-option\nforkflow statuz\n```\n", "x.md")
    for s in shown:
        rc, out = _help_parse(s.argv, capsys)
        assert rc != 0, (s, out)
    rc, out = _help_parse(("status", "--commits"), capsys)
    assert rc == 0 and "--commits" in out


@pytest.mark.parametrize("shown", SHOWN, ids=str)
def test_shown_command_parses(shown: Shown, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _help_parse(shown.argv, capsys)
    assert rc == 0, f"{shown}\n`{shown.text} --help` says:\n{out}"


@pytest.mark.parametrize("shown", SYNOPSES, ids=str)
def test_heading_synopsis_parses(shown: Shown, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _help_parse(shown.argv, capsys)
    assert rc == 0, f"{shown}\n`{shown.text} --help` says:\n{out}"


@dataclass(frozen=True)
class Sample:
    fork: Path
    upstream: Path
    spare: Path
    conflict_id: str
    run_id: str
    owner: str


FAILING_SUITE = '''
[[suite]]
name = "unit"
tier = "L1"
command = "{python} {writer} {{report}}"
report = "junit"
'''
JUNIT_WRITER = '''import sys
open(sys.argv[1], "w").write(
    '<testsuite name="unit" tests="2" failures="1">'
    '<testcase classname="tests.test_ops" name="test_add"/>'
    '<testcase classname="tests.test_ops" name="test_scale">'
    '<failure message="AssertionError: [3, 6] != [2, 4]">Traceback ...\\nAssertionError</failure>'
    '</testcase></testsuite>')
'''


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sample]:
    """`forkflow demo --keep`'s fork (ingested, one conflict kept), with a failing L1 suite and
    one validation run of it."""
    import json
    import sys

    base = tmp_path_factory.mktemp("docs-sample")
    here = os.getcwd()
    try:
        assert main(["demo", "--keep", str(base / "demo")]) == 0
        fork = base / "demo" / "sample" / "fork"
        writer = base / "write_junit.py"
        writer.write_text(JUNIT_WRITER)
        with (fork / "forkflow.toml").open("a") as f:
            f.write(FAILING_SUITE.format(python=json.dumps(sys.executable)[1:-1], writer=writer))
        os.chdir(fork)
        rc, run = _json_of(["validate", "--tier", "L1", "--rev", "HEAD", "--json"])
        assert rc == 1, run
        rc, conflicts = _json_of(["conflicts", "--json"])
        assert rc == 0 and conflicts["conflicts"], conflicts
    finally:
        os.chdir(here)
    first = conflicts["conflicts"][0]
    yield Sample(fork, base / "demo" / "sample" / "upstream", base / "spare",
                 str(first["id"]), str(run["run_id"]), str(first["owner"]))


def _json_of(argv: list[str]) -> tuple[int, Any]:
    import contextlib
    import io
    import json

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(argv)
    return rc, json.loads(buf.getvalue())


def _substitute(shown: Shown, sample: Sample) -> list[str]:
    argv = list(shown.argv)
    for i, tok in enumerate(argv):
        prev = argv[i - 1] if i else ""
        if argv[:2] in (["conflicts", "show"], ["conflicts", "edit"], ["conflicts", "checkout"]) and i == 2:
            argv[i] = sample.conflict_id  # ID, or the page's example id
        elif prev == "--owner" and argv[:1] == ["conflicts"] and tok == "NAME":
            argv[i] = sample.owner
        elif prev == "--to" and tok == "PATH":
            argv[i] = str(sample.spare / "edited")
        elif argv[:1] == ["triage"] and tok == "RUN_ID":
            argv[i] = sample.run_id
        elif prev == "--upstream" and tok.startswith(("https://", "git@")):
            argv[i] = str(sample.upstream)
        elif prev == "--repo" and tok == "PATH":
            argv[i] = str(sample.fork)
        elif prev == "--keep" and tok == "DIR":
            argv[i] = str(sample.spare)
    return argv


# A command shown on several pages runs once (the first place it is shown names it).
_FIRST: dict[tuple[str, ...], Shown] = {}
for _s in SHOWN:
    _FIRST.setdefault(_s.argv, _s)
DISTINCT = list(_FIRST.values())


@pytest.mark.parametrize("shown", DISTINCT, ids=str)
def test_shown_command_runs_on_the_sample(shown: Shown, sample: Sample, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    reason = _not_run_reason(shown)
    if reason:
        pytest.skip(reason)
    argv = _substitute(shown, sample)
    left = [a for a in argv if _PLACEHOLDER.match(a) and a not in ("L1", "L2", "L3", "HEAD")]
    assert not left, f"{shown}: placeholder {left} has no sample value; add one or a NOT_RUN reason"
    monkeypatch.chdir(sample.fork)
    monkeypatch.setenv("EDITOR", "true")  # `conflicts edit` opens $EDITOR: one that exits at once
    monkeypatch.setenv("VISUAL", "true")
    if argv[:1] == ["demo"] and "--keep" in argv:
        import shutil
        shutil.rmtree(sample.spare, ignore_errors=True)
    capsys.readouterr()
    rc = main(argv)
    cap = capsys.readouterr()
    expected = EXPECTED_RC.get(argv[0], {0})
    assert rc in expected, f"{shown}\nran `forkflow {' '.join(argv)}`: rc {rc}\n{cap.out[-2000:]}\n{cap.err[-2000:]}"
    assert "Traceback" not in cap.err


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_links_between_pages_reach_a_heading() -> None:
    """A link `page.md#anchor` names a heading of that page (a renamed section breaks it)."""
    anchors = {page.name: {_slug(line.lstrip("#")) for line in page.read_text(encoding="utf-8").splitlines()
                           if line.startswith("#")} for page in PAGES}
    broken = []
    for page in PAGES:
        for lineno, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for target, anchor in re.findall(r"\]\((?:docs/)?([\w.-]+\.md)?#([\w-]+)\)", line):
                name = target or page.name
                if name in anchors and anchor not in anchors[name]:
                    broken.append(f"{page.relative_to(ROOT)}:{lineno}: {name}#{anchor}")
    assert not broken, "\n".join(broken)


def test_every_benchmark_script_is_in_the_benchmarks_page() -> None:
    """Each script of benchmarks/ has its figure, or a `Not yet measured` line, in benchmarks.md."""
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    scripts = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))
    assert scripts
    missing = [name for name in scripts if f"`{name}" not in page]
    assert not missing, f"benchmarks/ scripts with no section in docs/benchmarks.md: {missing}"
