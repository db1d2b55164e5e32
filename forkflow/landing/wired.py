"""The landing loop wired over a `Context`: the store behind the `Ingestor`'s journal and reader,
the gate `[ingest]` chooses, and a whole run under the fork lock (issues 11 and 17).

`landing/ingest.py` sees a repository, a picker, a gate, a journal, a reader and its settings;
this module, `forkflow.wiring` and the commands are where a `Context` is opened and taken apart.
"""
from __future__ import annotations

from forkflow.config import STATE_DIR
from forkflow.conflicts import records as crecords
from forkflow.conflicts.resolvers.agent import Attempt
from forkflow.context import Context
from forkflow.errors import UserError
from forkflow.git.pick import MemoryPicker
from forkflow.landing import records
from forkflow.landing.gate import CommandGate, Gate
from forkflow.landing.ingest import IngestOptions, IngestReport, Ingestor, Mode, Reporter, check_push_remote
from forkflow.landing.journal import Journal, StoreJournal
from forkflow.landing.lock import fork_lock
from forkflow.landing.plan import make_plan, resolve_until
from forkflow.landing.review import Reviewer, make_sink, review_settings, with_reviews
from forkflow.landing.settings import IngestSettings, ingest_settings
from forkflow.landing.worktree import refuse_dirty_work_trees
from forkflow.ledger.build import build_ledger
from forkflow.models import Ledger, Sha
from forkflow.planning.model import Plan


class StoreIngestReader:
    """The `IngestReader` over forkflow's store, for one fork."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def ledger(self, fork_tip: Sha, upstream_tip: Sha) -> Ledger:
        return build_ledger(self.ctx, fork_tip=fork_tip, upstream_tip=upstream_tip)

    def plan(self, ledger: Ledger, settings: IngestSettings, until: str | None, max_bundle: int | None,
             picker: MemoryPicker, probe_first: bool = True) -> Plan:
        return make_plan(self.ctx, ledger, settings, until=resolve_until(self.ctx, ledger, until),
                         max_bundle=max_bundle, picker=picker, probe_first=probe_first)

    def unfinished_units(self) -> list[records.UnitRecord]:
        with self.ctx.store.session_scope() as s:
            records.interrupt_running(s, self.ctx.fork_id)
            return list(records.units(s, self.ctx.fork_id, records.OPEN_STATUSES))

    def close_conflicts_of(self, settled: set[Sha]) -> None:
        with self.ctx.store.session_scope() as s:
            open_ = {c.upstream_sha for c in crecords.conflicts(s, self.ctx.fork_id, "open")}
            crecords.close_conflicts(s, self.ctx.fork_id, sorted(open_ & settled))

    def lookup_resolution(self, key: str) -> tuple[list[str], str] | None:
        with self.ctx.store.session_scope() as s:
            return crecords.lookup_resolution(s, key)

    def log_attempt(self, attempt: Attempt) -> None:
        with self.ctx.store.session_scope() as s:
            crecords.add_attempt(s, self.ctx.fork_id, attempt)


def ingestor(ctx: Context, options: IngestOptions, gate: Gate | None, reporter: Reporter | None = None,
             settings: IngestSettings | None = None, journal: Journal | None = None) -> Ingestor:
    """An `Ingestor` over the fork's store, with `[ingest]` of its config."""
    return Ingestor(ctx.repo, MemoryPicker(ctx.repo.path, batch_writes=True), gate,
                    journal or StoreJournal(ctx.store, ctx.fork_id), reporter, config=ctx.config,
                    settings=settings or ingest_settings(ctx.config), options=options,
                    reader=StoreIngestReader(ctx))


def select_gate(ctx: Context, settings: IngestSettings) -> Gate:
    """The L1 tier when `[[suite]]` declares L1 suites, else `[ingest] l1_command`."""
    if settings.has_l1_suites:
        # the validation machinery: only when it gates (forkflow.wiring.tier_gate, which landing cannot import)
        from forkflow.tiers.journal import StoreRunJournal
        from forkflow.tiers.validate import Validator
        from forkflow.triage.gate import TierGate, untested_paths
        from forkflow.triage.journal import StoreTriageJournal
        from forkflow.triage.triage import Triager, load_settings, tiers_rerunner

        v = Validator.configured(ctx.repo, ctx.config, StoreRunJournal(ctx.store, ctx.fork_id))
        return TierGate(v, Triager(ctx.repo, v.suites, StoreTriageJournal(ctx.store, ctx.fork_id),
                                   load_settings(ctx.config), tiers_rerunner(v)), untested_paths(ctx.config))
    if settings.l1_command:
        return CommandGate(ctx.repo, settings.l1_command, settings.l1_timeout,
                           log_dir=ctx.config.root / STATE_DIR / "logs")
    raise UserError("no L1 gate: set [ingest] l1_command = \"your test command\" in forkflow.toml (or declare "
                    "[[suite]] entries with tier = \"L1\"); `l1_command = \"true\"` lands without tests")


def ingest(ctx: Context, options: IngestOptions, reporter: Reporter | None = None,
           gate: Gate | None = None) -> IngestReport:
    """Run the ingest steps; the gate defaults to the configured L1 (not needed for a dry run)."""
    settings = ingest_settings(ctx.config)
    if options.push:
        check_push_remote(ctx.repo, settings)
    if options.mode is Mode.DRY_RUN:
        return ingestor(ctx, options, gate, reporter, settings).run()
    with fork_lock(ctx):  # one writing run per repository and per fork in the store
        if options.mode is Mode.LAND:
            refuse_dirty_work_trees(ctx.repo, ctx.config)
        if gate is None:
            gate = select_gate(ctx, settings)
        try:
            ing = ingestor(ctx, options, gate, reporter, settings)
            review = review_settings(ctx.config) if options.mode is Mode.LAND else None
            if review is None:
                return ing.run()
            reviewer = Reviewer(ctx, review, make_sink(review))
            ing.reviewer = reviewer
            return with_reviews(reviewer.settle(), ing.run)
        finally:
            close = getattr(gate, "close", None)
            if close is not None:
                close()
