"""Read-only queries the dashboard needs beyond the ones each area exports.

They read the areas' tables in one query where a page would otherwise issue one per row (every
metric's series at once, test counts of 100 runs at once), and return dataclasses, never rows.
"""
from __future__ import annotations

import json
import threading
from operator import itemgetter
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from forkflow.ledger import records as ledger_records
from forkflow.ledger.build import ledger_from_json
from forkflow.models import Ledger, MetricPoint, Sha
from forkflow.regress import records as regress_records
from forkflow.regress.alerts import collapse_values
from forkflow.store.schema import DispositionRow, LedgerCacheRow, MetricPointRow
from forkflow.store.schema_ingest import ConflictRow, IngestRunRow, LandingUnitRow, UnitMemberRow
from forkflow.store.schema_regress import BisectionRow
from forkflow.store.schema_tiers import TestOutcomeRow, ValidationJobRow, ValidationRunRow
from forkflow.store.schema_triage import (
    ClassificationRow,
    FailureGroupRow,
    FailureRow,
    TrackingIssueRow,
)




# -- the ledger a `forkflow status` cached -------------------------------------------------------

_LEDGERS: dict[str, Ledger] = {}
_LEDGERS_LOCK = threading.Lock()


def newest_ledger(s: Session, fid: int) -> Ledger | None:
    """The ledger the newest `forkflow status` (or ingest) computed, parsed once per key."""
    key = s.scalar(select(LedgerCacheRow.key).where(LedgerCacheRow.fork_id == fid)
                   .order_by(LedgerCacheRow.created_at.desc()).limit(1))
    if key is None:
        return None
    with _LEDGERS_LOCK:
        hit = _LEDGERS.get(key)
    if hit is not None:
        return hit
    payload = ledger_records.cached_ledger(s, key)
    if payload is None:
        return None
    ledger = ledger_from_json(payload)
    with _LEDGERS_LOCK:
        if len(_LEDGERS) >= 4:
            _LEDGERS.pop(next(iter(_LEDGERS)))
        _LEDGERS[key] = ledger
    return ledger


# -- L2 series -----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Series:
    """One metric's series, one point per fork commit (the median of re-measurements)."""

    name: str
    unit: str
    better: str
    suite: str
    revs: tuple[Sha, ...]
    dates: tuple[int, ...]
    values: tuple[float, ...]
    counts: tuple[int, ...]


def _collapse(name: str, meta: tuple[str, str, str], rows: list[tuple[int, int, Sha, float]]) -> Series:
    # the points `forkflow detect` reads (regress.alerts), with each commit's first date
    revs, values, counts = collapse_values([r[2] for r in rows], [r[3] for r in rows])
    if len(revs) == len(rows):
        dates = tuple(r[0] for r in rows)
    else:
        first: dict[Sha, int] = {}
        for date, _id, rev, _value in rows:
            first.setdefault(rev, date)
        dates = tuple(first[r] for r in revs)
    return Series(name, *meta, revs, dates, values, counts)


def series_meta(s: Session, fid: int, names: Sequence[str] | None = None) -> dict[str, tuple[str, str, str]]:
    """(unit, better, suite) of each metric (or of `names`), as its newest point says."""
    points = MetricPointRow.__table__.c
    newest = select(func.max(points.id)).where(points.fork_id == fid)
    if names is not None:
        newest = newest.where(points.name.in_(list(names)))
    return {n: (unit, better, suite) for n, unit, better, suite in s.execute(
        select(points.name, points.unit, points.better, points.suite)
        .where(points.id.in_(newest.group_by(points.name).scalar_subquery())))}


def series_of(name: str, meta: tuple[str, str, str], stored: Sequence[MetricPoint]) -> Series:
    """One metric's series from its stored points (`regress_records.metric_series`: oldest commit first)."""
    return _collapse(name, meta, [(p.commit_date, i, p.rev, p.value) for i, p in enumerate(stored)])


def all_series(s: Session, fid: int, names: Sequence[str] | None = None) -> list[Series]:
    """Every metric's series (or those of `names`), in two queries, by name."""
    points = MetricPointRow.__table__.c
    q = select(points.name, points.commit_date, points.id, points.rev, points.value).where(points.fork_id == fid)
    if names is not None:
        q = q.where(points.name.in_(list(names)))
    meta = series_meta(s, fid, names)
    # Core rows, not ORM ones: building 18,250 ORM rows cost the /l2 page about half its time.
    # Grouped first, then each series sorted on (date, id): rows come in id order, so each sort
    # finds its list already in order, where one sort of every row compared metric names too.
    grouped: dict[str, list[tuple[int, int, Sha, float]]] = defaultdict(list)
    for n, date, id_, rev, value in s.connection().execute(q):  # streamed: fewer live rows, fewer GC passes
        grouped[n].append((date, id_, rev, value))
    return [_collapse(n, meta[n], sorted(grouped[n], key=itemgetter(0, 1))) for n in sorted(grouped)]


# -- validation ----------------------------------------------------------------------------------

def outcome_counts(s: Session, run_ids: Sequence[int]) -> dict[int, dict[str, int]]:
    """Per run, how many tests passed, failed, errored and were skipped."""
    out: dict[int, dict[str, int]] = {i: {} for i in run_ids}
    for i in range(0, len(run_ids), 500):
        q = (select(TestOutcomeRow.run_id, TestOutcomeRow.outcome, func.count())
             .where(TestOutcomeRow.run_id.in_(list(run_ids[i:i + 500])))
             .group_by(TestOutcomeRow.run_id, TestOutcomeRow.outcome))
        for run_id, outcome, n in s.execute(q):
            out[run_id][outcome] = int(n)
    return out


def job_alarms(s: Session, run_ids: Sequence[int]) -> dict[int, list[tuple[str, tuple[str, ...]]]]:
    """Per run, (suite, findings) of each job with saturation findings (a suite that did not run,
    ran fewer tests, counts disagree), in job order."""
    out: dict[int, list[tuple[str, tuple[str, ...]]]] = {i: [] for i in run_ids}
    for i in range(0, len(run_ids), 500):
        q = (select(ValidationJobRow.run_id, ValidationJobRow.suite, ValidationJobRow.findings)
             .where(ValidationJobRow.run_id.in_(list(run_ids[i:i + 500])),
                    ValidationJobRow.findings != "[]")
             .order_by(ValidationJobRow.id))
        for run_id, suite, findings in s.execute(q):
            out[run_id].append((suite, tuple(json.loads(findings))))
    return out


@dataclass(frozen=True, slots=True)
class RunBrief:
    id: int
    tier: str
    rev: Sha
    status: str
    trigger: str
    started_at: datetime
    summary: str
    reruns: tuple[int, ...] = ()    # the reruns of its failed tests (runs_at), oldest first


def _brief(r: ValidationRunRow) -> RunBrief:
    return RunBrief(r.id, r.tier, Sha(r.rev), r.status, r.trigger,
                    r.started_at, r.summary)


def trunk_runs(s: Session, fid: int, limit: int = 60) -> list[RunBrief]:
    """Runs of the whole trunk (nightly, or a full `validate` without a base), newest first."""
    q = (select(ValidationRunRow).where(
        ValidationRunRow.fork_id == fid,
        or_(ValidationRunRow.trigger == "nightly",
            (ValidationRunRow.trigger == "validate") & ValidationRunRow.base.is_(None)))
         .order_by(ValidationRunRow.id.desc()).limit(limit))
    return [_brief(r) for r in s.scalars(q)]


@dataclass(frozen=True, slots=True)
class TipHealth:
    """The truth about one fork commit (the tip): every finished L1/L2 run at it read together
    (full runs, gate runs, reruns), each test at its newest outcome there."""

    rev: Sha
    state: str                            # "red" | "green"
    runs: tuple[int, ...]                 # the runs read, oldest first
    red: tuple[tuple[str, str, int], ...]  # (suite, test, the run that made it red)
    red_by: int | None                    # the run that made the tip red (the first of `red`'s)
    newest_run_id: int
    status: str                           # "PASS" | "FAIL": the state as a run status

    def to_dict(self) -> dict[str, object]:
        return {"rev": self.rev, "state": self.state, "status": self.status, "runs": list(self.runs),
                "run_id": self.newest_run_id, "red_by_run": self.red_by,
                "red_tests": [{"suite": su, "test": t, "run_id": r} for su, t, r in self.red]}


def tip_health(s: Session, fid: int, tip: str | None = None) -> TipHealth | None:
    """The health of `tip` (default: the commit of the newest full trunk run), or None when no
    finished L1/L2 run is stored there.  A test red in a gate run and its reruns makes the tip
    red; one that failed and then passed on a rerun at the tip does not (flaky, not red); a run
    that failed with no failing test (a saturation finding) is red until a later run passes."""
    if tip is None:
        newest = trunk_runs(s, fid, limit=1)
        if not newest:
            return None
        tip = newest[0].rev
    runs = list(s.scalars(select(ValidationRunRow).where(
        ValidationRunRow.fork_id == fid, ValidationRunRow.rev == tip,
        ValidationRunRow.tier.in_(("L1", "L2")), ValidationRunRow.status.in_(("PASS", "FAIL")))
        .order_by(ValidationRunRow.id)))
    if not runs:
        return None
    state: dict[tuple[str, str], int | None] = {}   # test -> the run that made it red, None: green
    finding_red: int | None = None
    for r in runs:
        rows = s.execute(select(TestOutcomeRow.suite, TestOutcomeRow.test_id, TestOutcomeRow.outcome)
                         .where(TestOutcomeRow.run_id == r.id)).all()
        for suite, test, outcome in rows:
            key = (suite, test)
            if outcome in ("FAIL", "ERROR"):
                state[key] = state.get(key) or r.id
            elif outcome == "PASS":
                state[key] = None
        if r.parent_run_id is None:
            bad = any(o in ("FAIL", "ERROR") for _s, _t, o in rows)
            finding_red = r.id if r.status == "FAIL" and not bad else (None if r.status == "PASS" else finding_red)
    red = tuple(sorted(((su, t, rid) for (su, t), rid in state.items() if rid is not None),
                       key=lambda x: (x[2], x[0], x[1])))
    red_by = red[0][2] if red else finding_red
    return TipHealth(Sha(tip), "red" if red_by is not None else "green", tuple(r.id for r in runs), red,
                     red_by, runs[-1].id, "FAIL" if red_by is not None else "PASS")


def runs_at(s: Session, fid: int, revs: Sequence[str]) -> dict[Sha, list[RunBrief]]:
    """Validation runs of the given fork commits (a unit's candidate: its L1), newest first.

    A rerun is not a run of its own here: it is listed in its run's `reruns`, so a unit's L1
    is its gate run, never a one-test rerun that came after it."""
    out: dict[Sha, list[RunBrief]] = defaultdict(list)
    for i in range(0, len(revs), 500):
        q = (select(ValidationRunRow).where(ValidationRunRow.fork_id == fid,
                                            ValidationRunRow.rev.in_(list(revs[i:i + 500])))
             .order_by(ValidationRunRow.id.desc()))
        for brief in _with_reruns(list(s.scalars(q))):
            out[brief.rev].append(brief)
    return out


def runs_by_id(s: Session, fid: int, ids: Sequence[int]) -> dict[int, RunBrief]:
    """Validation runs by id, each with its reruns: the gate run a landing unit names (every unit
    of a batch names the batch's run, whose candidate is the top unit's)."""
    out: dict[int, RunBrief] = {}
    for i in range(0, len(ids), 500):
        chunk = list(ids[i:i + 500])
        q = select(ValidationRunRow).where(ValidationRunRow.fork_id == fid,
                                           or_(ValidationRunRow.id.in_(chunk),
                                               ValidationRunRow.parent_run_id.in_(chunk)))
        out.update((b.id, b) for b in _with_reruns(list(s.scalars(q))))
    return out


def _with_reruns(rows: list[ValidationRunRow]) -> list[RunBrief]:
    """The runs among `rows` that are not reruns, each listing its reruns found in `rows`."""
    reruns: dict[int, list[int]] = defaultdict(list)
    for r in rows:
        if r.parent_run_id is not None:
            reruns[r.parent_run_id].append(r.id)
    return [replace(_brief(r), reruns=tuple(sorted(reruns.get(r.id, ())))) for r in rows if r.parent_run_id is None]


# -- ingestion -----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class UnitBrief:
    id: int
    run_id: int
    kind: str
    name: str
    candidate_sha: Sha | None
    status: str
    summary: str
    commits: int
    updated_at: datetime
    l1_run_id: int | None = None  # the gate run that validated it (a batch's run for every unit of it)
    retry_of: int | None = None   # the unit it re-ran


def recent_units(s: Session, fid: int, limit: int = 100) -> list[UnitBrief]:
    """The newest landing units with their commit counts, newest first."""
    counts = (select(UnitMemberRow.unit_id, func.count().label("n"))
              .group_by(UnitMemberRow.unit_id).subquery())
    q = (select(LandingUnitRow, counts.c.n)
         .join(counts, counts.c.unit_id == LandingUnitRow.id, isouter=True)
         .where(LandingUnitRow.fork_id == fid).order_by(LandingUnitRow.id.desc()).limit(limit))
    return [UnitBrief(u.id, u.run_id, u.kind, u.name, Sha(u.candidate_sha) if u.candidate_sha else None,
                      u.status, u.summary, int(n or 0), u.updated_at, u.l1_run_id)
            for u, n in s.execute(q)]


UNITS_PER_PAGE = 50


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One ingest run: what it was asked to do and when."""

    id: int
    mode: str
    status: str
    base_sha: Sha
    started_at: datetime
    finished_at: datetime | None


def units_page(s: Session, fid: int, page: int, per_page: int = UNITS_PER_PAGE) -> tuple[list[UnitBrief], int]:
    """One page of landing units, grouped by ingest run: the newest run first, the units of a run
    in the order they ran (a re-run's units are in the run that made them); and the units' total."""
    total = int(s.scalar(select(func.count()).select_from(LandingUnitRow).where(LandingUnitRow.fork_id == fid)) or 0)
    counts = (select(UnitMemberRow.unit_id, func.count().label("n"))
              .group_by(UnitMemberRow.unit_id).subquery())
    q = (select(LandingUnitRow, counts.c.n)
         .join(counts, counts.c.unit_id == LandingUnitRow.id, isouter=True)
         .where(LandingUnitRow.fork_id == fid)
         .order_by(LandingUnitRow.run_id.desc(), LandingUnitRow.id.asc())
         .offset((page - 1) * per_page).limit(per_page))
    return [UnitBrief(u.id, u.run_id, u.kind, u.name, Sha(u.candidate_sha) if u.candidate_sha else None,
                      u.status, u.summary, int(n or 0), u.updated_at, u.l1_run_id, u.retry_of)
            for u, n in s.execute(q)], total


def ingest_runs(s: Session, fid: int, run_ids: Sequence[int]) -> dict[int, RunInfo]:
    """Ingest runs by id."""
    out: dict[int, RunInfo] = {}
    ids = sorted(set(run_ids))
    for i in range(0, len(ids), 500):
        q = select(IngestRunRow).where(IngestRunRow.fork_id == fid, IngestRunRow.id.in_(ids[i:i + 500]))
        out.update((r.id, RunInfo(r.id, r.mode, r.status, Sha(r.base_sha), r.started_at, r.finished_at))
                   for r in s.scalars(q))
    return out


def conflict_ids_of(s: Session, fid: int, shas: Sequence[str]) -> dict[Sha, list[tuple[int, str]]]:
    """(conflict id, path) of every conflict kept for each upstream commit, oldest first."""
    out: dict[Sha, list[tuple[int, str]]] = defaultdict(list)
    wanted = sorted(set(shas))
    for i in range(0, len(wanted), 500):
        q = (select(ConflictRow.upstream_sha, ConflictRow.id, ConflictRow.path)
             .where(ConflictRow.fork_id == fid, ConflictRow.upstream_sha.in_(wanted[i:i + 500]))
             .order_by(ConflictRow.id))
        for sha, cid, path in s.execute(q):
            out[Sha(sha)].append((int(cid), path))
    return dict(out)


def unit_members(s: Session, unit_ids: Sequence[int]) -> dict[int, list[tuple[Sha, str]]]:
    """Per landing unit, (upstream sha, pick outcome) of its members in order."""
    out: dict[int, list[tuple[Sha, str]]] = {i: [] for i in unit_ids}
    ids = list(unit_ids)
    for i in range(0, len(ids), 500):
        q = (select(UnitMemberRow.unit_id, UnitMemberRow.upstream_sha, UnitMemberRow.outcome)
             .where(UnitMemberRow.unit_id.in_(ids[i:i + 500]))
             .order_by(UnitMemberRow.unit_id, UnitMemberRow.position))
        for unit_id, sha, outcome in s.execute(q):
            out[unit_id].append((Sha(sha), outcome))
    return out


def newest_units_of(s: Session, fid: int, shas: Sequence[str]) -> dict[Sha, tuple[int, str]]:
    """(id, name) of the newest landing unit that carries each upstream commit: the unit it is in now."""
    out: dict[Sha, tuple[int, str]] = {}
    wanted = sorted(set(shas))
    for i in range(0, len(wanted), 500):
        q = (select(UnitMemberRow.upstream_sha, LandingUnitRow.id, LandingUnitRow.name)
             .join(LandingUnitRow, LandingUnitRow.id == UnitMemberRow.unit_id)
             .where(LandingUnitRow.fork_id == fid, UnitMemberRow.upstream_sha.in_(wanted[i:i + 500]))
             .order_by(LandingUnitRow.id))
        for sha, uid, name in s.execute(q):
            out[Sha(sha)] = (int(uid), name)  # ascending: the newest wins
    return out


@dataclass(frozen=True, slots=True)
class ConflictBrief:
    id: int
    path: str
    kind: str
    status: str  # open | resolved (as the store keeps it)


def conflicts_of(s: Session, fid: int, sha: str) -> list[ConflictBrief]:
    """The conflicts kept for one upstream commit (without their marked files), oldest first."""
    q = (select(ConflictRow.id, ConflictRow.path, ConflictRow.kind, ConflictRow.status)
         .where(ConflictRow.fork_id == fid, ConflictRow.upstream_sha == sha).order_by(ConflictRow.id))
    return [ConflictBrief(int(i), p, k, st) for i, p, k, st in s.execute(q)]


def units_with(s: Session, fid: int, sha: str) -> list[int]:
    """Ids of the landing units that carry an upstream commit or produced a fork commit."""
    member = select(UnitMemberRow.unit_id).where(UnitMemberRow.upstream_sha == sha)
    q = (select(LandingUnitRow.id).where(LandingUnitRow.fork_id == fid,
                                         or_(LandingUnitRow.id.in_(member),
                                             LandingUnitRow.candidate_sha == sha))
         .order_by(LandingUnitRow.id))
    return list(s.scalars(q))


# -- decisions ------------------------------------------------------------------------------------

DECISIONS_PER_PAGE = 50


@dataclass(frozen=True, slots=True)
class DecisionBrief:
    """A decision a person (or a rule the fork configured) recorded on an upstream commit."""

    sha: Sha
    verdict: str        # skip | defer | wont-port ("" when a rule recorded only a disposition)
    disposition: str    # SKIPPED | DEFERRED
    source: str         # person, or the kind of rule
    decided_by: str
    reason: str
    until: str | None
    task: str
    decided_at: datetime | None


def _not_forkflows() -> Any:
    # forkflow's own holds (a conflict, an empty pick) are "auto"; everything else someone decided
    return DispositionRow.source != "auto"


def decisions_page(s: Session, fid: int, *, verdict: str | None = None, person: str | None = None,
                   page: int = 1, per_page: int = DECISIONS_PER_PAGE) -> tuple[list[DecisionBrief], int]:
    """One page of the decisions people (and configured rules) made, newest first, and their
    total under the same filters (`verdict`: skip, defer or wont-port; `person`: who decided)."""
    where = [DispositionRow.fork_id == fid, _not_forkflows()]
    if verdict is not None:
        where.append(DispositionRow.verdict == verdict)
    if person is not None:
        where.append(DispositionRow.decided_by == person)
    total = int(s.scalar(select(func.count()).select_from(DispositionRow).where(*where)) or 0)
    q = (select(DispositionRow).where(*where)
         .order_by(DispositionRow.decided_at.desc(), DispositionRow.id.desc())
         .offset((page - 1) * per_page).limit(per_page))
    return [DecisionBrief(Sha(r.upstream_sha), r.verdict or "", r.disposition, r.source or "", r.decided_by or "",
                          r.reason or "", r.until, r.task or "", r.decided_at) for r in s.scalars(q)], total


def deciders(s: Session, fid: int) -> list[str]:
    """Everyone (and every rule) with a decision on record, by name."""
    q = (select(DispositionRow.decided_by).where(DispositionRow.fork_id == fid, _not_forkflows(),
                                                 DispositionRow.decided_by != "").distinct())
    return sorted(s.scalars(q))


# -- bisections ----------------------------------------------------------------------------------

def bisections_naming(s: Session, fid: int, sha: str) -> list[int]:
    q = (select(BisectionRow.id).where(BisectionRow.fork_id == fid, or_(
        BisectionRow.culprit_fork_sha == sha, BisectionRow.culprit_upstream_sha == sha,
        BisectionRow.culprit_unit == sha)).order_by(BisectionRow.id))
    return list(s.scalars(q))


def bisection_ids(s: Session, fid: int, alert_id: int) -> list[int]:
    q = select(BisectionRow.id).where(BisectionRow.fork_id == fid, BisectionRow.alert_id == alert_id)
    return list(s.scalars(q.order_by(BisectionRow.id)))


def metric_revs(s: Session, fid: int, sha: str) -> list[str]:
    """Names of the metrics measured at a fork commit."""
    q = (select(MetricPointRow.name).where(MetricPointRow.fork_id == fid, MetricPointRow.rev == sha)
         .distinct().order_by(MetricPointRow.name))
    return list(s.scalars(q))


# -- triage --------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class GroupBrief:
    """A failure group: its signature and how its failures were classified."""

    id: int
    key: str
    kind: str
    signature: str
    first_seen_at: datetime
    last_seen_at: datetime
    first_run_id: int
    last_run_id: int
    failures: int
    classes: dict[str, int]


def failure_groups(s: Session, fid: int, key: str | None = None) -> list[GroupBrief]:
    """Groups of a fork (or the one with `key`), most recently seen first."""
    q = (select(FailureGroupRow.id, ClassificationRow.classification, func.count(FailureRow.id))
         .join(FailureRow, FailureRow.group_id == FailureGroupRow.id)
         .join(ClassificationRow, ClassificationRow.failure_id == FailureRow.id, isouter=True)
         .where(FailureGroupRow.fork_id == fid)
         .group_by(FailureGroupRow.id, ClassificationRow.classification))
    if key is not None:
        q = q.where(FailureGroupRow.key == key)
    classes: dict[int, dict[str, int]] = defaultdict(dict)
    totals: dict[int, int] = defaultdict(int)
    for gid, cls, n in s.execute(q):
        classes[gid][cls or "UNCLASSIFIED"] = int(n)
        totals[gid] += int(n)
    rows = s.scalars(select(FailureGroupRow).where(FailureGroupRow.id.in_(list(totals)))
                     .order_by(FailureGroupRow.last_run_id.desc(), FailureGroupRow.id))
    return [GroupBrief(g.id, g.key, g.kind, g.signature,
                       g.first_seen_at,
                       g.last_seen_at,
                       g.first_run_id, g.last_run_id, totals[g.id], dict(classes[g.id]))
            for g in rows]


@dataclass(frozen=True, slots=True)
class FailureBrief:
    id: int
    run_id: int
    suite: str
    test_id: str
    line: int
    excerpt: str
    classification: str
    reason: str


def group_failures(s: Session, group_id: int, limit: int = 200) -> list[FailureBrief]:
    q = (select(FailureRow, ClassificationRow)
         .join(ClassificationRow, ClassificationRow.failure_id == FailureRow.id, isouter=True)
         .where(FailureRow.group_id == group_id).order_by(FailureRow.id.desc()).limit(limit))
    return [FailureBrief(f.id, f.run_id, f.suite, f.test_id, f.line, f.excerpt,
                         c.classification if c else "UNCLASSIFIED", c.reason if c else "")
            for f, c in s.execute(q)]


def tracking_sinks(s: Session, fid: int) -> list[str]:
    q = select(TrackingIssueRow.sink).where(TrackingIssueRow.fork_id == fid).distinct()
    return sorted(s.scalars(q))
