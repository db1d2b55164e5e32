"""The landing loop wired over a `Context`: the store behind the `Ingestor`'s journal and reader
(`landing/stored.py`), the gate `[ingest]` chooses, and a whole run under the fork lock (issues 11
and 17).

`landing/ingest.py` sees a repository, a picker, a gate, a journal, a reader and its settings;
this module, `forkflow.wiring` and the commands are where a `Context` is opened and taken apart.
"""
from __future__ import annotations

from forkflow.context import Context
from forkflow.errors import UserError
from forkflow.landing.gate import CommandGate, Gate
from forkflow.landing.ingest import IngestOptions, IngestReport, Ingestor, Mode, Reporter, check_push_remote
from forkflow.landing.journal import Journal
from forkflow.landing.lock import fork_lock
from forkflow.landing.shared import MAX_PUSH_TRIES, Shared, SharedMoved
from forkflow.landing.retry import load_target, plan_retry, rerun_unit
from forkflow.landing.review import Reviewer, ReviewSettings, make_sink, review_settings, with_reviews
from forkflow.landing.settings import IngestSettings, ingest_settings
from forkflow.landing.stored import store_ingestor
from forkflow.landing.worktree import refuse_dirty_work_trees
from forkflow.ledger.build import build_ledger
from forkflow.state import state_dir
from forkflow.store.locks import Lease


def ingestor(ctx: Context, options: IngestOptions, gate: Gate | None, reporter: Reporter | None = None,
             settings: IngestSettings | None = None, journal: Journal | None = None) -> Ingestor:
    """An `Ingestor` over the fork's store, with `[ingest]` of its config."""
    return store_ingestor(ctx.repo, ctx.config, ctx.store, ctx.fork_id, options, gate, reporter, settings, journal)


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
                           log_dir=state_dir(ctx.repo) / "logs")
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
    # one writing run per repository and per fork in the store, proved at each landing and push
    with fork_lock(ctx.repo, ctx.store, ctx.fork_id) as lease:
        if options.mode is Mode.LAND:
            refuse_dirty_work_trees(ctx.repo, ctx.config)
        chosen = gate is None
        if gate is None:
            gate = select_gate(ctx, settings)
        try:
            for attempt in range(MAX_PUSH_TRIES):
                # the shared branch moved beside this run's unpushed landings: the next one drops
                # them and re-plans from it (landing/shared.py); a few times, never a loop
                try:
                    return _ingest_once(ctx, options, gate, chosen, reporter, settings, lease)
                except SharedMoved:
                    if attempt == MAX_PUSH_TRIES - 1:
                        raise
            raise AssertionError("unreachable")
        finally:
            _close(gate)


def shared_branch(ctx: Context, lease: Lease, push: bool, settings: IngestSettings) -> Shared:
    """The branch the team shares: the push remote's fork branch, or the local one without --push."""
    return Shared(ctx.repo, ctx.config, ctx.store, ctx.fork_id, lease, settings.push_remote if push else None)


def _ingest_once(ctx: Context, options: IngestOptions, gate: Gate, chosen: bool, reporter: Reporter | None,
                 settings: IngestSettings, lease: Lease) -> IngestReport:
    shared = shared_branch(ctx, lease, options.push and options.mode is Mode.LAND, settings)
    ing = ingestor(ctx, options, gate, reporter, settings, shared.journal())
    ing.shared = shared
    if chosen and isinstance(gate, CommandGate) and settings.runners > 1:
        ing.more_gates = lambda: select_gate(ctx, settings)  # each runner its own work tree
    review = review_settings(ctx.config) if options.mode is Mode.LAND else None
    if review is None:
        return ing.run()
    reviewer = reviewer_of(ctx, review)
    ing.reviewer = reviewer
    return with_reviews(reviewer.settle(), ing.run)


def reviewer_of(ctx: Context, settings: ReviewSettings) -> Reviewer:
    """The `Reviewer` of the fork's proposals, on the forge `[ingest]` names."""
    return Reviewer(ctx.repo, ctx.config, ctx.store, ctx.fork_id, settings, make_sink(settings))


def check_retry(ctx: Context, unit_id: int) -> None:
    """Raise the UserError saying why the unit cannot be re-run now, if there is one."""
    plan_retry(load_target(ctx.repo, ctx.store, ctx.fork_id, unit_id),
               build_ledger(ctx.repo, ctx.config, ctx.store, ctx.fork_id))


def retry_unit(ctx: Context, unit_id: int, *, push: bool = False, reporter: Reporter | None = None,
               gate: Gate | None = None) -> IngestReport:
    """Pick a stored unit again on the current fork tip, run L1, land it by compare-and-swap if it
    passes (`landing/retry.py`).

    Raises UserError for an unknown unit, one that landed, one with nothing left to pick, and a
    chain link whose chain has an earlier commit that has not landed.
    """
    settings = ingest_settings(ctx.config)
    if push:
        check_push_remote(ctx.repo, settings)
    with fork_lock(ctx.repo, ctx.store, ctx.fork_id, "ingest --unit") as lease:  # as `forkflow ingest`: one writing run per fork
        refuse_dirty_work_trees(ctx.repo, ctx.config)  # landing/worktree.py
        shared = shared_branch(ctx, lease, push, settings)
        ing = ingestor(ctx, IngestOptions(Mode.LAND, push=push), gate, reporter, settings, shared.journal())
        ing.shared = shared
        review = review_settings(ctx.config)
        if review is not None:  # [ingest] land = "review": a re-run unit is proposed too, never landed directly
            ing.reviewer = reviewer_of(ctx, review)
        made: list[Gate] = []  # a gate chosen here is closed here, as `ingest` closes its own

        def chosen_gate() -> Gate:
            if gate is not None:
                return gate
            made.append(select_gate(ctx, settings))
            return made[-1]
        try:
            return rerun_unit(ing, lambda: load_target(ctx.repo, ctx.store, ctx.fork_id, unit_id), chosen_gate)
        finally:
            for g in made:
                _close(g)


def _close(gate: Gate | None) -> None:
    close = getattr(gate, "close", None)
    if close is not None:
        close()
