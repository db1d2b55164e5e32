"""Test selection: which suites, and which tests of them, a change needs.  Pure.

Predictive test selection with a fixed budget (by default a third of the known tests):

* the `paths` mapping of each suite (globs, `**` crosses folders) decides which suites are in
  play: a suite whose paths no changed file matches is skipped (unless history shows its tests
  failing with these files); a suite with no `paths` always runs; a suite whose tests cannot be
  selected one by one runs whole;
* inside the suites that can narrow, every test file is ranked by the share of this change's
  likely breakage that lands in it, and the best-ranked files run until the budget is spent
  (always all of it; a changed test file ranks its suite's other files by its history alone).
  The shares are learned from co-failure history (`HistoryEntry`: the files a validated change
  touched and the tests that failed on it; `CoFailure`), with older runs decayed, the blame of
  a failure shared among the files of its change, a run's lone failure discounted (that is how
  flaky tests show), and a smoothing prior made of name affinity (`src/p/m.py` <->
  `tests/p/test_m.py`), the history of the file's folders (so new files borrow their folder's)
  and the test files that most often catch other code's breakage;
* changed test files and tests failing in the suite's latest full run always run, on top of the
  budget: they never take it from the change's ranked tests (a flaky test failing in the latest
  full run once spent a small suite's whole budget, and a change to `lib/calc.py` landed without
  `tests/test_calc.py` running);
* the strongest evidence for each changed file runs even past the budget: the test files named
  after it and the one that failed most with it (`MIN_CREDIT`), and each suite in play runs at
  least its best-ranked file (a third of a 4-test suite is 1 test, smaller than any file that
  matters); when all the tests in play fit in the budget they all run.

When a changed file that a suite covers has too little evidence (no test named after it, and
neither it nor the nearest folder it borrows from changed in at least `MIN_SEEN` decayed runs),
the whole suite runs: forkflow never guesses that a change is safe.  A few passing runs of a
neighbour say nothing about where a breakage of this file lands; so at a cold start (less than
`MIN_SEEN` runs of history) every such file runs its suites whole.  Selection is by test file
(`file_of()`), the unit harnesses accept on the command line; the budget is counted in tests.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePosixPath

DEFAULT_BUDGET = 1 / 3  # fraction of the known tests one change may run (Meta's PTS figure)
HISTORY_RUNS = 5000     # newest validation runs selection learns from (`cofailure_history`)
HALF_LIFE = 5000        # runs after which a co-failure counts half (code and tests drift)
PRIOR_WEIGHT = 1.0      # pseudo-failures of prior belief per changed file (Dirichlet smoothing)
BAD_RATE_WEIGHT = 5.0   # pseudo-changes of the overall bad rate per changed file
PRIOR_MIX = {"name": 0.5, "folder": 0.3, "suite": 0.2}  # how the prior splits its belief
LONE_FAILURE = 0.2      # weight of a run's only failure when no changed file is named after it
UNIFORM = 0.1           # share of the suite prior spread evenly (never rank a test at zero)
MIN_SEEN = 10           # runs a file (or a folder it borrows from) needs to count as evidence
MIN_CREDIT = 1.0        # blame (decayed failures) on a file that makes its top test file run always

Unit = tuple[str, str]  # (suite, test file): what selection picks


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


@lru_cache(maxsize=65536)
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


@lru_cache(maxsize=65536)
def _stem(path: str) -> str:
    stem = PurePosixPath(path).stem.lower()
    for affix in ("test_", "_test", "tests_", "_tests"):
        stem = stem.removeprefix(affix) if affix.endswith("_") else stem.removesuffix(affix)
    return stem


@lru_cache(maxsize=65536)
def _folders(path: str) -> tuple[str, ...]:
    """The folders above `path`, nearest first, as `a/b/` keys (the root is not a folder)."""
    parents = PurePosixPath(path).parents
    return tuple(str(p) + "/" for p in parents if str(p) not in (".", "/", ""))


@lru_cache(maxsize=65536)
def _keys(path: str) -> tuple[str, ...]:
    return (path, *_folders(path))


@lru_cache(maxsize=65536)
def _affinity(source: str, test_file: str) -> int:
    """How surely `test_file` is the test of `source`: 0 when the names differ, else one plus
    the folder names they share (`src/p0/m.py` is closer to `tests/p0/test_m.py` than to
    `tests/p1/test_m.py`)."""
    if source == test_file or _stem(source) != _stem(test_file):
        return 0
    return 1 + len(set(PurePosixPath(source).parent.parts) & set(PurePosixPath(test_file).parent.parts))


def _is_test_module(path: str) -> bool:
    """A file of tests (`test_m.py`, `m_test.py`): a breakage of it shows in itself."""
    name = PurePosixPath(path).name.lower()
    return name.startswith("test") or "_test." in name


def _looks_like_test(path: str) -> bool:
    return _is_test_module(path) or "/test" in path.lower()


@dataclass
class CoFailure:
    """Decayed counts learned from history, per changed file and per folder (`a/b/`).

    `changes[key]`: runs that touched it; `credit[key][unit]`: failures of that test file blamed
    on it; `total[key]`: all its credit; `bad[key]`: runs with a failure blamed on it;
    `cross[unit]`: its failures blamed on files it is not named after (how much it catches of
    other code: the best guess for a file without history).  A failure's blame is shared among the files of its change by
    how likely each broke that test file, and a run's only failure counts less unless a changed
    file is named after it: lone failures are how flaky tests show.
    """

    test_files: frozenset[str] = frozenset()
    changes: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    bad: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    credit: dict[str, dict[Unit, float]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    total: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    cross: dict[Unit, float] = field(default_factory=lambda: defaultdict(float))
    runs: float = 0.0
    bad_runs: float = 0.0
    _by_stem: dict[str, list[str]] = field(default_factory=dict)
    _named: dict[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def learn(cls, history: Iterable[HistoryEntry], test_files: Iterable[str] = (),
              half_life: float = HALF_LIFE) -> CoFailure:
        """Count twice: the first pass shares each failure's blame by name, the second by what
        the first learned (how often each file's changes broke that test file)."""
        first = cls(frozenset(test_files))
        decay, w = 0.5 ** (1 / half_life), 1.0
        failing: list[tuple[float, tuple[str, ...], frozenset[Unit]]] = []
        for h in history:  # newest first, as `cofailure_history` returns them
            first.runs += w
            for f in h.changed_files:
                for key in _keys(f):
                    first.changes[key] += w
            if h.failed and h.changed_files:
                failing.append((w, tuple(sorted(h.changed_files)),
                                frozenset((suite, file_of(t)) for suite, t in h.failed)))
            w *= decay
        second = cls(first.test_files, first.changes, runs=first.runs,
                     _by_stem=first._by_stem, _named=first._named)
        for w, files, units in failing:
            first._blame(w, files, units, [[3.0 if u[1] in first.named(f) else 1.0 for f in files]
                                           for u in units])
        for w, files, units in failing:
            second._blame(w, files, units, [first.likelihoods(files, u) for u in units])
        return second

    def named(self, source: str) -> frozenset[str]:
        """The known test files named after `source`, the closest by folder when several are."""
        got = self._named.get(source)
        if got is None:
            if not self._by_stem:
                for t in self.test_files:
                    self._by_stem.setdefault(_stem(t), []).append(t)
            cands = [(a, t) for t in self._by_stem.get(_stem(source), ()) if (a := _affinity(source, t))]
            best = max((a for a, _ in cands), default=0)
            got = self._named[source] = frozenset(t for a, t in cands if a == best)
        return got

    def likelihoods(self, files: Sequence[str], unit: Unit) -> list[float]:
        """How likely each file of a change broke `unit`, from what this model learned."""
        out = []
        for f in files:
            key = self.key_of(f)
            got = self.credit[key].get(unit, 0.0) if key in self.credit else 0.0
            guess = 0.5 if unit[1] in self.named(f) else 0.02
            n = self.total.get(key, 0.0) if key else 0.0
            out.append(self.bad_rate(key) * (got + PRIOR_WEIGHT * guess) / (n + PRIOR_WEIGHT))
        return out

    def _blame(self, w: float, files: tuple[str, ...], units: frozenset[Unit],
               shares: list[list[float]]) -> None:
        self.bad_runs += w
        lone = len(units) == 1
        blamed: dict[str, float] = defaultdict(float)
        for u, share in zip(units, shares):
            sure = 1.0 if not lone or any(u[1] in self.named(f) for f in files) else LONE_FAILURE
            norm = sum(share) or 1.0
            for f, part in zip(files, share):
                part *= w * sure / norm
                blamed[f] += part / len(units)
                if u[1] not in self.named(f):
                    self.cross[u] += part
                for key in _keys(f):
                    self.credit[key][u] += part
                    self.total[key] += part
        for f, part in blamed.items():
            for key in _keys(f):
                self.bad[key] += part

    def is_known(self, path: str) -> bool:
        """Whether history may narrow a change of `path`: a test file is named after it, or it
        or the folder it borrows from changed in at least `MIN_SEEN` (decayed) runs."""
        # half a run of slack: decayed, the newest 10 runs count 9.99
        return bool(self.named(path)) or self.seen(path) + 0.5 >= MIN_SEEN

    def seen(self, path: str) -> float:
        """The (decayed) runs that changed `path` or, when more, its nearest folder history
        knows: the one it borrows from, not a wider one (`src/` says little about `src/p/`)."""
        folder = next((self.changes[k] for k in _folders(path) if self.changes.get(k)), 0.0)
        return max(self.changes.get(path, 0.0), folder)

    def key_of(self, path: str) -> str | None:
        """The file itself when history knows it, else its nearest known folder."""
        return next((k for k in _keys(path) if self.changes.get(k)), None)

    def bad_rate(self, key: str | None) -> float:
        """Smoothed P(a change of `key` breaks a test), never zero."""
        base = (self.bad_runs + 1) / (self.runs + 2)
        if key is None:
            return base
        return (self.bad.get(key, 0.0) + BAD_RATE_WEIGHT * base) / (self.changes[key] + BAD_RATE_WEIGHT)


@dataclass(frozen=True, slots=True)
class _Pool:
    """The selectable suites' test files: unit -> its test ids."""

    tests: Mapping[Unit, tuple[str, ...]]
    by_suite: Mapping[str, tuple[Unit, ...]]


def _pool(specs: Sequence[SuiteSpec]) -> _Pool:
    tests: dict[Unit, list[str]] = defaultdict(list)
    for spec in specs:
        for t in spec.known_tests:
            tests[(spec.name, file_of(t))].append(t)
    by_suite: dict[str, list[Unit]] = defaultdict(list)
    for u in sorted(tests):
        by_suite[u[0]].append(u)
    return _Pool({u: tuple(ts) for u, ts in tests.items()}, {s: tuple(us) for s, us in by_suite.items()})


def _distribution(counts: Mapping[Unit, float], allowed: Sequence[Unit]) -> dict[Unit, float]:
    total = sum(counts.get(u, 0.0) for u in allowed)
    return {u: counts[u] / total for u in allowed if counts.get(u)} if total else {}


def _prior(path: str, covering: Sequence[Unit], cf: CoFailure) -> dict[Unit, float]:
    """Where a breakage of `path` lands before its own history is counted: the test files named
    after it, its nearest folder's co-failures, and the test files that most often catch other
    code's breakage (plus a little everywhere)."""
    parts: dict[str, dict[Unit, float]] = {}
    named = [u for u in covering if u[1] in cf.named(path)]
    if named:
        parts["name"] = {u: 1 / len(named) for u in named}
    for folder in _folders(path):
        dist = _distribution(cf.credit.get(folder, {}), covering)
        if dist:
            parts["folder"] = dist
            break
    catches = _distribution(cf.cross, covering)
    parts["suite"] = {u: (1 - UNIFORM) * catches.get(u, 0.0) + UNIFORM / len(covering) for u in covering} \
        if catches else {u: 1 / len(covering) for u in covering}
    mix = sum(PRIOR_MIX[k] for k in parts)
    out: dict[Unit, float] = defaultdict(float)
    for k, dist in parts.items():
        for u, p in dist.items():
            out[u] += PRIOR_MIX[k] / mix * p
    return out


def _scores(changed: Sequence[str], covering: Mapping[str, Sequence[Unit]], cf: CoFailure,
            pool: _Pool) -> dict[Unit, float]:
    """Expected share of the change's breakage that lands in each unit (the ranking key):
    per changed file, P(it breaks something) times where its breakage lands (its own co-failures
    smoothed by its prior)."""
    scores: dict[Unit, float] = defaultdict(float)
    for path in changed:
        key = cf.key_of(path)
        own = {u: c for u, c in (cf.credit.get(key, {}) if key else {}).items() if u in pool.tests}
        prior = _prior(path, covering[path], cf) if covering.get(path) else {}
        denom = sum(own.values()) + (PRIOR_WEIGHT if prior else 0.0)
        if not denom:
            continue
        w = cf.bad_rate(key)
        for u in own.keys() | prior.keys():
            scores[u] += w * (own.get(u, 0.0) + PRIOR_WEIGHT * prior.get(u, 0.0)) / denom
    return scores


def _floor(changed: Sequence[str], covering: Mapping[str, Sequence[Unit]], cf: CoFailure,
           scores: Mapping[Unit, float]) -> set[Unit]:
    """The units that run whatever the budget: per changed file that is not itself a test file,
    the test files named after it and the one with the most (at least `MIN_CREDIT`) of its own
    blame; and each suite's best-ranked unit, so no suite in play is left out."""
    out = set({u[0]: u for u in sorted(scores, key=lambda u: (scores[u], u))}.values())  # the last, the best, wins
    for path in changed:
        if _is_test_module(path):
            continue
        named = cf.named(path)
        out |= {u for u in covering.get(path, ()) if u[1] in named}
        own = {u: c for u, c in cf.credit.get(path, {}).items() if u in scores}
        top = max(own, key=lambda u: (own[u], u), default=None)
        if top is not None and own[top] >= MIN_CREDIT:
            out.add(top)
    return out


def _fill(scores: Mapping[Unit, float], chosen: set[Unit], pool: _Pool, limit: int) -> int:
    """Add units by score per test while their tests fit in `limit`; returns the tests added."""
    used = 0
    for u in sorted(scores, key=lambda u: (-scores[u] / len(pool.tests[u]), u)):
        size = len(pool.tests[u])
        if u not in chosen and used + size <= limit:
            chosen.add(u)
            used += size
    return used


def select(changed_files: Sequence[str], suites: Sequence[SuiteSpec],
           history: Iterable[HistoryEntry] = (),
           recent_failures: Mapping[str, frozenset[str]] | None = None,
           budget: float = DEFAULT_BUDGET) -> SelectionPlan:
    """Pick suites and tests for a change touching `changed_files`.

    Args:
        suites: the tier's suites; `known_tests` from their last full run (empty: run whole).
        history: past changes and the tests that failed on them, newest first.
        recent_failures: per suite, tests failing in its latest run (always rerun).
        budget: the share of the selectable suites' known tests one change may run, in (0, 1].
    """
    if not 0 < budget <= 1:
        raise ValueError(f"selection budget {budget} is not in (0, 1]")
    changed = tuple(sorted(set(changed_files)))
    selectable = [s for s in suites if s.can_select_tests and s.known_tests]
    pool = _pool(selectable)
    cf = CoFailure.learn(history, {u[1] for u in pool.tests})
    blamed = {u[0] for p in changed for u in cf.credit.get(p, {}) if u in pool.tests}
    out: dict[str, SuiteSelection] = {}
    in_play: list[SuiteSpec] = []
    for spec in suites:
        if spec.paths and not any(matches(p, spec.paths) for p in changed) and spec.name not in blamed:
            out[spec.name] = SuiteSelection(spec.name, False, reasons=("no changed file matches its paths",))
        elif spec not in selectable:
            why = "its paths match the change" if spec.paths else "it has no paths: always runs"
            out[spec.name] = SuiteSelection(spec.name, True, reasons=(why,))
        else:
            in_play.append(spec)
    limit = int(budget * sum(map(len, pool.tests.values())) + 1e-9)
    out.update(_narrow(changed, in_play, cf, pool, limit, recent_failures or {}))
    return SelectionPlan(changed, tuple(out[s.name] for s in suites))


def _narrow(changed: Sequence[str], specs: Sequence[SuiteSpec], cf: CoFailure, pool: _Pool,
            limit: int, recent: Mapping[str, frozenset[str]]) -> dict[str, SuiteSelection]:
    """Rank the test files of the in-play suites together and spend the budget on the best."""
    if sum(len(s.known_tests) for s in specs) <= limit:
        return {s.name: SuiteSelection(s.name, True, reasons=(
            f"its {len(s.known_tests)} tests fit in the budget of {limit}",)) for s in specs}
    out: dict[str, SuiteSelection] = {}
    covering: dict[str, list[Unit]] = defaultdict(list)
    must: set[Unit] = set()
    new_tests: dict[str, set[str]] = defaultdict(set)
    for spec in specs:
        mine = [p for p in changed if not spec.paths or matches(p, spec.paths) or (spec.name, p) in pool.tests]
        blind = [p for p in mine if not cf.is_known(p) and not _looks_like_test(p)]
        if blind:
            out[spec.name] = SuiteSelection(spec.name, True, reasons=(
                f"too little history for {blind[0]} or its folder ({cf.seen(blind[0]):.3g} of the "
                f"{MIN_SEEN} runs needed) and no test named after it: the whole suite runs",))
            continue
        for p in mine:
            if (spec.name, p) in pool.tests:
                must.add((spec.name, p))
            elif _looks_like_test(p):
                new_tests[spec.name].add(p)  # a test file the last full run did not have
            if (spec.name, p) not in pool.tests and not _is_test_module(p):
                # a breakage of a test file of this suite shows in itself, which runs: its
                # other files rank for it by history alone, not by a prior guess
                covering[p].extend(pool.by_suite[spec.name])
        must |= {(spec.name, f) for f in map(file_of, recent.get(spec.name, ())) if (spec.name, f) in pool.tests}
    narrowing = [s for s in specs if s.name not in out]
    scores = {u: v for u, v in _scores(changed, covering, cf, pool).items()
              if any(u[0] == s.name for s in narrowing)}
    floor = _floor(changed, covering, cf, scores) - must
    chosen = must | floor
    used = sum(len(pool.tests[u]) for u in floor)
    used += _fill(scores, chosen, pool, limit - used)
    extra = sum(len(pool.tests[u]) for u in must)
    spent = (f"{used} tests of a budget of {limit}"
             + (" (the strongest evidence for the changed files runs past it)" if used > limit else "")
             + (f", plus {extra} that always run (changed, or failing in the latest full run)" if extra else ""))
    for spec in narrowing:
        files = sorted({f for s, f in chosen if s == spec.name} | new_tests[spec.name])
        if not files:
            out[spec.name] = SuiteSelection(spec.name, False, (), (), ("none of its tests ranked within the budget",))
            continue
        tests = tuple(t for f in files for t in pool.tests.get((spec.name, f), ()))
        why = f"{len(files)} test file(s) ranked by co-failure history and name; {spent}"
        out[spec.name] = SuiteSelection(spec.name, True, tuple(files), tests, (why,))
    return out


def run_everything(suites: Sequence[SuiteSpec]) -> SelectionPlan:
    """The plan without `--changed-from`: every suite, whole."""
    return SelectionPlan((), tuple(SuiteSelection(s.name, True, reasons=("full run",)) for s in suites))
