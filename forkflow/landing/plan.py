"""`forkflow plan`: pending upstream commits -> touches -> risk chains and bundles -> in-memory probe."""
from __future__ import annotations

import re
from collections.abc import Callable

from forkflow.context import Context
from forkflow.errors import UserError
from forkflow.landing import records
from forkflow.landing.pick import MemoryPicker, PickStatus
from forkflow.landing.settings import IngestSettings
from forkflow.landing.touches import TouchReader
from forkflow.ledger import evidence as ev
from forkflow.ledger.classify import ShaIndex
from forkflow.models import Disposition, EvidenceKind, Ledger, LedgerEntry, Sha
from forkflow.planning.model import EMPTY_TOUCH, PendingCommit, Plan, Touch, Unit, UnitKind
from forkflow.planning.route import RoutingRules, route

DEFERRED_CHAIN = re.compile(r"^chain (\S+):")
MAX_PROBE_PASSES = 4

Progress = Callable[[str, int, int], None]  # (what, done, total)


def pending_entries(ledger: Ledger, until: Sha | None = None) -> list[LedgerEntry]:
    """PENDING and DEFERRED upstream commits in upstream order, up to `until` when given."""
    entries = list(ledger.entries)
    if until is not None:
        cut = ledger.index_of(until)
        entries = entries[: cut + 1]
    return [e for e in entries if e.disposition in (Disposition.PENDING, Disposition.DEFERRED)
            and not (e.evidence and e.evidence[0].kind is EvidenceKind.DECIDED)  # a person's deferral
            and not e.reason.startswith("in review: ")]  # proposed for review (landing/review.py)


def resolve_until(ctx: Context, ledger: Ledger, until: str | None) -> Sha | None:
    if until is None:
        return None
    sha = ctx.repo.resolve(until)
    if sha is None or ledger.index_of(sha) < 0:
        raise UserError(f"--until {until} is not an upstream commit after the fork point; pass a sha "
                        "from `forkflow status --commits`")
    return sha


def load_touches(ctx: Context, reader: TouchReader, shas: list[Sha],
                 progress: Progress | None = None) -> dict[Sha, Touch]:
    with ctx.store.session_scope() as s:
        known = records.cached_touches(s, shas)
    missing = [sha for sha in shas if sha not in known]
    fresh: dict[Sha, Touch] = {}
    for i, sha in enumerate(missing):
        fresh[sha] = reader.touch(sha)
        if progress is not None and i % 50 == 0:
            progress("reading changes", i, len(missing))
    if fresh:
        with ctx.store.session_scope() as s:
            records.save_touches(s, fresh)
    known.update(fresh)
    return known


def fork_footprint(ctx: Context, reader: TouchReader, ledger: Ledger) -> Touch:
    """Files and symbols of the fork's own patches: fork commits that pick nothing from upstream."""
    picks = {f for e in ledger.entries for f in e.fork_shas}
    own = [c.sha for c in ctx.repo.log(ledger.fork_tip, f"^{ledger.upstream_tip.sha}")
           if not c.is_merge and c.sha not in picks and not ev.trailers(c.message)]
    touch = EMPTY_TOUCH
    for t in load_touches(ctx, reader, own).values():
        touch = touch.union(t)
    return touch


def _pending_commits(picker: MemoryPicker, entries: list[LedgerEntry], ledger: Ledger,
                     touches: dict[Sha, Touch]) -> list[PendingCommit]:
    index = ShaIndex(e.commit.sha for e in ledger.entries)
    out = []
    for e in entries:
        raw, _ = picker.raw_message(e.commit.sha)
        target = ev.revert_target(raw.decode("utf-8", "replace"))
        reverts = index.resolve(target) if target else None
        chain = None
        if e.disposition is Disposition.DEFERRED:
            m = DEFERRED_CHAIN.match(e.reason)
            chain = m.group(1) if m else None
        out.append(PendingCommit(e.commit.sha, e.commit.subject, touches.get(e.commit.sha, EMPTY_TOUCH),
                                 e.pr, reverts, chain))
    return out


def probe(picker: MemoryPicker, tip: Sha, units: tuple[Unit, ...]) -> dict[Sha, str]:
    """Pick every bundle in memory, one after another on the fork tip; what conflicts, and where.

    Clean picks only accumulate path changes (nothing is written); a pick that needs a real
    merge writes the accumulated tree once and merges against it."""
    base = picker.repo.get(picker.commit_tree(tip))
    overlay: dict[str, tuple[str, int] | None] = {}
    conflicting: dict[Sha, str] = {}
    for u in units:
        if u.kind is not UnitKind.BUNDLE:
            continue
        for sha in u.commits:
            if picker.overlay_step(base, overlay, sha) is not None:  # type: ignore[arg-type]
                continue
            tree = picker.write_overlay(base, overlay)  # type: ignore[arg-type]
            step = picker.pick(tree, sha)
            if step.status is PickStatus.CONFLICT:
                paths = sorted(c.path for c in step.conflicts)
                conflicting[sha] = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
                tree_after = tree
            else:
                tree_after = step.tree
            base, overlay = picker.repo.get(tree_after), {}
    return conflicting


def make_plan(ctx: Context, ledger: Ledger, settings: IngestSettings, *, until: Sha | None = None,
              max_bundle: int | None = None, progress: Progress | None = None,
              picker: MemoryPicker | None = None) -> Plan:
    """Route pending commits into chains and bundles; probe bundles so that conflicts leave them."""
    picker = picker or MemoryPicker(ctx.repo.path, batch_writes=True)  # probe trees stay in memory
    reader = TouchReader(ctx.repo.path)
    entries = pending_entries(ledger, until)
    touches = load_touches(ctx, reader, [e.commit.sha for e in entries], progress)
    footprint = fork_footprint(ctx, reader, ledger)
    rules = RoutingRules(settings.chains, footprint, settings.pin_files,
                         max_bundle if max_bundle is not None else settings.max_bundle)
    commits = _pending_commits(picker, entries, ledger, touches)
    conflicting: dict[Sha, str] = {}
    units = route(commits, rules, conflicting)
    for _ in range(MAX_PROBE_PASSES):
        if progress is not None:
            progress("probing bundles", 0, sum(len(u.commits) for u in units if u.kind is UnitKind.BUNDLE))
        found = probe(picker, ledger.fork_tip, units)
        if not found:
            break
        conflicting.update(found)
        units = route(commits, rules, conflicting)
    return Plan(units, ledger.fork_tip)
