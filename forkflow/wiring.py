"""The collaborators of the core stages, wired over a `Context` (issue 17).

Only the edges (cli/, web/, the demo) open a `Context`; they build the stages' collaborators here,
so validation, triage, regression detection and the landing loop see a repository, their settings
and a small journal (and reader) over the store, never the store itself.  Imports are lazy: a command pays only for the
stage it runs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from forkflow.context import Context

if TYPE_CHECKING:
    from forkflow.models import Ledger, Sha
    from forkflow.landing.gate import Gate
    from forkflow.landing.ingest import IngestOptions, Ingestor, Reporter as IngestReporter
    from forkflow.landing.journal import Journal
    from forkflow.regress.service import MetricJournal
    from forkflow.tiers.validate import Reporter, Validator
    from forkflow.triage.gate import TierGate
    from forkflow.triage.triage import Triager


def validator(ctx: Context) -> Validator:
    """Validation over the fork's store, with the suites and `[validation]` of its config."""
    from forkflow.tiers.journal import StoreRunJournal
    from forkflow.tiers.validate import Validator

    return Validator.configured(ctx.repo, ctx.config, StoreRunJournal(ctx.store, ctx.fork_id))


def triager(ctx: Context, v: Validator | None = None) -> Triager:
    """Triage over the fork's store, with `[triage]`; failed tests rerun through validation."""
    from forkflow.triage.journal import StoreTriageJournal
    from forkflow.triage.triage import Triager, load_settings, tiers_rerunner

    v = v or validator(ctx)
    return Triager(ctx.repo, v.suites, StoreTriageJournal(ctx.store, ctx.fork_id), load_settings(ctx.config),
                   tiers_rerunner(v), ctx.config.fork_branch)


def ledger(ctx: Context, *, fork_tip: Sha | None = None, upstream_tip: Sha | None = None) -> Ledger:
    """The fork's ledger now (or between the given tips), over its repository, config and store."""
    from forkflow.ledger.build import build_ledger

    return build_ledger(ctx.repo, ctx.config, ctx.store, ctx.fork_id, fork_tip=fork_tip, upstream_tip=upstream_tip)


def metric_journal(ctx: Context) -> MetricJournal:
    """Regression detection's reads and writes over the fork's store."""
    from forkflow.regress.service import StoreMetricJournal

    return StoreMetricJournal(ctx.store, ctx.fork_id)


def tier_gate(ctx: Context, runner: str | None = None, reporter: Reporter | None = None) -> TierGate:
    """The L1 tier as the landing gate, over the fork's store, with `[ingest] untested_paths`."""
    from forkflow.triage.gate import TierGate, untested_paths

    v = validator(ctx)
    return TierGate(v, triager(ctx, v), untested_paths(ctx.config), runner, reporter)


def ingestor(ctx: Context, options: IngestOptions, gate: Gate | None, reporter: IngestReporter | None = None,
             journal: Journal | None = None) -> Ingestor:
    """The landing loop over the fork's store, with `[ingest]` (`forkflow.landing.wired`)."""
    from forkflow.landing.wired import ingestor as wired

    return wired(ctx, options, gate, reporter, journal=journal)
