"""Review before landing (`[ingest] land = "review"`): propose each unit, land it once approved.

A unit that passes L1 is pushed as a branch and proposed as a pull request (GitHub) or merge
request (GitLab) with its reasons, dependencies, L1 result and upstream PRs. Its commits are
recorded DEFERRED ("in review: URL") so no later run plans them again. Each `ingest` first settles
the open proposals: approved -> the unit lands by compare-and-swap (when the fork branch has not
moved since; else the proposal is stale and its commits are planned again); merged on the forge
-> the fork branch fast-forwards to the forge's; closed -> its commits are pending again.
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
from forkflow.models import Decider, Decision, Disposition, RecordedDecision, Sha
from forkflow.store import queries
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


class ReviewSink(Protocol):
    def propose(self, branch: str, base: str, title: str, body: str) -> Proposal: ...
    def state(self, number: int) -> ReviewState: ...


@dataclass(frozen=True, slots=True)
class ReviewSettings:
    sink: str  # github | gitlab
    target: str  # owner/name or a GitLab project
    api: str
    token_env: str
    remote: str
    branch_prefix: str


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
                          str(r.get("remote", sect.get("push_remote", "origin"))), str(r.get("branch_prefix", "forkflow/")))


def make_sink(settings: ReviewSettings) -> ReviewSink:
    token = os.environ.get(settings.token_env, "")
    if not token:
        raise UserError(f'[ingest] land = "review" needs a token in ${settings.token_env}; export it and retry')
    if settings.sink == "github":
        return GitHubReview(settings.target, token, settings.api)
    return GitLabReview(settings.target, token, settings.api)


class GitHubReview:
    def __init__(self, repo: str, token: str, api: str) -> None:
        from forkflow.triage.sinks.http import ForgeClient

        self.repo = repo
        self.client = ForgeClient(api, token, "Authorization", "Bearer ", what=f"GitHub ({repo})")

    def propose(self, branch: str, base: str, title: str, body: str) -> Proposal:
        doc = self.client.request("POST", f"/repos/{self.repo}/pulls",
                                  json={"title": title, "body": body, "head": branch, "base": base})
        return Proposal(int(doc["number"]), str(doc.get("html_url", "")))

    def state(self, number: int) -> ReviewState:
        doc = self.client.request("GET", f"/repos/{self.repo}/pulls/{number}")
        if doc.get("merged"):
            return ReviewState.MERGED
        if doc.get("state") == "closed":
            return ReviewState.CLOSED
        reviews: list[dict[str, Any]] = self.client.request("GET", f"/repos/{self.repo}/pulls/{number}/reviews") or []
        return ReviewState.APPROVED if any(r.get("state") == "APPROVED" for r in reviews) else ReviewState.OPEN


class GitLabReview:
    def __init__(self, project: str, token: str, api: str) -> None:
        from forkflow.triage.sinks.http import ForgeClient

        self.project = quote(project, safe="")
        self.client = ForgeClient(api, token, "PRIVATE-TOKEN", what=f"GitLab ({project})")

    def propose(self, branch: str, base: str, title: str, body: str) -> Proposal:
        doc = self.client.request("POST", f"/projects/{self.project}/merge_requests", json={
            "title": title, "description": body, "source_branch": branch, "target_branch": base})
        return Proposal(int(doc["iid"]), str(doc.get("web_url", "")))

    def state(self, number: int) -> ReviewState:
        doc = self.client.request("GET", f"/projects/{self.project}/merge_requests/{number}")
        if doc.get("state") == "merged":
            return ReviewState.MERGED
        if doc.get("state") == "closed":
            return ReviewState.CLOSED
        approvals = self.client.request("GET", f"/projects/{self.project}/merge_requests/{number}/approvals") or {}
        return ReviewState.APPROVED if approvals.get("approved") else ReviewState.OPEN


Member = ReviewMember  # the landing loop builds them (landing/ingest.py)


def describe(name: str, kind: str, members: list[Member], l1: str, depends_on: list[str]) -> str:
    """The request's description: why these commits, what they wait for, what L1 said.  [pure]"""
    prs = [f"#{m.pr}" for m in members if m.pr is not None]
    lines = [f"forkflow landing unit `{name}` ({kind}, {len(members)} upstream commit(s)).", "",
             f"**L1:** {l1}", ""]
    if depends_on:
        lines += ["**Depends on:** " + ", ".join(depends_on), ""]
    lines += ["| upstream | PR | subject | why here |", "|---|---|---|---|"]
    lines += [f"| `{m.sha[:12]}` | {f'#{m.pr}' if m.pr else ''} | {_cell(m.subject)} | {_cell(m.reason)} |"
              for m in members]
    if prs:
        lines += ["", "Upstream PRs: " + " ".join(prs)]
    lines += ["", "Approve (or merge) this request to land it; the next `forkflow ingest` lands approved units."]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")[:160]


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
                queries.record_decision(s, self.fork_id, RecordedDecision(
                    m.sha, Disposition.DEFERRED, f"{IN_REVIEW}{p.url or f'#{p.number}'}"))
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
            state = self.sink.state(number)
            where = url or f"#{number}"
            if state is ReviewState.OPEN:
                out.append((name, "open", f"waiting for review: {where}"))
                continue
            outcome, detail = "closed", f"{where} was closed: its commits are deferred (forkflow decide --clear)"
            if state is ReviewState.APPROVED:
                if land(self.repo, self.config, candidate, base, name):
                    outcome, detail = "landed", f"approved in {where}: landed {candidate[:12]}"
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
                        queries.record_decision(s, self.fork_id, RecordedDecision(
                            Sha(sha), Disposition.DEFERRED, f"its review was closed: {where}",
                            source=Decider.PERSON, verdict=Decision.DEFER))
                    else:  # landed: git shows the pick; stale: planned again
                        queries.forget_decision(s, self.fork_id, Sha(sha))
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
