"""`forkflow nightly`: the L2 tier on the fork tip, storing the metric series (cron-friendly).

Runs every L2 suite whole (no selection) at the tip of `[fork] branch`; the metrics each
suite reports become points of their series (see `forkflow.tiers.validate`).  A tip that
already has a finished nightly run is not measured again unless `force` is set (repeated
measurements of one commit are welcome, but cron should not pile them up by accident).
"""
from __future__ import annotations

from dataclasses import dataclass

from forkflow.errors import UserError
from forkflow.tiers import records as q
from forkflow.tiers.tiers import RunStatus, Tier
from forkflow.tiers.validate import Reporter, ValidateRequest, ValidationOutcome, Validator, validate


@dataclass(frozen=True, slots=True)
class NightlyResult:
    tip: str
    outcome: ValidationOutcome | None  # None: already measured, nothing ran
    previous_run_id: int | None = None

    @property
    def exit_code(self) -> int:
        return self.outcome.exit_code if self.outcome is not None else 0


def nightly(v: Validator, fork_branch: str, *, force: bool = False, runner: str | None = None,
            ray_address: str | None = None, reporter: Reporter | None = None) -> NightlyResult:
    """Run L2 at the tip of `fork_branch` unless that tip already has a finished nightly run."""
    tip = v.repo.resolve(f"refs/heads/{fork_branch}")
    if tip is None:
        raise UserError(f"fork branch '{fork_branch}' does not exist; fix [fork] branch "
                        "in forkflow.toml")
    if not force:
        done = [r for r in v.journal.runs_for_rev(tip, Tier.L2)
                if r.trigger == "nightly" and r.status in (RunStatus.PASS, RunStatus.FAIL)]
        if done:
            return NightlyResult(tip, None, done[0].id)
    req = ValidateRequest(Tier.L2, tip, trigger="nightly", runner=runner, ray_address=ray_address)
    return NightlyResult(tip, validate(v, req, reporter))
