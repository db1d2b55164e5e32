"""Review before landing (`[ingest] land = "review"`): propose each unit, land it once approved.

A unit that passes L1 is pushed as a branch and proposed as a pull request (GitHub) or merge
request (GitLab) with its reasons, dependencies, L1 result and upstream PRs. Its commits are
recorded DEFERRED ("in review: URL") so no later run plans them again. Each `ingest` first settles
the open proposals: approved -> the unit lands by compare-and-swap (when the fork branch has not
moved since; else the proposal is stale and its commits are planned again); merged on the forge
-> the fork branch fast-forwards to the forge's; closed -> its commits are pending again.

"Approved" means the fork's reviewers approved what forkflow pushed, not that anyone did: a
stranger's approval on a public repository used to land a unit.  `[ingest.review] approvers` /
`teams` / `min_approvals` name who counts; without them the forge's own people do (GitHub: an
OWNER, MEMBER or COLLABORATOR review; GitLab: a project member at Developer or above).  Only
approvals of the request's head, which must be the commit forkflow pushed, count, and the latest
CHANGES_REQUESTED of anyone blocks.
"""
from __future__ import annotations

import dataclasses
import enum
import json
import os
import re
from dataclasses import dataclass
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from sqlalchemy import select

from forkflow.config import Config, config_error
from forkflow.errors import GitError, UserError
from forkflow.git.repo import Repo
from forkflow.landing.ingest import ReviewMember
from forkflow.landing.worktree import catch_up_work_trees
from forkflow.ledger import records as ledger_records
from forkflow.markdown_safe import Quote, render_checked
from forkflow.models import IN_REVIEW_CHAIN, Decider, Decision, Disposition, RecordedDecision, Sha
from forkflow.store.session import Store
from forkflow.store.schema_review import ReviewRow

if TYPE_CHECKING:
    from forkflow.landing.ingest import IngestReport

IN_REVIEW = "in review: "  # the reason of an in-review member's DEFERRED record


class ReviewState(str, enum.Enum):
    OPEN = "open"
    APPROVED = "approved"
    MERGED = "merged"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class Proposal:
    number: int
    url: str


@dataclass(frozen=True, slots=True)
class Verdict:
    state: ReviewState
    why: str = ""  # for people: who approved, or what the request still waits for


class ReviewSink(Protocol):
    def propose(self, branch: str, base: str, title: str, body: str) -> Proposal: ...
    def state(self, number: int, pushed: Sha) -> Verdict: ...


@dataclass(frozen=True, slots=True)
class ReviewPolicy:
    """Whose approval lands a unit: `[ingest.review] approvers`, `teams`, `min_approvals`."""
    approvers: tuple[str, ...] = ()  # logins (GitHub) or usernames (GitLab)
    teams: tuple[str, ...] = ()  # GitHub "org/team" (or a team of the repository's owner); GitLab group paths
    min_approvals: int = 1

    @property
    def is_named(self) -> bool:
        return bool(self.approvers or self.teams)


@dataclass(frozen=True, slots=True)
class ReviewSettings:
    sink: str  # github | gitlab
    target: str  # owner/name or a GitLab project
    api: str
    token_env: str
    remote: str
    branch_prefix: str
    policy: ReviewPolicy = ReviewPolicy()


def review_settings(config: Config) -> ReviewSettings | None:
    """`[ingest] land` and `[ingest.review]`; None for direct landing."""
    sect = config.section("ingest")
    land = sect.get("land", "direct")
    if land not in ("direct", "review"):
        raise config_error(config.path, config.text, "ingest.land", f'must be "direct" or "review", not {land!r}')
    if land == "direct":
        return None
    r = sect.get("review", {})
    sink = r.get("sink", "github")
    if sink not in ("github", "gitlab"):
        raise config_error(config.path, config.text, "ingest.review.sink", f'must be "github" or "gitlab", not {sink!r}')
    target = r.get("github_repo" if sink == "github" else "gitlab_project")
    if not isinstance(target, (str, int)) or not str(target):
        key = "github_repo" if sink == "github" else "gitlab_project"
        raise UserError(f'[ingest] land = "review" needs [ingest.review] {key}; set it in forkflow.toml')
    api = r.get(f"{sink}_api", "https://api.github.com" if sink == "github" else "https://gitlab.com/api/v4")
    token_env = r.get(f"{sink}_token_env", "GITHUB_TOKEN" if sink == "github" else "GITLAB_TOKEN")
    return ReviewSettings(sink, str(target), str(api), str(token_env),
                          str(r.get("remote", sect.get("push_remote", "origin"))), str(r.get("branch_prefix", "forkflow/")),
                          _policy(config, r))


def _policy(config: Config, r: dict[str, Any]) -> ReviewPolicy:
    names: dict[str, tuple[str, ...]] = {}
    for key in ("approvers", "teams"):
        value = r.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise config_error(config.path, config.text, f"ingest.review.{key}",
                               'must be a list of names, e.g. ["alice", "bob"]')
        names[key] = tuple(v.strip() for v in value)
    need = r.get("min_approvals", 1)
    if isinstance(need, bool) or not isinstance(need, int) or need < 1:
        raise config_error(config.path, config.text, "ingest.review.min_approvals",
                           f"must be a whole number of at least 1, not {need!r}")
    return ReviewPolicy(names["approvers"], names["teams"], need)


def make_sink(settings: ReviewSettings) -> ReviewSink:
    token = os.environ.get(settings.token_env, "")
    if not token:
        raise UserError(f'[ingest] land = "review" needs a token in ${settings.token_env}; export it and retry')
    if settings.sink == "github":
        return GitHubReview(settings.target, token, settings.api, settings.policy)
    return GitLabReview(settings.target, token, settings.api, settings.policy)


@dataclass(frozen=True, slots=True)
class Review:
    """One review (GitHub) or approval (GitLab) as the forge tells it."""
    login: str
    state: str  # APPROVED | CHANGES_REQUESTED | DISMISSED | COMMENTED | PENDING
    commit: str  # the head it was given on; "" where the forge does not say


def latest_reviews(reviews: list[Review]) -> dict[str, Review]:
    """Each person's standing review: their newest one that approves, asks for changes or was
    dismissed (a comment leaves the earlier verdict standing, as on GitHub).  [pure]"""
    out: dict[str, Review] = {}
    for r in reviews:
        if r.state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
            out[r.login.casefold()] = r
    return out


def tally(reviews: list[Review], head: str, counts: Callable[[str], bool], need: int, who: str) -> Verdict:
    """APPROVED when `need` people for whom `counts(login)` holds approved `head` and nobody's
    standing review asks for changes; else OPEN, saying what is missing.  [pure but for `counts`]"""
    standing = latest_reviews(reviews)
    blocking = sorted(r.login for r in standing.values() if r.state == "CHANGES_REQUESTED")
    if blocking:
        return Verdict(ReviewState.OPEN, f"changes requested by {', '.join(blocking)}")
    approved = [r for r in standing.values() if r.state == "APPROVED"]
    stale = sorted(r.login for r in approved if r.commit and r.commit != head)
    fresh = [r.login for r in approved if not r.commit or r.commit == head]
    counted = [login for login in fresh if counts(login)]
    if len(counted) >= need:
        return Verdict(ReviewState.APPROVED, f"approved by {', '.join(sorted(counted))} on {head[:12]}")
    notes = [f"{len(counted)} of {need} approval(s) from {who} on {head[:12]}"]
    if others := sorted(set(fresh) - set(counted)):
        notes.append(f"not counted: {', '.join(others)} (not {who})")
    if stale:
        notes.append(f"not counted: {', '.join(stale)} (approved an earlier head)")
    return Verdict(ReviewState.OPEN, "; ".join(notes))


def _object(doc: Any, what: str) -> dict[str, Any]:
    """A forge answer that must be a JSON object, or one line saying it is not (untrusted input)."""
    if not isinstance(doc, dict):
        raise UserError(f"{what} answered {type(doc).__name__}, not an object; check the API URL in "
                        "[ingest.review] and retry")
    return doc


def _moved(head: str, pushed: Sha) -> Verdict:
    return Verdict(ReviewState.OPEN, f"its head is {head[:12] or 'unknown'}, not the {pushed[:12]} forkflow proposed; "
                                     "push that back or close the request (its commits are then deferred)")


class GitHubReview:
    FORK_PEOPLE = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})  # author_association that counts by default

    def __init__(self, repo: str, token: str, api: str, policy: ReviewPolicy = ReviewPolicy()) -> None:
        from forkflow.triage.sinks.http import ForgeClient

        self.repo = repo
        self.policy = policy
        self.client = ForgeClient(api, token, "Authorization", "Bearer ", what=f"GitHub ({repo})")

    def propose(self, branch: str, base: str, title: str, body: str) -> Proposal:
        doc = self.client.request("POST", f"/repos/{self.repo}/pulls",
                                  json={"title": title, "body": body, "head": branch, "base": base})
        return Proposal(int(doc["number"]), str(doc.get("html_url", "")))

    def state(self, number: int, pushed: Sha) -> Verdict:
        doc = _object(self.client.request("GET", f"/repos/{self.repo}/pulls/{number}"), self.client.what)
        if doc.get("merged"):
            return Verdict(ReviewState.MERGED)
        if doc.get("state") == "closed":
            return Verdict(ReviewState.CLOSED)
        head = str(_object(doc.get("head") or {}, self.client.what).get("sha") or "")
        if head != pushed:
            return _moved(head, pushed)
        docs = self._reviews(number)
        reviews = [Review(str(r["user"]["login"]), str(r.get("state", "")), str(r.get("commit_id") or "-"))
                   for r in docs if isinstance(r.get("user"), dict) and r["user"].get("login")]
        if self.policy.is_named:
            return tally(reviews, head, self._named, self.policy.min_approvals, "the fork's approvers")
        association = {str(r["user"]["login"]).casefold(): str(r.get("author_association", ""))
                       for r in docs if isinstance(r.get("user"), dict) and r["user"].get("login")}
        v = tally(reviews, head, lambda login: association.get(login.casefold()) in self.FORK_PEOPLE,
                  self.policy.min_approvals, "the repository's members or collaborators")
        if v.state is ReviewState.APPROVED and doc.get("mergeable_state") == "blocked":
            return Verdict(ReviewState.OPEN, f"{v.why}, but GitHub says the request is blocked "
                                             "(its required reviews or checks)")
        return v

    def _reviews(self, number: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for page in range(1, 31):  # 3,000 reviews at most
            docs = self.client.request("GET", f"/repos/{self.repo}/pulls/{number}/reviews",
                                       params={"per_page": 100, "page": page}) or []
            out += [d for d in docs if isinstance(d, dict)]
            if len(docs) < 100:
                break
        return out

    def _named(self, login: str) -> bool:
        if login.casefold() in {a.casefold() for a in self.policy.approvers}:
            return True
        owner = self.repo.split("/")[0]
        for team in self.policy.teams:
            org, _, slug = team.rpartition("/")
            try:
                doc = self.client.request("GET", f"/orgs/{quote(org or owner, safe='')}/teams/"
                                                 f"{quote(slug, safe='')}/memberships/{quote(login, safe='')}")
            except UserError:  # 404: not a member (or a team the token cannot see): not counted
                continue
            if isinstance(doc, dict) and doc.get("state") == "active":
                return True
        return False


class GitLabReview:
    DEVELOPER = 30  # the access level from which a project member's approval counts

    def __init__(self, project: str, token: str, api: str, policy: ReviewPolicy = ReviewPolicy()) -> None:
        from forkflow.triage.sinks.http import ForgeClient

        self.project = quote(project, safe="")
        self.policy = policy
        self.client = ForgeClient(api, token, "PRIVATE-TOKEN", what=f"GitLab ({project})")

    def propose(self, branch: str, base: str, title: str, body: str) -> Proposal:
        doc = self.client.request("POST", f"/projects/{self.project}/merge_requests", json={
            "title": title, "description": body, "source_branch": branch, "target_branch": base})
        return Proposal(int(doc["iid"]), str(doc.get("web_url", "")))

    def state(self, number: int, pushed: Sha) -> Verdict:
        doc = _object(self.client.request("GET", f"/projects/{self.project}/merge_requests/{number}"),
                      self.client.what)
        if doc.get("state") == "merged":
            return Verdict(ReviewState.MERGED)
        if doc.get("state") == "closed":
            return Verdict(ReviewState.CLOSED)
        head = str(doc.get("sha") or "")
        if head != pushed:  # approvals may survive a push (the project's setting): the head must be ours
            return _moved(head, pushed)
        if doc.get("detailed_merge_status") == "requested_changes":
            return Verdict(ReviewState.OPEN, "a reviewer requested changes")
        ap = _object(self.client.request("GET", f"/projects/{self.project}/merge_requests/{number}/approvals") or {},
                     self.client.what)
        ids: dict[str, int] = {}
        reviews: list[Review] = []
        for a in ap.get("approved_by") or []:
            user = a.get("user") if isinstance(a, dict) else None
            if isinstance(user, dict) and user.get("username") and isinstance(user.get("id"), int):
                ids[str(user["username"]).casefold()] = user["id"]
                reviews.append(Review(str(user["username"]), "APPROVED", str(a.get("sha") or "")))
        required = ap.get("approvals_required")
        rules = bool(ap.get("has_approval_rules")) or (isinstance(required, int) and required > 0)
        if self.policy.is_named:
            return tally(reviews, head, lambda login: self._named(login, ids[login.casefold()]),
                         self.policy.min_approvals, "the fork's approvers")
        v = tally(reviews, head, lambda login: self._member(f"/projects/{self.project}", ids[login.casefold()]),
                  self.policy.min_approvals, "the project's developers")
        if v.state is ReviewState.APPROVED and rules and ap.get("approvals_left") != 0:
            return Verdict(ReviewState.OPEN, f"{v.why}, but GitLab's approval rules want "
                                             f"{ap.get('approvals_left')} more")
        return v

    def _member(self, where: str, user_id: int) -> bool:
        try:
            doc = self.client.request("GET", f"{where}/members/all/{user_id}")
        except UserError:  # 404: not a member: not counted
            return False
        level = doc.get("access_level") if isinstance(doc, dict) else None
        return isinstance(level, int) and level >= self.DEVELOPER

    def _named(self, login: str, user_id: int) -> bool:
        if login.casefold() in {a.casefold() for a in self.policy.approvers}:
            return True
        return any(self._member(f"/groups/{quote(g, safe='')}", user_id) for g in self.policy.teams)


Member = ReviewMember  # the landing loop builds them (landing/ingest.py)


def describe(name: str, kind: str, members: list[Member], l1: str, depends_on: list[str]) -> str:
    """The request's description: why these commits, what they wait for, what L1 said.  [pure]

    Subjects and reasons come from upstream: quoted so that no `Closes #1` closes a fork issue,
    no `@team` is pinged and nothing links or loads; the whole is checked against its template."""
    def build(q: Quote) -> str:
        prs = [f"#{m.pr}" for m in members if m.pr is not None]
        lines = [f"forkflow landing unit {q.code(name)} ({kind}, {len(members)} upstream commit(s)).", "",
                 f"**L1:** {q.prose(l1, one_line=True)}", ""]
        if depends_on:
            lines += ["**Depends on:** " + ", ".join(q.prose(d, one_line=True) for d in depends_on), ""]
        lines += ["| upstream | PR | subject | why here |", "|---|---|---|---|"]
        lines += [f"| `{m.sha[:12]}` | {f'#{m.pr}' if m.pr else ''} | {_cell(q, m.subject)} | {_cell(q, m.reason)} |"
                  for m in members]
        if prs:
            lines += ["", "Upstream PRs: " + " ".join(prs)]
        lines += ["", "Approve (or merge) this request to land it; the next `forkflow ingest` lands approved units."]
        return "\n".join(lines)
    return render_checked(build)


def _cell(q: Quote, text: str) -> str:
    """One table cell of untrusted text: one line, pipes escaped, nothing that renders."""
    return q.cell(text, 160)


class Reviewer:
    """Proposes units (called from the landing loop) and settles proposals (before a run)."""

    def __init__(self, repo: Repo, config: Config, store: Store, fork_id: int, settings: ReviewSettings,
                 sink: ReviewSink) -> None:
        self.repo = repo
        self.config = config
        self.store = store
        self.fork_id = fork_id
        self.settings = settings
        self.sink = sink

    def propose(self, unit_id: int | None, name: str, kind: str, candidate: Sha, base: Sha,
                members: list[Member], l1: str, depends_on: list[str]) -> str:
        """Push the candidate as a branch, open the request, keep its members out of planning."""
        branch = self.settings.branch_prefix + re.sub(r"[^A-Za-z0-9._/-]+", "-", name).strip("-/.")
        self.repo.git("push", "--quiet", "--force", self.settings.remote, f"{candidate}:refs/heads/{branch}")
        title = self.repo.git("show", "-s", "--format=%s", candidate).strip()[:72]
        p = self.sink.propose(branch, self.config.fork_branch, title, describe(name, kind, members, l1, depends_on))
        with self.store.session_scope() as s:
            s.add(ReviewRow(fork_id=self.fork_id, unit_id=unit_id, name=name, number=p.number, url=p.url,
                            branch=branch, candidate=candidate, base=base,
                            members=json.dumps([m.sha for m in members])))
            for m in members:
                ledger_records.record_decision(s, self.fork_id, RecordedDecision(
                    m.sha, Disposition.DEFERRED, f"{IN_REVIEW}{p.url or f'#{p.number}'}", chain=IN_REVIEW_CHAIN))
        return f"in review: {p.url or f'#{p.number}'} (branch {branch})"

    def settle(self) -> list[tuple[str, str, str]]:
        """(unit name, outcome, detail) per open proposal: landed, closed, stale or open."""
        from forkflow.landing.land import land

        with self.store.session_scope() as s:
            rows = [(r.id, r.name, r.number, r.url, Sha(r.candidate), Sha(r.base), json.loads(r.members))
                    for r in s.scalars(select(ReviewRow).where(ReviewRow.fork_id == self.fork_id,
                                                               ReviewRow.state == "open"))]
        out: list[tuple[str, str, str]] = []
        for rid, name, number, url, candidate, base, members in rows:
            verdict = self.sink.state(number, candidate)
            state = verdict.state
            where = url or f"#{number}"
            if state is ReviewState.OPEN:
                out.append((name, "open", f"waiting for review: {where}" + (f" ({verdict.why})" if verdict.why else "")))
                continue
            outcome, detail = "closed", f"{where} was closed: its commits are deferred (forkflow decide --clear)"
            if state is ReviewState.APPROVED:
                if land(self.repo, self.config, candidate, base, name):
                    outcome, detail = "landed", f"{verdict.why or 'approved'} in {where}: landed {candidate[:12]}"
                    notes = catch_up_work_trees(self.repo, self.config, base, candidate)
                    detail += "".join(f"; {n}" for n in notes)
                else:
                    outcome, detail = "stale", f"approved in {where}, but the fork branch moved: planned again"
            elif state is ReviewState.MERGED:
                outcome, detail = self._merged(candidate, where)
            with self.store.session_scope() as s:
                s.get_one(ReviewRow, rid).state = outcome
                for sha in members:
                    if outcome == "closed":  # a person closed it: theirs to reopen (forkflow decide --clear)
                        ledger_records.record_decision(s, self.fork_id, RecordedDecision(
                            Sha(sha), Disposition.DEFERRED, f"its review was closed: {where}",
                            source=Decider.PERSON, verdict=Decision.DEFER))
                    else:  # landed: git shows the pick; stale: planned again
                        ledger_records.forget_decision(s, self.fork_id, Sha(sha))
            out.append((name, outcome, detail))
        return out

    def _merged(self, candidate: Sha, where: str) -> tuple[str, str]:
        """Merged on the forge: fast-forward the fork branch to the forge's when it contains the unit."""
        repo, config = self.repo, self.config
        try:
            repo.git("fetch", "--quiet", self.settings.remote, config.fork_branch)
        except GitError as e:
            return "stale", f"merged in {where}, but fetching {self.settings.remote} failed ({e.reason})"
        remote_tip = repo.resolve("FETCH_HEAD")
        local = repo.resolve(config.fork_ref)
        if remote_tip and local and repo.is_ancestor(candidate, remote_tip) and repo.is_ancestor(local, remote_tip):
            if repo.update_ref(config.fork_ref, remote_tip, local, message=f"forkflow: merged in review {where}"):
                return "landed", f"merged in {where}: {config.fork_branch} fast-forwarded to {remote_tip[:12]}"
        return "landed", f"merged in {where}; fetch {self.settings.remote} to catch up"


def with_reviews(settled: list[tuple[str, str, str]], run: Callable[[], IngestReport]) -> IngestReport:
    """The run's report with the settled proposals first: landed ones as LANDED, open ones as
    IN_REVIEW (a person is needed: `ingest` exits 4), closed or stale ones as CLOSED."""
    from forkflow.landing.ingest import UnitResult, UnitStatus

    report = run()
    status = {"landed": UnitStatus.LANDED, "open": UnitStatus.IN_REVIEW}
    results = tuple(UnitResult(name, "review", status.get(outcome, UnitStatus.CLOSED), detail)
                    for name, outcome, detail in settled)
    return dataclasses.replace(report, results=results + report.results)
