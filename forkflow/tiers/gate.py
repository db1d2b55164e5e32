"""`TierGate`: the L1 tier as the landing gate (`forkflow.landing.gate.Gate`).

    gate = TierGate(ctx)                  # runner from [validation] runner, or runner="ray"
    result = gate.check(rev, base)        # GateResult(passed, summary, run_id, infra)

It validates L1 at `rev` with `--changed-from base` selection (tests chosen by what the unit
changed).  `passed` only when every selected suite ran whole and passed; `infra` when the
runner failed rather than the code, so the caller can retry instead of blaming the unit.
Bad configuration (a suite command that does not exist...) raises UserError as usual.
"""
from __future__ import annotations

from forkflow.context import Context
from forkflow.landing.gate import GateResult
from forkflow.models import Sha
from forkflow.tiers import queries as q
from forkflow.tiers.tiers import Tier
from forkflow.tiers.validate import Reporter, ValidateRequest, validate


class TierGate:
    def __init__(self, ctx: Context, runner: str | None = None, reporter: Reporter | None = None) -> None:
        self.ctx = ctx
        self.runner = runner
        self.reporter = reporter

    def check(self, rev: Sha, base: Sha) -> GateResult:
        out = validate(self.ctx, ValidateRequest(Tier.L1, rev, changed_from=base, runner=self.runner,
                                                 trigger="gate"), self.reporter)
        return GateResult(passed=out.status == q.PASS, summary=f"L1 {out.status}: {out.summary}",
                          run_id=out.run_id, infra=out.status == q.INFRA)
