"""L3 manual tests: request a heavy suite on a rev, run it, and have an owner sign off.

    request_id = request(v, "fsdp-training", "HEAD", by="alice")
    outcome = run_request(v, request_id)          # a validation run linked to the request
    who = forge_identity("github", "https://api.github.com", token)   # who holds the token
    signoff(v, request_id, who, verdict=SignOff.ACCEPT, note="loss ok")

A sign-off is bound to an identity forkflow checked, never a name typed: the account of a forge
token (`[l3] identity = "github"` or `"gitlab"`, CLI) or the owner of the dashboard's token
(dashboard).  Only an owner listed in the suite's `owners` may sign off, and only once the
request has a finished run; the newest sign-off is the request's verdict (ACCEPTED / REJECTED).
"""
from __future__ import annotations

import enum
import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from forkflow.config import Config, config_error
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


@dataclass(frozen=True, slots=True)
class Identity:
    """Who signs off, as forkflow checked it, and how (for the record and the message)."""

    name: str
    how: str


_FORGES = {"github": ("https://api.github.com", "GITHUB_TOKEN", "login"),
           "gitlab": ("https://gitlab.com/api/v4", "GITLAB_TOKEN", "username")}


def forge_identity(kind: str, api: str, token: str, timeout: float = 15.0) -> Identity:
    """The account a forge token belongs to (GitHub's `GET /user` login, GitLab's username)."""
    field = _FORGES[kind][2]
    header = {"Authorization": f"Bearer {token}"} if kind == "github" else {"PRIVATE-TOKEN": token}
    req = urllib.request.Request(api.rstrip("/") + "/user", headers={**header, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 (an https/http API URL)
            doc: Any = json.loads(r.read(1 << 20) or b"{}")
    except urllib.error.HTTPError as e:
        raise UserError(f"{kind} refused the token ({e.code}) asking who it belongs to; sign-offs need a "
                        "valid token of the person signing off") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise UserError(f"could not ask {kind} whose token this is ({type(e).__name__}); retry when "
                        f"{api} answers") from None
    name = doc.get(field) if isinstance(doc, dict) else None
    if not isinstance(name, str) or not name:
        raise UserError(f"{kind} answered /user without a {field}; sign-offs need a person's token")
    return Identity(name, f"{kind} account of the token")


def cli_identity(config: Config, env: Mapping[str, str] | None = None) -> Identity:
    """The identity a CLI sign-off is bound to: `[l3] identity` names the forge whose token (in
    `[l3] token_env`, default $GITHUB_TOKEN / $GITLAB_TOKEN) says who is signing off."""
    env = os.environ if env is None else env
    raw = config.section("l3")
    kind = raw.get("identity")
    if kind is None:
        raise UserError("l3 signoff needs an identity forkflow can check, not a typed name: set [l3] "
                        "identity = \"github\" (or \"gitlab\") so the account of your token signs off, or "
                        "sign off on the dashboard with its token")
    if kind not in _FORGES:
        raise config_error(config.path, config.text, "l3.identity", f"must be \"github\" or \"gitlab\", not {kind!r}")
    api_default, env_default, _ = _FORGES[str(kind)]
    token_env = str(raw.get("token_env", env_default))
    token = env.get(token_env, "")
    if not token:
        raise UserError(f"[l3] identity = \"{kind}\" reads your token from ${token_env}; export it and retry")
    return forge_identity(str(kind), str(raw.get("api", api_default)), token)


def signoff(v: Validator, request_id: int, who: Identity, verdict: SignOff, note: str = "") -> int:
    """Record `who`'s verdict on the request's newest finished run; returns the sign-off id.
    `who` is an identity the caller checked (`cli_identity`, the dashboard token's owner)."""
    req = _get(v, request_id)
    suite = _l3_suite(v, req.suite)
    owner = who.name
    if owner not in suite.owners:
        raise UserError(f"'{owner}' ({who.how}) is not an owner of suite '{suite.name}' (owners: "
                        f"{', '.join(suite.owners)}); ask one of them to sign off")
    finished = [r for r in req.runs if r.status != RunStatus.RUNNING]
    if not finished:
        raise UserError(f"L3 request {request_id} has no finished run to sign off; run: "
                        f"forkflow l3 run {request_id}")
    return v.journal.signed_off(request_id, finished[0].id, owner, verdict.value, note)


def list_requests(v: Validator, limit: int = 100) -> list[q.L3RequestInfo]:
    return v.journal.l3_requests(limit)
