"""Tracking issues for nightly failures: one per group, updated on recurrence, closed when green.

`plan_tracking` is pure: it decides, from the groups red in the newest nightly and the issues
already tracked, what to open, update, count as green or close.  `sync_tracking` carries the
plan out on a sink and records every step in the store as it succeeds, so a forge that fails
half-way loses nothing: the next sync picks up where this one stopped, and the sink's marker
search keeps it from ever filing a group twice.
"""
from __future__ import annotations

import enum
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from forkflow.config import Config
from forkflow.errors import GitError, UserError
from forkflow.git.repo import Repo
from forkflow.markdown_safe import Construct, Quote, render_checked, template_constructs
from forkflow.state import state_dir
from forkflow.tiers.tiers import Tier
from forkflow.triage import records as ts
from forkflow.triage.classify import infra_verdict
from forkflow.triage.sinks.base import IssueDraft, IssueRef, IssueSink, ensure
from forkflow.triage.sinks.markdown import MarkdownSink
from forkflow.triage.suggest import (
    Agent,
    ChatAgent,
    CommandAgent,
    Culprit,
    owners_for,
    parse_codeowners,
    suggest,
)
from forkflow.triage.triage import Triager, TriageSettings, load_settings
from forkflow.triage.trunk import RedItem, red_streaks, trunk_line, trunk_runs, with_culprits, with_memory

if TYPE_CHECKING:  # regress/ pulls numpy: read only where an alert feed is given
    from forkflow.regress.records import Alert, BisectionRecord


class Action(str, enum.Enum):
    OPEN = "open"
    UPDATE = "update"
    GREEN = "green"     # one more green nightly, still open
    CLOSE = "close"
    FLAKY = "flaky"     # red, but known flaky: not filed (forkflow.triage.memory)


@dataclass(frozen=True, slots=True)
class Step:
    action: Action
    key: str
    items: tuple[RedItem, ...] = ()           # the group's red tests (OPEN / UPDATE)
    tracked: ts.Tracking | None = None


def plan_tracking(red: Sequence[RedItem], tracked: dict[str, ts.Tracking], run_id: int,
                  close_after: int) -> list[Step]:
    """What to do with each group for nightly run `run_id`.  [pure]"""
    by_key: dict[str, list[RedItem]] = {}
    for item in red:
        by_key.setdefault(item.failure.signature.key, []).append(item)
    steps = []
    for key, items in sorted(by_key.items()):
        t = tracked.get(key)
        if t is not None and t.last_run_id >= run_id:
            continue  # this nightly was already synced
        steps.append(Step(Action.OPEN if t is None else Action.UPDATE, key, tuple(items), t))
    for key, t in sorted(tracked.items()):
        if key in by_key or not t.open or t.last_run_id >= run_id:
            continue
        steps.append(Step(Action.CLOSE if t.green_streak + 1 >= close_after else Action.GREEN,
                          key, (), t))
    return steps


def make_sink(config: Config) -> IssueSink:
    """The sink `[triage] sink` names, with its settings; tokens come from the environment."""
    raw = config.section("triage")
    kind = load_settings(config).sink
    if kind == "markdown":
        return MarkdownSink(config.root / str(raw["markdown_dir"]) if "markdown_dir" in raw
                            else state_dir(config.root) / "issues")  # default: the fork's state folder
    env = str(raw.get(f"{kind}_token_env", "GITHUB_TOKEN" if kind == "github" else "GITLAB_TOKEN"))
    token = os.environ.get(env, "")
    if not token:
        raise UserError(f"[triage] sink = \"{kind}\" needs a token in ${env}; export it and retry")
    if kind == "github":
        from forkflow.triage.sinks.github import GitHubSink

        repo = raw.get("github_repo")
        if not isinstance(repo, str) or "/" not in repo:
            raise UserError("[triage] github_repo must be \"owner/name\"; set it in forkflow.toml")
        return GitHubSink(repo, token, str(raw.get("github_api", "https://api.github.com")))
    from forkflow.triage.sinks.gitlab import GitLabSink

    project = raw.get("gitlab_project")
    if not isinstance(project, (str, int)) or not str(project):
        raise UserError("[triage] gitlab_project must be \"group/name\" or a project id; set it in "
                        "forkflow.toml")
    return GitLabSink(str(project), token, str(raw.get("gitlab_api", "https://gitlab.com/api/v4")))


def make_agent(config: Config) -> Agent | None:
    """The agent `[triage] agent_command` or `agent_endpoint` names, if any."""
    raw = config.section("triage")
    if raw.get("agent_command"):
        return CommandAgent(str(raw["agent_command"]))
    if raw.get("agent_endpoint"):
        return ChatAgent(str(raw["agent_endpoint"]), str(raw.get("agent_model", "default")),
                         str(raw.get("agent_key_env", "")))
    return None


def _codeowners(repo: Repo, rev: str) -> list[tuple[str, tuple[str, ...]]]:
    for path in ("CODEOWNERS", ".github/CODEOWNERS", "docs/CODEOWNERS", ".gitlab/CODEOWNERS"):
        try:
            return parse_codeowners(repo.git("show", f"{rev}:{path}"))
        except GitError:
            continue
    return []


def _culprit(repo: Repo, item: RedItem) -> Culprit | None:
    """The culprit's diff for the suggested fix: the upstream commit's when a bisection named one."""
    c = item.culprit_detail
    if c is None:
        return None
    sha = repo.resolve(c.upstream_sha) if c.upstream_sha else None
    if sha is not None:
        subject = c.upstream_subject or c.unit_subject
    else:
        sha, subject = repo.resolve(c.fork_sha), c.unit_subject
    if sha is None:
        return None
    diff = repo.git("show", "--format=", "--no-color", "-U3", sha)
    files = repo.changed_files([sha]).get(sha, ())
    return Culprit(sha, subject, diff, files)


# -- Markdown of untrusted text (issue 13, item 8) ------------------------------------------------
# Test names, messages, commit subjects and agent answers come from upstream and CI: each goes
# through a door of forkflow.markdown_safe, and the body is checked with a CommonMark parser
# against its template (render_checked): a value that would mention, link, load an image, open
# HTML or close an issue is withheld, never sent.


def culprit_line(items: Sequence[RedItem], q: Quote | None = None) -> str:
    """The body's culprit: fork commit (landing unit), upstream commit and PR, and how it was found."""
    q = q or Quote()
    known = [i for i in items if i.culprit_detail is not None]
    if known:
        c = known[0].culprit_detail
        assert c is not None
        text = f"fork commit {q.code(c.fork_sha[:12])} (landing unit: {q.code(c.unit_subject)})"
        if c.upstream_sha:
            text += f"; upstream commit {q.code(c.upstream_sha[:12])}" + (f" {q.code(c.upstream_subject)}" if
                                                                         c.upstream_subject else "")
        text += f" (PR #{c.pr})" if c.pr and f"#{c.pr})" not in text else ""
        how = (f"bisection {c.bisection_id}, confidence {c.confidence:.0%}" if c.source == "bisection"
               else "the only commit between the last green and the first red run")
        return f"{text}; found by {how}"
    tried = [i.bisection for i in items if i.bisection is not None]
    if tried:
        return (f"nobody: bisection {tried[0].id} says {q.prose(str(tried[0].status), one_line=True)} "
                f"({q.code(tried[0].message)})")
    if any(i.bisectable for i in items):
        return "not known yet (run `forkflow trunk --bisect`)"
    first = items[0]
    if first.last_green_rev is None:
        return ("not known: no green run of this test on fork main is stored, so there is no range to "
                "bisect (bisect by hand: `forkflow bisect --test ID --good A --bad B`)")
    return "not known: the test passed and failed at the same commit, so there is no range to bisect"


def render_body(items: Sequence[RedItem], culprit: Culprit | None, owners: Sequence[str],
                suggestions: Sequence[Any]) -> str:
    """The issue's body: every untrusted value quoted, the whole checked against its template."""
    return render_checked(lambda q: _body(q, items, owners, suggestions))


def body_constructs(items: Sequence[RedItem], owners: Sequence[str],
                    suggestions: Sequence[Any]) -> tuple[Construct, ...]:
    """What the body's template itself mentions or links (its owners, the culprit's PR)."""
    return template_constructs(lambda q: _body(q, items, owners, suggestions))


def _body(q: Quote, items: Sequence[RedItem], owners: Sequence[str], suggestions: Sequence[Any]) -> str:
    first = max(items, key=lambda i: i.runs_red)
    f = first.failure
    lines = [f"**Signature** ({f.signature.kind.value}): {q.code(f.signature.text)}", "",
             f"**Red since** run {first.since_run_id} at {q.code(first.since_rev[:12])}"
             + (f" (last green {q.code(first.last_green_rev[:12])})" if first.last_green_rev else ""),
             f"**Culprit**: {culprit_line(items, q)}",
             "", "**Affected tests**:", *[f"- {q.code(i.failure.job)} :: {q.code(i.failure.test)}" for i in items],
             "", "**Log excerpt**:", "", q.block(f.signature.excerpt[-3000:]), "",
             f"**Owners**: {', '.join(owners) if owners else 'none found in CODEOWNERS'}", "",
             "**Suggested fix**:"]
    infra = infra_verdict(f.signature)
    if infra.family is not None:  # INFRA: what to do about the machine or the environment
        lines[1:1] = ["", f"**Suggested action** (INFRA, {infra.family.value}): "
                      f"{q.prose(infra.action, one_line=True)}"]
    for s in suggestions:
        if s.text or s.warnings:
            warned = f" ({q.prose('; '.join(s.warnings), one_line=True)})" if s.warnings else ""
            lines += ["", f"_{s.source}_{warned}", "", q.markdown(s.text)]
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class SyncResult:
    run_id: int | None
    steps: tuple[tuple[Step, IssueRef | None], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "steps": [
            {"action": st.action.value, "group": st.key, "issue": ref.id if ref else None,
             "url": ref.url if ref else None, "tests": [i.failure.test for i in st.items],
             **({"flaky": st.items[0].flaky} if st.action is Action.FLAKY and st.items else {})}
            for st, ref in self.steps]}


class AlertFeed(Protocol):
    """The L2 alerts a sync tracks (`forkflow.regress.service.StoreAlertFeed`)."""

    def alerts(self) -> list[Alert]: ...
    def bisection(self, bisection_id: int) -> BisectionRecord | None: ...
    def newest_value(self, metric: str) -> float | None: ...


def alert_key(alert_id: int) -> str:
    """The tracking key of an L2 alert (tracked beside failure groups, in the same table)."""
    return f"alert-{alert_id}"


def recovered(alert: Alert, newest: float | None) -> bool:
    """Is the alert's worst metric back: its newest value nearer the level before the change
    than the level after it?  [pure]"""
    w = alert.worst
    return newest is not None and abs(newest - w.before) < abs(newest - w.after)


def sync_tracking(t: Triager, sink: IssueSink, agent: Agent | None = None,
                  settings: TriageSettings | None = None, alerts: AlertFeed | None = None) -> SyncResult:
    """Bring tracking issues in line with the newest nightly (L2) run of fork main, and with the
    open L2 regression alerts when `alerts` is given.

    A red test known flaky (`forkflow.triage.memory`) is not filed: it is listed as a FLAKY
    step.  `sink` and `agent` come from `[triage]` (`make_sink`, `make_agent`) where a command
    wires them.
    """
    settings = settings or t.settings
    runs = trunk_runs(t.journal, Tier.L2, 30, trunk_line(t.repo, t.fork_branch))
    if not runs:
        return SyncResult(None, ())
    newest = runs[0]
    every = with_memory(t, with_culprits(t, red_streaks(runs)))
    red = [i for i in every if i.flaky is None]
    tracked = t.journal.tracking(sink.name)
    done: list[tuple[Step, IssueRef | None]] = []
    rules = _codeowners(t.repo, newest.rev) if red else []
    groups = {k: v for k, v in tracked.items() if not k.startswith("alert-")}
    for step in plan_tracking(red, groups, newest.id, settings.close_after):
        ref, record = _carry_out(t.repo, sink, agent, step, rules, newest.id)
        t.journal.tracked(record)  # each step is recorded as soon as the forge has it
        done.append((step, ref))
    flaky: dict[str, list[RedItem]] = {}
    for i in every:
        if i.flaky is not None:
            flaky.setdefault(i.failure.signature.key, []).append(i)
    done += [(Step(Action.FLAKY, key, tuple(items)), None) for key, items in sorted(flaky.items())]
    if alerts is not None:
        done += _sync_alerts(t, sink, alerts, tracked, newest.id)
    return SyncResult(newest.id, tuple(done))


def _sync_alerts(t: Triager, sink: IssueSink, feed: AlertFeed, tracked: dict[str, ts.Tracking],
                 run_id: int) -> list[tuple[Step, IssueRef | None]]:
    """One issue per L2 regression alert: opened once with its culprit or bisection status,
    updated when a bisection attached since, closed when the metric recovers."""
    from forkflow.regress.alerts import Direction

    out: list[tuple[Step, IssueRef | None]] = []
    for alert in feed.alerts():
        if alert.direction is not Direction.REGRESSION:
            continue
        key = alert_key(alert.id)
        prev = tracked.get(key)
        if prev is not None and (prev.last_run_id >= run_id or not prev.open):
            continue
        back = recovered(alert, feed.newest_value(alert.worst.metric))
        if back:
            if prev is None:
                continue  # recovered before anyone was told: nothing to track
            ref = sink.close(IssueRef(sink.name, prev.issue_id, prev.url, True),
                             f"{alert.worst.metric} is back near its level before the change "
                             f"(nightly run {run_id}); closing.")
            t.journal.tracked(replace(prev, open=False, last_run_id=run_id))
            out.append((Step(Action.CLOSE, key, (), prev), ref))
            continue
        b = feed.bisection(alert.bisection_id) if alert.bisection_id else None
        title = (f"[forkflow] L2 regression: {alert.worst.metric[:80]} "
                 f"{alert.worst.magnitude:+.1%} (alert {alert.id})")
        draft = IssueDraft(key, title, render_alert_body(alert, b, t.repo), ("forkflow", "l2-regression"),
                           template_constructs(lambda q: _alert_body(q, alert, b, _unit_subject(t.repo, b))))
        found = sink.find(key)
        if found is None and prev is not None:
            found = IssueRef(sink.name, prev.issue_id, prev.url, prev.open)
        if found is not None and prev is not None and prev.green_streak == (b.id if b else 0):
            t.journal.tracked(replace(prev, last_run_id=run_id))
            continue  # nothing new to say: the same culprit (or none) as when it was last written
        comment = f"Still regressed in nightly run {run_id}."
        ref = sink.update(found, draft, comment) if found is not None else ensure(sink, draft, comment)[0]
        # green_streak holds the bisection the body was written with (alerts have no green streak)
        t.journal.tracked(ts.Tracking(key, sink.name, ref.id, ref.url, True, b.id if b else 0, run_id))
        out.append((Step(Action.OPEN if prev is None else Action.UPDATE, key, (), prev), ref))
    return out


def _unit_subject(repo: Repo, b: BisectionRecord | None) -> str:
    if b is None or not b.culprit_fork_sha or repo.resolve(b.culprit_fork_sha) is None:
        return ""
    got = repo.log("-1", b.culprit_fork_sha, reverse=False)
    return got[0].subject if got else ""


def render_alert_body(alert: Alert, b: BisectionRecord | None, repo: Repo) -> str:
    """An L2 alert's issue body: every untrusted value quoted, checked against its template."""
    unit = _unit_subject(repo, b)
    return render_checked(lambda q: _alert_body(q, alert, b, unit))


def _alert_body(q: Quote, alert: Alert, b: BisectionRecord | None, unit_subject: str) -> str:
    lines = [f"**L2 regression** between {q.code(alert.good_rev[:12])} (good) and "
             f"{q.code(alert.bad_rev[:12])} (bad): alert {alert.id}", "", "**Metrics**:"]
    for m in alert.members:
        lines.append(f"- {q.code(m.metric)}: {m.before:.6g} -> {m.after:.6g} {q.code(m.unit) if m.unit else ''} "
                     f"({m.magnitude:+.1%}, p {m.pvalue:.3g}, {m.direction.value})")
    lines.append("")
    if b is None:
        lines.append(f"**Culprit**: not bisected yet (`forkflow bisect --alert {alert.id}`)")
    elif b.status == "found" and b.culprit_fork_sha:
        text = f"fork commit {q.code(b.culprit_fork_sha[:12])}"
        if unit_subject:
            text += f" (landing unit: {q.code(unit_subject)})"
        if b.culprit_upstream_sha:
            text += f"; upstream commit {q.code(b.culprit_upstream_sha[:12])}" + (
                f" {q.code(b.subject)}" if b.subject else "")
        text += f" (PR #{b.culprit_pr})" if b.culprit_pr else ""
        lines.append(f"**Culprit**: {text}; found by bisection {b.id}, confidence {b.confidence:.0%}, "
                     f"{b.measurements} measurements")
    else:
        lines.append(f"**Culprit**: nobody: bisection {b.id} says {q.prose(b.status, one_line=True)} "
                     f"({q.code(b.message)})")
    return "\n".join(lines)


def _carry_out(repo: Repo, sink: IssueSink, agent: Agent | None, step: Step,
               rules: list[tuple[str, tuple[str, ...]]], run_id: int) -> tuple[IssueRef | None, ts.Tracking]:
    t = step.tracked
    if step.action in (Action.GREEN, Action.CLOSE):
        assert t is not None
        if step.action is Action.GREEN:
            return None, replace(t, green_streak=t.green_streak + 1, last_run_id=run_id)
        ref = sink.close(IssueRef(sink.name, t.issue_id, t.url, True),
                         f"Green for {t.green_streak + 1} nightlies (run {run_id}); closing.")
        return ref, replace(t, open=False, green_streak=t.green_streak + 1, last_run_id=run_id)
    first = next((i for i in step.items if i.culprit_detail is not None), step.items[0])
    culprit = _culprit(repo, first)
    owners = owners_for(culprit.files if culprit else (), rules)
    sig = first.failure.signature
    suggestions = suggest(sig.text, sig.excerpt, culprit, owners, agent)
    title = f"[forkflow] {sig.kind.value}: {sig.text.split(': ', 1)[-1][:90]} ({step.key[:8]})"
    draft = IssueDraft(step.key, title, render_body(step.items, culprit, owners, suggestions),
                       ("forkflow", "nightly-failure"), body_constructs(step.items, owners, suggestions))
    comment = f"Still failing in nightly run {run_id} ({len(step.items)} test(s))."
    found = sink.find(step.key)
    if found is None and t is not None:
        # a group keyed again by newer signature rules (records.rekey_run): its issue still
        # carries the old key's marker; it is updated (and re-marked) in place, never filed twice
        found = IssueRef(sink.name, t.issue_id, t.url, t.open)
    ref = sink.update(found, draft, comment) if found is not None else ensure(sink, draft, comment)[0]
    return ref, ts.Tracking(step.key, sink.name, ref.id, ref.url, True, 0, run_id)


