"""`TierGate`: the L1 tier as the landing gate (`forkflow.landing.gate.Gate`).

    gate = TierGate(validator, triager, untested_paths(config))   # runner=None: [validation] runner
    result = gate.check(rev, base)        # GateResult(passed, summary, run_id, infra)

It validates L1 at `rev` with `--changed-from base` selection (tests chosen by what the unit
changed).  `passed` when every selected suite ran whole and passed, or when every failure is
triaged as not this unit's: already red on the base the same way (BROKEN_TRUNK), or classed
FLAKY or INFRA *and* passed when run again on the same candidate.  A red trunk must not block
units that did not cause it; a class read from a failure's text is evidence, never a verdict
(a real failure that prints "Address already in use" is still a failure), and a rerun where the
test was skipped or did not run is no pass.  To tell, the base is validated too when it has no
finished L1 run.  `infra` when the runner failed rather than the code, so the caller can retry
instead of blaming the unit.
Bad configuration (a suite command that does not exist...) raises UserError as usual.
It takes collaborators, not a `Context`: `forkflow.wiring.tier_gate(ctx)` builds one over the store.
"""
from __future__ import annotations

from collections.abc import Sequence

from forkflow.config import Config, config_error
from forkflow.models import GateResult, Sha
from forkflow.tiers.reports import TestOutcome
from forkflow.tiers.selection import matches
from forkflow.tiers.tiers import RunStatus, Tier
from forkflow.tiers.validate import Reporter, ValidateRequest, Validator, rerun_tests, validate
from forkflow.triage.models import Classification, Diagnosis
from forkflow.triage.triage import Triager, failures_of_run, triage_run

# classes that come from a guess (a failure's text, passes on earlier reruns): they let a unit
# land only once the very tests pass again on the very candidate
CONFIRM = (Classification.FLAKY, Classification.INFRA)


def untested_paths(config: Config) -> tuple[str, ...]:
    """`[ingest] untested_paths`: globs of files no test covers on purpose (docs, CI files...)."""
    value = config.section("ingest").get("untested_paths", [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise config_error(config.path, config.text, "ingest.untested_paths",
                           f"must be a list of path globs, not {value!r}")
    return tuple(value)


def ran_nothing_verdict(changed: list[str], untested: tuple[str, ...]) -> tuple[bool, str]:
    """A gate that selected no suite passes only when every changed file is declared test-free."""
    uncovered = [p for p in changed if not matches(p, untested)]
    if not uncovered:
        return True, "no suite selected; every changed file is in [ingest] untested_paths"
    more = f" and {len(uncovered) - 3} more" if len(uncovered) > 3 else ""
    return False, (f"ran nothing: no L1 suite's paths cover {', '.join(uncovered[:3])}{more}; add a suite "
                   "whose paths match, or list them in [ingest] untested_paths if no test can cover them")


class TierGate:
    """The L1 tier as landing's gate, over a validator and a triager (`forkflow.wiring.tier_gate`)."""

    def __init__(self, validator: Validator, triager: Triager, untested: tuple[str, ...] = (),
                 runner: str | None = None, reporter: Reporter | None = None) -> None:
        self.validator = validator
        self.triager = triager
        self.untested = untested
        self.runner = runner
        self.reporter = reporter

    def check(self, rev: Sha, base: Sha) -> GateResult:
        out = validate(self.validator, ValidateRequest(Tier.L1, rev, changed_from=base, runner=self.runner,
                                                 trigger="gate"), self.reporter)
        # the run id leads the summary: `forkflow triage RUN` and the dashboard find the gate run by it
        result = GateResult(passed=out.status == RunStatus.PASS,
                            summary=f"L1 run {out.run_id} {out.status}: {out.summary}",
                            run_id=out.run_id, infra=out.status == RunStatus.INFRA)
        if out.status == RunStatus.PASS and not out.suites:  # "0 suites ran" is no pass (issue 12)
            changed = [p for p in self.validator.repo.git("diff", "--name-only", "-z", base, rev).split("\0") if p]
            passed, why = ran_nothing_verdict(changed, self.untested)
            return GateResult(passed, f"L1 run {out.run_id}: {why}", out.run_id)
        if out.status != RunStatus.FAIL or out.run_id is None:
            return result
        return self._not_this_units_fault(result, out.run_id, base)

    def _not_this_units_fault(self, result: GateResult, run_id: int, base: Sha) -> GateResult:
        """Pass a failed unit when triage finds no NEW failure (see forkflow.triage)."""
        if not failures_of_run(self.triager.journal, run_id):
            return result  # a saturation finding without test failures: never waved through
        journal = self.validator.journal
        suites = tuple(sorted({j.suite for j in journal.jobs_of_run(run_id)}))
        has_base = any(r.status in (RunStatus.PASS, RunStatus.FAIL) for r in journal.runs_for_rev(base, Tier.L1))
        if not has_base:
            validate(self.validator, ValidateRequest(Tier.L1, base, suites=suites, runner=self.runner,
                                               trigger="gate-base"), self.reporter)
        verdicts = self.triager.journal.stored_verdicts(run_id)
        if verdicts is None:
            verdicts = list(triage_run(self.triager, run_id).verdicts)
        blocking = [v for v in verdicts if v.classification is Classification.NEW]
        if blocking:
            return GateResult(False, f"{result.summary}; NEW failures: {new_names(blocking)}", run_id)
        doubtful = [v for v in verdicts if v.classification in CONFIRM]
        confirmed = ""
        if doubtful:
            refused = self._confirm(result, run_id, doubtful)
            if isinstance(refused, GateResult):
                return refused
            confirmed = f" and passed again on rerun {refused}"
        return GateResult(True, f"L1 passed for this unit; failures not caused by it (red on "
                                f"trunk, or flaky or infra{confirmed}): {result.summary}", run_id)

    def _confirm(self, result: GateResult, run_id: int, doubtful: Sequence[Diagnosis]) -> GateResult | int:
        """Rerun the FLAKY and INFRA failures' tests on the same candidate: the rerun's id when each
        one passed, else the GateResult that blocks the unit (a skip or a test gone is no pass)."""
        tests = sorted({v.failure.test for v in doubtful})
        out = rerun_tests(self.validator, run_id, tests, runner=self.runner, reporter=self.reporter)
        if out.status == RunStatus.INFRA or out.run_id is None:
            return GateResult(False, f"{result.summary}; the rerun that must confirm {', '.join(tests[:5])} "
                                     f"could not run ({out.summary})", run_id, infra=True)
        got = {o.test_id: o.outcome for o in self.validator.journal.test_outcomes(out.run_id)}
        failed = [v for v in doubtful if not _passed_again(v.failure.test, got, out.status)]
        if not failed:
            return out.run_id
        named = "; ".join(f"{v.failure.test} ({v.classification.value}: {v.reason[:80]}) "
                          f"{_outcome_word(got.get(v.failure.test))}" for v in failed[:5])
        return GateResult(False, f"{result.summary}; not confirmed by rerun {out.run_id}: {named}", run_id)


def new_names(blocking: Sequence[Diagnosis], most: int = 5) -> str:
    """The NEW tests of a gate's summary, each once whatever the number of suites it failed in."""
    tests = list(dict.fromkeys(v.failure.test for v in blocking))
    return ", ".join(tests[:most]) + (f" and {len(tests) - most} more" if len(tests) > most else "")


def _passed_again(test: str, got: dict[str, TestOutcome], status: RunStatus) -> bool:
    """A rerun passed `test` only with a PASS outcome; a suite's synthetic failure (`[suite]`, its
    command or report failed) only when the suite's rerun passed as a whole."""
    if test.startswith("[") and test.endswith("]"):
        return status == RunStatus.PASS and test not in got
    return got.get(test) is TestOutcome.PASS


def _outcome_word(outcome: TestOutcome | None) -> str:
    if outcome is None:
        return "did not run again"
    return {TestOutcome.SKIP: "was skipped on the rerun"}.get(outcome, "failed again")
