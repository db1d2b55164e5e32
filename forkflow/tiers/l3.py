"""L3 manual tests: request a heavy suite on a rev, run it, and have a named owner sign off.

    request_id = request(v, "fsdp-training", "HEAD", by="alice")
    outcome = run_request(v, request_id)          # a validation run linked to the request
    signoff(v, request_id, owner="compiler-oncall", verdict=SignOff.ACCEPT, note="loss ok")

Only an owner listed in the suite's `owners` may sign off, and only once the request has a
finished run; the newest sign-off is the request's verdict (ACCEPTED / REJECTED).
"""
from __future__ import annotations

import enum

from forkflow.errors import UserError
from forkflow.tiers import records as q
from forkflow.tiers.tiers import RunStatus, Suite, Tier
from forkflow.tiers.validate import Reporter, ValidateRequest, ValidationOutcome, Validator, validate


class SignOff(str, enum.Enum):
    ACCEPT = "accept"
    REJECT = "reject"


def _l3_suite(v: Validator, name: str) -> Suite:
    suites = {s.name: s for s in v.suites}
    suite = suites.get(name)
    if suite is None:
        l3 = ", ".join(sorted(n for n, s in suites.items() if s.tier is Tier.L3)) or "none"
        raise UserError(f"no suite named '{name}' in forkflow.toml (L3 suites: {l3})")
    if suite.tier is not Tier.L3:
        raise UserError(f"suite '{name}' is {suite.tier.value}, not L3; run it with "
                        f"`forkflow validate --tier {suite.tier.value} --suite {name}`")
    return suite


def request(v: Validator, suite: str, rev: str, by: str = "", note: str = "") -> int:
    """Record a request to run L3 suite `suite` at `rev`; returns its id."""
    _l3_suite(v, suite)
    sha = v.repo.resolve(rev)
    if sha is None:
        raise UserError(f"--rev {rev!r} is not a commit; pass a branch, tag or sha")
    return v.journal.l3_request_added(suite, sha, by, note)


def _get(v: Validator, request_id: int) -> q.L3RequestInfo:
    req = v.journal.l3_request(request_id)
    if req is None:
        raise UserError(f"no L3 request {request_id}; list them with `forkflow l3 list`")
    return req


def run_request(v: Validator, request_id: int, runner: str | None = None,
                ray_address: str | None = None, reporter: Reporter | None = None) -> ValidationOutcome:
    """Run the requested suite at the requested rev, linked to the request."""
    req = _get(v, request_id)
    _l3_suite(v, req.suite)
    return validate(v, ValidateRequest(Tier.L3, req.rev, suites=(req.suite,), runner=runner,
                                         ray_address=ray_address, trigger="l3",
                                         l3_request_id=request_id), reporter)


def signoff(v: Validator, request_id: int, owner: str, verdict: SignOff, note: str = "") -> int:
    """Record an owner's verdict on the request's newest finished run; returns the sign-off id."""
    req = _get(v, request_id)
    suite = _l3_suite(v, req.suite)
    if owner not in suite.owners:
        raise UserError(f"'{owner}' is not an owner of suite '{suite.name}' (owners: "
                        f"{', '.join(suite.owners)}); ask one of them to sign off")
    finished = [r for r in req.runs if r.status != RunStatus.RUNNING]
    if not finished:
        raise UserError(f"L3 request {request_id} has no finished run to sign off; run: "
                        f"forkflow l3 run {request_id}")
    return v.journal.signed_off(request_id, finished[0].id, owner, verdict.value, note)


def list_requests(v: Validator, limit: int = 100) -> list[q.L3RequestInfo]:
    return v.journal.l3_requests(limit)
