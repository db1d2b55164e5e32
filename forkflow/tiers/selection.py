"""Test selection: which suites, and which tests of them, a change needs.  Pure.

Two sources of evidence, as in predictive test selection:

* the `paths` mapping of each suite (globs, `**` crosses folders): a suite whose paths no
  changed file matches is skipped; a suite with no `paths` always runs;
* co-failure history learned from stored results (`HistoryEntry`: the files a validated change
  touched and the tests that failed on it): a test that failed when a file changed before is
  selected when that file changes again.  A file never seen in history borrows the history of
  its folder.  Tests of a test file that changed, and tests whose file is named after a changed
  source file (`lib/foo.py` -> `test_foo.py`), are always selected.

When there is no evidence at all for a changed file that the suite covers, the whole suite runs:
forkflow never guesses that a change is safe.  Selection is by test file (`file_of()`), the
unit harnesses accept on the command line; the run's fraction is counted in tests.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePosixPath

MIN_SCORE = 0.02  # P(test fails | file changed) worth running the test for


@dataclass(frozen=True, slots=True)
class SuiteSpec:
    """A suite as selection sees it: its path globs and the test ids it is known to have."""

    name: str
    paths: tuple[str, ...] = ()
    can_select_tests: bool = False
    known_tests: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One validated change: the files it touched and the (suite, test id) pairs that failed."""

    changed_files: frozenset[str]
    failed: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True, slots=True)
class SuiteSelection:
    suite: str
    run: bool
    files: tuple[str, ...] | None = None  # test files to run; None = the whole suite
    tests: tuple[str, ...] | None = None  # known test ids those files hold; None = all
    reasons: tuple[str, ...] = ()

    @property
    def narrowed(self) -> bool:
        return self.run and self.files is not None


@dataclass(frozen=True, slots=True)
class SelectionPlan:
    changed_files: tuple[str, ...]
    suites: tuple[SuiteSelection, ...] = field(default=())

    def of(self, suite: str) -> SuiteSelection | None:
        return next((s for s in self.suites if s.suite == suite), None)


@lru_cache(maxsize=4096)
def _glob_regex(glob: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        out.append("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def matches(path: str, globs: Iterable[str]) -> bool:
    """Whether `path` matches any glob (`*` stays in a folder, `**` crosses folders)."""
    return any(_glob_regex(g + "**" if g.endswith("/") else g).match(path) for g in globs)


def file_of(test_id: str) -> str:
    """The file a test id lives in: `a/b.py::T::t` -> `a/b.py`, `S :: x/y.mlir` -> `x/y.mlir`,
    `pkg.tests.test_m.TestC::t` -> `pkg/tests/test_m.py`."""
    if " :: " in test_id:
        return test_id.split(" :: ", 1)[1]
    head = test_id.split("::", 1)[0]
    if "/" in head or "." not in head or PurePosixPath(head).suffix in (".py", ".mlir", ".ll", ".cpp"):
        return head
    parts = head.split(".")
    while len(parts) > 1 and parts[-1][:1].isupper():
        parts.pop()
    return "/".join(parts) + ".py"


def node_id(test_id: str) -> str:
    """What a harness takes to run exactly one test: pytest `file::Class::name`, lit `path`."""
    if " :: " in test_id:
        return test_id.split(" :: ", 1)[1]
    head, _, rest = test_id.partition("::")
    file = file_of(test_id)
    if file == head:
        return test_id
    classes = [p for p in head.split(".") if p[:1].isupper()]
    return "::".join([file, *classes, *([rest] if rest else [])])


def _stem(path: str) -> str:
    stem = PurePosixPath(path).stem.lower()
    for affix in ("test_", "_test", "tests_", "_tests"):
        stem = stem.removeprefix(affix) if affix.endswith("_") else stem.removesuffix(affix)
    return stem


@dataclass
class CoFailure:
    """Counts learned from history: how often each file changed and which tests then failed."""

    changes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    fails: dict[str, dict[tuple[str, str], int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int)))

    @classmethod
    def learn(cls, history: Iterable[HistoryEntry]) -> CoFailure:
        cf = cls()
        for h in history:
            keys = set(h.changed_files) | {_folder(f) for f in h.changed_files}
            for key in keys:
                cf.changes[key] += 1
                for t in h.failed:
                    cf.fails[key][t] += 1
        return cf

    def suspects(self, path: str, suite: str) -> tuple[set[str], bool]:
        """Tests of `suite` worth running when `path` changes, and whether history knew it."""
        key = path if self.changes.get(path) else _folder(path)
        n = self.changes.get(key, 0)
        if n == 0:
            return set(), False
        hits = {t for (s, t), k in self.fails.get(key, {}).items() if s == suite and k / n >= MIN_SCORE}
        return hits, True


def _folder(path: str) -> str:
    return str(PurePosixPath(path).parent) + "/"


def _select_tests(spec: SuiteSpec, changed: Sequence[str], cf: CoFailure,
                  recent_failures: frozenset[str]) -> SuiteSelection:
    by_file: dict[str, list[str]] = defaultdict(list)
    for t in spec.known_tests:
        by_file[file_of(t)].append(t)
    stems: dict[str, set[str]] = defaultdict(set)
    for f in by_file:
        stems[_stem(f)].add(f)
    chosen: set[str] = set()
    reasons: list[str] = []
    for path in changed:
        covered = not spec.paths or matches(path, spec.paths) or path in by_file
        direct = stems.get(_stem(path), set()) if covered else set()
        if path in by_file or covered and _looks_like_test(path):
            direct = direct | {path}
        hits, known = cf.suspects(path, spec.name)
        if covered and not known and not direct:
            return SuiteSelection(spec.name, True, None, None,
                                  (f"no history for {path}: the whole suite runs",))
        files = direct | {file_of(t) for t in hits}
        chosen |= files
        if files:
            reasons.append(f"{path}: {len(files)} test file(s)")
    chosen |= {file_of(t) for t in recent_failures}
    if not chosen:
        return SuiteSelection(spec.name, False, (), (), ("no test is related to the change",))
    tests = tuple(t for f in sorted(chosen) for t in by_file.get(f, ()))
    return SuiteSelection(spec.name, True, tuple(sorted(chosen)), tests, tuple(reasons))


def _looks_like_test(path: str) -> bool:
    name = PurePosixPath(path).name.lower()
    return name.startswith("test") or "_test." in name or "/test" in path.lower()


def select(changed_files: Sequence[str], suites: Sequence[SuiteSpec],
           history: Iterable[HistoryEntry] = (),
           recent_failures: Mapping[str, frozenset[str]] | None = None) -> SelectionPlan:
    """Pick suites and tests for a change touching `changed_files`.

    Args:
        suites: the tier's suites; `known_tests` from their last full run (empty: run whole).
        history: past changes and the tests that failed on them (co-failure evidence).
        recent_failures: per suite, tests failing in its latest run (always rerun).
    """
    changed = tuple(sorted(set(changed_files)))
    cf = CoFailure.learn(history)
    recent = recent_failures or {}
    out: list[SuiteSelection] = []
    for spec in suites:
        if spec.paths and not any(matches(p, spec.paths) for p in changed) and not any(
                cf.suspects(p, spec.name)[0] for p in changed):
            out.append(SuiteSelection(spec.name, False, reasons=("no changed file matches its paths",)))
            continue
        if not spec.can_select_tests or not spec.known_tests:
            why = "its paths match the change" if spec.paths else "it has no paths: always runs"
            out.append(SuiteSelection(spec.name, True, reasons=(why,)))
            continue
        out.append(_select_tests(spec, changed, cf, recent.get(spec.name, frozenset())))
    return SelectionPlan(changed, tuple(out))


def run_everything(suites: Sequence[SuiteSpec]) -> SelectionPlan:
    """The plan without `--changed-from`: every suite, whole."""
    return SelectionPlan((), tuple(SuiteSelection(s.name, True, reasons=("full run",)) for s in suites))
