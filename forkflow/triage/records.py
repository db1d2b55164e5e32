"""Store reads and writes of triage; everything returns triage dataclasses, never rows."""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from forkflow.store.schema import Base
from forkflow.store.schema_triage import (
    ClassificationRow,
    FailureGroupRow,
    FailureRow,
    TrackingIssueRow,
)
from forkflow.store.schema_tiers import TestOutcomeRow, ValidationJobRow
from forkflow.triage.models import Classification, Diagnosis, Failure, FailureKind, Signature
from forkflow.triage.signature import SIGNATURE_VERSION, log_window, signature_of, signature_of_file

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql as pg
    from sqlalchemy.dialects import sqlite


def _now() -> datetime:
    return datetime.now(timezone.utc)


def stored_failures(s: Session, run_id: int) -> list[Failure] | None:
    """The failures of a run as triage computed them, or None when it has not yet.

    Failures keyed by older signature rules (a group's `sig_version` below SIGNATURE_VERSION)
    are keyed again first, from the text the store keeps (see `rekey_run`)."""
    rows = _failure_rows(s, run_id)
    if not rows:  # not triaged yet, or green: recomputing a green run reads no log
        return None
    if any(g.sig_version < SIGNATURE_VERSION for _f, g in rows) and rekey_run(s, run_id):
        rows = _failure_rows(s, run_id)
    return [Failure(f.test_id, Signature(FailureKind(g.kind), g.signature, f.excerpt, f.line),
                    run_id, f.suite) for f, g in rows]


def _failure_rows(s: Session, run_id: int) -> list[tuple[FailureRow, FailureGroupRow]]:
    return [(f, g) for f, g in s.execute(select(FailureRow, FailureGroupRow).join(
        FailureGroupRow, FailureGroupRow.id == FailureRow.group_id).where(
        FailureRow.run_id == run_id).order_by(FailureRow.id)).all()]


def finding_signature(from_log: Signature, message: str) -> Signature:
    """A suite's own failure (`[suite]`) whose log holds no error (a GENERIC summary line such as
    `284 deselected in 0.1s`, or nothing) is keyed by its saturation finding, the first part of
    its message: one group per reason a suite did not run, not one per count in its log."""
    finding = message.split("\n--- log tail ---", 1)[0].strip()
    if from_log.kind not in (FailureKind.GENERIC, FailureKind.NO_OUTPUT) or not finding:
        return from_log
    return replace(signature_of(finding.splitlines()[0]), excerpt=from_log.excerpt, line=from_log.line)


def _source_signature(message: str, log_path: str, synthetic: bool, window: str) -> Signature | None:
    """The signature from what triage computed it from: the test's message, kept in the store,
    or the job's log when the message is empty or the failure is a job's (`[suite]`), else the
    log's window stored with the failure; None when neither is left (rows stored before the
    window was)."""
    if synthetic or not message.strip():
        path = Path(log_path) if log_path else None
        if path is not None and path.is_file():
            if synthetic:
                return finding_signature(signature_of_file(path), message)
            return signature_of_file(path)
        if window:
            return signature_of(window)
        if path is not None:
            return None
    return signature_of(message)


def _log_windows(s: Session, run_id: int, failures: Sequence[Failure]) -> dict[tuple[str, str], str]:
    """The log window of each failure of the run that was keyed from its job's log (see
    `_source_signature`): one query for those failures, then their logs read."""
    lines = {(f.job, f.test): f.signature.line for f in failures}
    out: dict[tuple[str, str], str] = {}
    for suite, test, log_path in s.execute(select(
            TestOutcomeRow.suite, TestOutcomeRow.test_id, ValidationJobRow.log_path).join(
            ValidationJobRow, ValidationJobRow.id == TestOutcomeRow.job_id).where(
            TestOutcomeRow.run_id == run_id, TestOutcomeRow.outcome.in_(("FAIL", "ERROR")),
            or_(TestOutcomeRow.test_id.startswith("[", autoescape=True),
                func.trim(TestOutcomeRow.message) == ""))):
        path = Path(log_path) if log_path else None
        if (suite, test) in lines and (suite, test) not in out and path is not None and path.is_file():
            try:
                out[(suite, test)] = log_window(path, lines[(suite, test)])
            except OSError:
                continue
    return out


def rekey_run(s: Session, run_id: int) -> bool:
    """Key the failures of run `run_id` that older signature rules keyed again, with the current
    rules; tracked groups move to the new key in place (their issue keeps its identity).

    A failure whose source text is gone (a job log deleted since, stored before its window was)
    keeps its old key: it still matches that key as before.  True when a failure moved."""
    rows = [(f, g) for f, g in _failure_rows(s, run_id) if g.sig_version < SIGNATURE_VERSION]
    if not rows:
        return False
    fid = rows[0][0].fork_id
    outcomes: dict[tuple[str, str], tuple[str, str]] = {}
    for o, log_path in s.execute(select(TestOutcomeRow, ValidationJobRow.log_path).join(
            ValidationJobRow, ValidationJobRow.id == TestOutcomeRow.job_id).where(
            TestOutcomeRow.run_id == run_id, TestOutcomeRow.outcome.in_(("FAIL", "ERROR"))).order_by(
            TestOutcomeRow.id)):
        outcomes.setdefault((o.suite, o.test_id), (o.message, log_path))
    fresh: list[tuple[FailureRow, FailureGroupRow, Signature]] = []
    for f, g in rows:
        source = outcomes.get((f.suite, f.test_id))
        sig = None if source is None else _source_signature(source[0], source[1], f.test_id.startswith("["),
                                                            f.source)
        if sig is None:
            continue
        fresh.append((f, g, sig))
        assert source is not None
        path = Path(source[1]) if source[1] else None
        if not f.source and (f.test_id.startswith("[") or not source[0].strip()) and path is not None \
                and path.is_file():  # keyed from the log: keep its window from now on
            f.source = log_window(path, sig.line)
    if not fresh:
        return False
    groups = _ensure_groups(s, fid, run_id, {sig.key: sig for _f, _g, sig in fresh})
    moved: dict[str, Counter[str]] = {}
    for f, g, sig in fresh:
        f.group_id, f.line, f.excerpt = groups[sig.key].id, sig.line, sig.excerpt
        moved.setdefault(g.key, Counter())[sig.key] += 1
    s.flush()
    for old, new in moved.items():
        # an old group split by the new rules: its issue follows the largest part
        _rekey_tracking(s, fid, old, max(sorted(new), key=lambda k: new[k]))
    return True


def _rekey_tracking(s: Session, fid: int, old: str, new: str) -> None:
    for r in s.scalars(select(TrackingIssueRow).where(
            TrackingIssueRow.fork_id == fid, TrackingIssueRow.group_key == old,
            TrackingIssueRow.sig_version < SIGNATURE_VERSION)):
        taken = old != new and s.scalar(select(TrackingIssueRow.id).where(
            TrackingIssueRow.fork_id == fid, TrackingIssueRow.sink == r.sink,
            TrackingIssueRow.group_key == new)) is not None
        if not taken:  # two old groups merged by the new rules: the first one keeps tracking
            r.group_key, r.sig_version = new, SIGNATURE_VERSION
    s.flush()


def _ensure_groups(s: Session, fid: int, run_id: int, sigs: dict[str, Signature]) -> dict[str, FailureGroupRow]:
    """The group rows of `sigs` (created when new, brought to the current rules' version), their
    last sighting moved forward to `run_id`.  One INSERT and one read per 500 keys."""
    s.execute(_insert(s, FailureGroupRow).on_conflict_do_nothing(index_elements=["fork_id", "key"]),
              [{"fork_id": fid, "key": k, "kind": sig.kind.value, "signature": sig.text,
                "sig_version": SIGNATURE_VERSION, "first_run_id": run_id, "last_run_id": run_id}
               for k, sig in sigs.items()])
    groups: dict[str, FailureGroupRow] = {}
    for part in _chunks(list(sigs)):
        groups.update((g.key, g) for g in s.scalars(select(FailureGroupRow).where(
            FailureGroupRow.fork_id == fid, FailureGroupRow.key.in_(part))))
    now = _now()
    for g in groups.values():
        if run_id >= g.last_run_id:
            g.last_run_id, g.last_seen_at = run_id, now
        if run_id < g.first_run_id:
            g.first_run_id = run_id
        if g.sig_version < SIGNATURE_VERSION:  # same key, so the same normalized text
            g.sig_version = SIGNATURE_VERSION
    return groups


def _insert(s: Session, table: type[Base]) -> pg.Insert | sqlite.Insert:
    """An INSERT with the store dialect's ON CONFLICT clauses (SQLite and PostgreSQL both have them)."""
    if s.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


def _chunks(items: Sequence[str], n: int = 500) -> list[Sequence[str]]:
    return [items[i:i + n] for i in range(0, len(items), n)]


def save_failures(s: Session, fid: int, run_id: int, failures: Sequence[Failure]) -> None:
    """Record a run's failures and their groups (a group's last sighting moves forward).

    Batched: one INSERT of the groups, one read of them, one INSERT of the failures, however
    many failures there are (a run with 500 failures is a few statements, not 1,500).
    A failure keyed from its job's log keeps the log's window around the error (capped), to be
    keyed again from it under newer signature rules once the log is gone.
    Two processes may triage one run at once (the ingest gate and `forkflow triage`): rows the
    other one committed first are kept, not written twice, so neither one fails."""
    if not failures:
        return
    sigs: dict[str, Signature] = {}
    for f in failures:
        sigs.setdefault(f.signature.key, f.signature)
    groups = _ensure_groups(s, fid, run_id, sigs)
    windows = _log_windows(s, run_id, failures)
    s.execute(_insert(s, FailureRow).on_conflict_do_nothing(index_elements=["run_id", "suite", "test_id"]),
              [{"fork_id": fid, "run_id": run_id, "suite": f.job, "test_id": f.test,
                "group_id": groups[f.signature.key].id, "line": f.signature.line,
                "excerpt": f.signature.excerpt, "source": windows.get((f.job, f.test), "")}
               for f in failures])


def save_verdicts(s: Session, run_id: int, verdicts: Sequence[Diagnosis]) -> None:
    """Record the verdict on each failure of the run; a later triage's verdict replaces an earlier one."""
    if not verdicts:
        return
    ids = {(r.suite, r.test_id): r.id for r in s.scalars(select(FailureRow).where(
        FailureRow.run_id == run_id))}
    now = _now()
    stmt = _insert(s, ClassificationRow)
    stmt = stmt.on_conflict_do_update(index_elements=["failure_id"], set_={
        "classification": stmt.excluded.classification, "reason": stmt.excluded.reason,
        "reruns": stmt.excluded.reruns, "classified_at": stmt.excluded.classified_at})
    s.execute(stmt, [{"failure_id": ids[(v.failure.job, v.failure.test)],
                      "classification": v.classification.value, "reason": v.reason,
                      "reruns": json.dumps(list(v.reruns)), "classified_at": now} for v in verdicts])


def stored_verdicts(s: Session, run_id: int) -> list[Diagnosis] | None:
    failures = stored_failures(s, run_id)
    if failures is None:
        return None
    rows = {(f.suite, f.test_id): c for f, c in s.execute(
        select(FailureRow, ClassificationRow).join(
            ClassificationRow, ClassificationRow.failure_id == FailureRow.id).where(
            FailureRow.run_id == run_id))}
    if len(rows) < len(failures):
        return None
    return [Diagnosis(f, Classification(rows[(f.job, f.test)].classification),
                    rows[(f.job, f.test)].reason, tuple(json.loads(rows[(f.job, f.test)].reruns)))
            for f in failures]


@dataclass(frozen=True, slots=True)
class Tracking:
    group_key: str
    sink: str
    issue_id: str
    url: str
    open: bool
    green_streak: int
    last_run_id: int


def tracking(s: Session, fid: int, sink: str) -> dict[str, Tracking]:
    """The tracked groups of `sink` by group key; a key from older signature rules is first moved
    to the current rules' key of its group's newest failure (`rekey_run`)."""
    for r in list(s.scalars(select(TrackingIssueRow).where(
            TrackingIssueRow.fork_id == fid, TrackingIssueRow.sink == sink,
            TrackingIssueRow.sig_version < SIGNATURE_VERSION))):
        newest = s.scalar(select(FailureRow.run_id).join(
            FailureGroupRow, FailureGroupRow.id == FailureRow.group_id).where(
            FailureGroupRow.fork_id == fid, FailureGroupRow.key == r.group_key,
            FailureGroupRow.sig_version < SIGNATURE_VERSION).order_by(FailureRow.run_id.desc()).limit(1))
        if newest is not None:
            rekey_run(s, newest)
    rows = s.scalars(select(TrackingIssueRow).where(TrackingIssueRow.fork_id == fid,
                                                    TrackingIssueRow.sink == sink))
    return {r.group_key: Tracking(r.group_key, r.sink, r.issue_id, r.url, r.state == "open",
                                  r.green_streak, r.last_run_id) for r in rows}


def save_tracking(s: Session, fid: int, t: Tracking) -> None:
    r = s.scalar(select(TrackingIssueRow).where(
        TrackingIssueRow.fork_id == fid, TrackingIssueRow.sink == t.sink,
        TrackingIssueRow.group_key == t.group_key))
    if r is None:
        r = TrackingIssueRow(fork_id=fid, sink=t.sink, group_key=t.group_key, sig_version=SIGNATURE_VERSION)
        s.add(r)
    r.issue_id, r.url, r.state = t.issue_id, t.url, "open" if t.open else "closed"
    r.green_streak, r.last_run_id, r.updated_at = t.green_streak, t.last_run_id, _now()



@dataclass(frozen=True, slots=True)
class VerdictPoint:
    """One stored verdict on a test's failure, in any tier's run (the flaky memory reads these)."""

    run_id: int
    test: str
    key: str
    classification: Classification
    reason: str
    reruns: tuple[bool, ...]


def verdicts_of_tests(s: Session, fid: int, tests: Sequence[str]) -> list[VerdictPoint]:
    """Every stored verdict on failures of `tests`, in every tier's runs, oldest run first."""
    out: list[VerdictPoint] = []
    for chunk in _chunks(sorted(set(tests))):
        rows = s.execute(select(FailureRow.run_id, FailureRow.test_id, FailureGroupRow.key,
                                ClassificationRow.classification, ClassificationRow.reason,
                                ClassificationRow.reruns)
                         .join(FailureGroupRow, FailureGroupRow.id == FailureRow.group_id)
                         .join(ClassificationRow, ClassificationRow.failure_id == FailureRow.id)
                         .where(FailureRow.fork_id == fid, FailureRow.test_id.in_(list(chunk))))
        out += [VerdictPoint(run, test, key, Classification(c), reason, tuple(json.loads(reruns or "[]")))
                for run, test, key, c, reason, reruns in rows]
    return sorted(out, key=lambda v: (v.run_id, v.test))
