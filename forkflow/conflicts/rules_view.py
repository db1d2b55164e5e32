"""What a person reads about the trust gate: each rule's record on the fork, and a rule's
proposal as a diff against the fork's file (`forkflow conflicts rules`, `conflicts show`, the
dashboard)."""
from __future__ import annotations

import difflib
from datetime import datetime, timezone

from forkflow.config import Config
from forkflow.conflicts.case import case_from_marked, decode
from forkflow.conflicts.classify import ConflictKind
from forkflow.conflicts.learn import learn_fork
from forkflow.conflicts.records import ConflictInfo
from forkflow.conflicts.rulebook import load_book, save_book
from forkflow.conflicts.trust import RuleBook, TrustSettings, trust_settings
from forkflow.git.repo import Repo
from forkflow.store.session import Store

MAX_DIFF_LINES = 2_000


def proposal_diff(x: ConflictInfo, content: str) -> str:
    """The proposal as a unified diff against the fork's side of the stored conflict ("" when the
    conflict has no text regions to rebuild that side from)."""
    case = case_from_marked(x.upstream_sha, x.subject, x.path, ConflictKind(x.kind), x.marked, x.key) \
        if x.marked and x.key else None
    if case is None:
        return ""
    ours = (decode(case.ours) or "").splitlines(keepends=True)
    lines = list(difflib.unified_diff(ours, content.splitlines(keepends=True), f"a/{x.path} (fork)",
                                      f"b/{x.path} (proposal)", n=3))
    if len(lines) > MAX_DIFF_LINES:
        lines = lines[:MAX_DIFF_LINES] + [f"... {len(lines) - MAX_DIFF_LINES} more diff lines (--json has the whole file)\n"]
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def rule_rows(book: RuleBook, settings: TrustSettings) -> list[dict[str, object]]:
    """One row per rule, the most used first: rule, cases, identical, different, precision, status."""
    rows: list[dict[str, object]] = [{"rule": rule, "cases": r.cases, "identical": r.identical, "different": r.different,
             "precision": None if r.precision is None else round(r.precision, 4),
             "status": book.status(rule, settings)}
            for rule, r in book.records.items()]
    return sorted(rows, key=lambda d: (-int(str(d["cases"])), str(d["rule"])))


def backtest_fork(repo: Repo) -> RuleBook:
    """Each rule's backtest on the fork's newest past picks (what `ingest` learns from)."""
    tip = repo.resolve("HEAD")
    if tip is None:
        return RuleBook()
    history, _ = learn_fork(repo, tip)
    return history.book or RuleBook()


def stored_or_backtested(repo: Repo, config: Config, store: Store, fid: int,
                         refresh: bool) -> tuple[RuleBook, datetime, TrustSettings]:
    """The fork's stored rule records, backtested now (and stored) when there are none or `refresh`."""
    settings = trust_settings(config)
    with store.session_scope() as s:
        found = None if refresh else load_book(s, fid)
    if found is not None:
        return found[0], found[1], settings
    book = backtest_fork(repo)
    with store.session_scope() as s:
        save_book(s, fid, book)
    return book, datetime.now(timezone.utc), settings
