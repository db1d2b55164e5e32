"""`forkflow plan`: pending upstream commits -> dependencies and fork overlap -> chains and bundles
-> in-memory probe -> what is held back, and why."""
from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from forkflow.errors import UserError
from forkflow.landing import records
from forkflow.git.pick import MemoryPicker, PickStatus
from forkflow.git.reads import quick_reads
from forkflow.git.repo import Repo
from forkflow.landing.settings import IngestSettings
from forkflow.git.run import run_git_bytes
from forkflow.landing.shapes import ShapeReader, parse_diff_tree, read_shapes
from forkflow.landing.touches import TouchReader
from forkflow.ledger import evidence as ev
from forkflow.ledger.classify import ShaIndex
from forkflow.models import IN_REVIEW_CHAIN, Disposition, EvidenceKind, Ledger, LedgerEntry, Sha
from forkflow.planning.lines import CommitShape, Dependency, FileChange, Trace, trace
from forkflow.planning.model import HeldBack, PendingCommit, Plan, Touch, Unit, UnitKind
from forkflow.planning.route import RoutingRules, route
from forkflow.store.session import Store

Progress = Callable[[str, int, int], None]  # (what, done, total)


def pending_entries(ledger: Ledger, until: Sha | None = None) -> list[LedgerEntry]:
    """PENDING and DEFERRED upstream commits in upstream order, up to `until` when given."""
    entries = list(ledger.entries)
    if until is not None:
        cut = ledger.index_of(until)
        entries = entries[: cut + 1]
    return [e for e in entries if e.disposition in (Disposition.PENDING, Disposition.DEFERRED)
            and not (e.evidence and e.evidence[0].kind is EvidenceKind.DECIDED)  # a person's deferral
            and e.chain != IN_REVIEW_CHAIN]  # proposed for review (landing/review.py)


def resolve_until(repo: Repo, ledger: Ledger, until: str | None) -> Sha | None:
    if until is None:
        return None
    sha = repo.resolve(until)
    if sha is None or ledger.index_of(sha) < 0:
        raise UserError(f"--until {until} is not an upstream commit after the fork point; pass a sha "
                        "from `forkflow status --commits`")
    return sha


def load_touches(store: Store, reader: TouchReader, shas: list[Sha],
                 progress: Progress | None = None) -> dict[Sha, Touch]:
    with store.session_scope() as s:
        known = records.cached_touches(s, shas)
    missing = [sha for sha in shas if sha not in known]
    fresh: dict[Sha, Touch] = {}
    for i, sha in enumerate(missing):
        fresh[sha] = reader.touch(sha)
        if progress is not None and i % 50 == 0:
            progress("reading symbols", i, len(missing))
    if fresh:
        with store.session_scope() as s:
            records.save_touches(s, fresh)
    known.update(fresh)
    return known


def load_shapes(repo: Repo, store: Store, shas: list[Sha], progress: Progress | None = None) -> dict[Sha, CommitShape]:
    """Each commit's hunks and names: from the store's cache, else read by one `git diff-tree`."""
    with store.session_scope() as s:
        known = records.cached_shapes(s, shas)
    todo = [sha for sha in shas if sha not in known]
    if todo:
        if progress is not None:
            progress("reading changes", 0, len(todo))
        fresh = read_shapes(repo.path, todo)
        with store.session_scope() as s:
            records.save_shapes(s, list(fresh.values()))
        known.update(fresh)
    return known


def fork_changes(path: Path, fork_point: Sha, fork_tip: Sha) -> tuple[FileChange, ...]:
    """The fork's diff against the merge base: the lines that are its own (issue 11: risk is line-level).

    Read by `git diff-tree` (a third of the CPU of an in-process diff); the paths whose blobs this
    clone lacks are left out of it and count as changed as a whole."""
    reader = ShapeReader(path)
    rc, raw, _ = run_git_bytes("diff-tree", "-r", "-z", "--no-renames", fork_point, fork_tip, cwd=path, check=False)
    if rc != 0:
        return reader.changes_between(fork_point, fork_tip)
    fields = raw.split(b"\0")
    absent: list[str] = []
    for meta, name in zip(fields[0::2], fields[1::2]):
        parts = meta.split()
        if len(parts) >= 4 and any(not reader.has(oid.decode()) for oid in parts[2:4]):
            absent.append(name.decode("utf-8", "surrogateescape"))
    excludes = [f":(exclude,literal){p}" for p in absent]
    rc, raw, _ = run_git_bytes("-c", "core.quotePath=false", "diff-tree", "-p", "-U0", "--no-renames", "--no-color",
                               "--no-ext-diff", "--no-textconv", fork_point, fork_tip, "--", ".", *excludes,
                               cwd=path, check=False)
    if rc != 0:
        return reader.changes_between(fork_point, fork_tip)
    shape = parse_diff_tree(fork_tip.encode() + b"\n" + raw, frozenset({fork_tip}), names=False)[fork_tip]
    return shape.files + tuple(FileChange(p, None) for p in absent)


def _revert_targets(picker: MemoryPicker, ledger: Ledger, entries: list[LedgerEntry]) -> dict[Sha, Sha]:
    index = ShaIndex(e.commit.sha for e in ledger.entries)
    out: dict[Sha, Sha] = {}
    for e in entries:
        raw, _ = picker.raw_message(e.commit.sha)
        target = ev.revert_target(raw.decode("utf-8", "replace"))
        hit = index.resolve(target) if target else None
        if hit is not None:
            out[e.commit.sha] = hit
    return out


def pending_commits(entries: list[LedgerEntry], shapes: dict[Sha, CommitShape], found: Trace,
                    reverts: dict[Sha, Sha], touches: dict[Sha, Touch] | None = None) -> list[PendingCommit]:
    """The planner's view of each pending commit: what it touches, what it depends on, where it meets the fork."""
    out = []
    for e in entries:
        sha = e.commit.sha
        chain = (e.chain or None) if e.disposition is Disposition.DEFERRED else None
        touch = (touches or {}).get(sha) or Touch(frozenset(f.path for f in shapes[sha].files))
        out.append(PendingCommit(sha, e.commit.subject, touch, e.pr, reverts.get(sha), chain,
                                 found.dependencies.get(sha, ()), found.fork_overlap.get(sha)))
    return out


def probe(picker: MemoryPicker, tip: Sha, units: tuple[Unit, ...], deps: dict[Sha, tuple[Dependency, ...]]
          ) -> tuple[dict[Sha, str], dict[Sha, str], dict[Sha, Dependency]]:
    """Pick every bundled commit in memory, in plan order on the fork tip: (what conflicts and where,
    what needs a blob this clone lacks, what waits for one of those or for a chain, and why).

    Clean picks only accumulate path changes (nothing is written); a pick that needs a real
    merge writes the accumulated tree once and merges against it."""
    base = picker.tree(picker.commit_tree(tip))
    overlay: dict[str, tuple[str, int] | None] = {}
    conflicting: dict[Sha, str] = {}
    missing: dict[Sha, str] = {}
    waiting: dict[Sha, Dependency] = {}
    blocked: set[Sha] = set()
    for u in units:
        if u.kind is not UnitKind.BUNDLE:
            blocked.update(u.commits)
            continue
        for sha in u.commits:
            blocking = [d for d in deps.get(sha, ()) if d.on in blocked]
            if blocking:  # rare: write the tree so far, and ask what waits
                tree = picker.write_overlay(base, overlay)
                base, overlay = picker.tree(tree), {}
                hard = picker.waits_for(blocking, tree, sha)
                if hard is not None:
                    waiting[sha] = hard
                    blocked.add(sha)
                    continue
            elif picker.overlay_step(base, overlay, sha) is not None:
                continue
            tree = picker.write_overlay(base, overlay)
            step = picker.pick(tree, sha)
            tree_after = tree
            if step.status in (PickStatus.CONFLICT, PickStatus.MISSING, PickStatus.REFUSED) and blocking:
                waiting[sha] = blocking[0]
                blocked.add(sha)
            elif step.status is PickStatus.CONFLICT:
                paths = sorted(c.path for c in step.conflicts)
                conflicting[sha] = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
                blocked.add(sha)
            elif step.status in (PickStatus.MISSING, PickStatus.REFUSED):
                missing[sha] = step.missing
                blocked.add(sha)
            else:
                tree_after = step.tree
            base, overlay = picker.tree(tree_after), {}
    return conflicting, missing, waiting


def held_back(commits: list[PendingCommit], conflicting: dict[Sha, str], missing: dict[Sha, str],
              waiting: dict[Sha, Dependency]) -> tuple[HeldBack, ...]:
    """Commits that conflict or lack a blob, and those that wait for one of them (transitively)."""
    out = []
    for c in commits:
        if c.sha in conflicting:
            out.append(HeldBack(c.sha, f"conflict in {conflicting[c.sha]}"))
        elif c.sha in missing:
            out.append(HeldBack(c.sha, missing[c.sha]))
        elif c.sha in waiting:
            d = waiting[c.sha]
            out.append(HeldBack(c.sha, f"waits for {d.describe()}", d.on, d))
    return tuple(out)


def plan_commits(picker: MemoryPicker, tip: Sha, commits: list[PendingCommit], rules: RoutingRules,
                 progress: Progress | None = None, probe_first: bool = True) -> Plan:
    """Route, probe in memory on `tip`, route again with what conflicted: the plan.  No store, no work tree.

    Without `probe_first` the plan is the first routing alone: `ingest` picks every unit as it lands
    it, holding back there what conflicts and what depends on it, so a probe ahead of it picked
    every bundled commit twice (a fifth of a run's CPU on a real fork, issue 11)."""
    deps = {c.sha: c.deps for c in commits if c.deps}
    units = route(commits, rules)
    if not probe_first:
        return Plan(units, tip, deps, ())
    if progress is not None:
        progress("probing bundles", 0, sum(len(u.commits) for u in units if u.kind is UnitKind.BUNDLE))
    conflicting, missing, waiting = probe(picker, tip, units, deps)
    if conflicting or missing or waiting:
        units = route(commits, rules, conflicting, missing, waiting)
    return Plan(units, tip, deps, held_back(commits, conflicting, missing, waiting))


def make_plan(repo: Repo, store: Store, ledger: Ledger, settings: IngestSettings, *, until: Sha | None = None,
              max_bundle: int | None = None, progress: Progress | None = None,
              picker: MemoryPicker | None = None, probe_first: bool = True) -> Plan:
    """Find the dependencies of pending commits, route them into chains and bundles, probe bundles
    so that conflicts (and what depends on them) leave them (see `plan_commits`)."""
    with quick_reads(), ThreadPoolExecutor(1) as pool:  # quick reads: the probe merges the same files often
        # the fork's own diff is git's work: it runs while the commits' shapes are read and parsed
        fork = pool.submit(fork_changes, repo.path, ledger.fork_point, ledger.fork_tip)
        picker = picker or MemoryPicker(repo.path, batch_writes=True)  # probe trees stay in memory
        picker.know_fork_point(ledger.fork_point)
        entries = pending_entries(ledger, until)
        walk = [e.commit.sha for e in ledger.entries]
        shapes = load_shapes(repo, store, walk, progress)
        picker.know_paths({e.commit.sha: [f.path for f in shapes[e.commit.sha].files] for e in entries})
        reverts = _revert_targets(picker, ledger, entries)
        found = trace([shapes[sha] for sha in walk], [e.commit.sha for e in entries], fork.result(), reverts)
        touches = None
        if any(spec.symbols for spec in settings.chains):  # symbols of whole files: only when a chain names some
            touches = load_touches(store, TouchReader(repo.path), [e.commit.sha for e in entries], progress)
        commits = pending_commits(entries, shapes, found, reverts, touches)
        rules = RoutingRules(settings.chains, settings.pin_files,
                             max_bundle if max_bundle is not None else settings.max_bundle)
        return plan_commits(picker, ledger.fork_tip, commits, rules, progress, probe_first)
