"""Renderers shared by the CLI and the demo: core results printed on a Rich console.

Each takes the console to print on; the CLI passes its own, the demo the one it was given.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from forkflow.init import has_password
from forkflow.ledger.headline import Headline, headline_lines
from forkflow.ledger.report import iso, status_dict
from forkflow.models import Ledger, LedgerEntry

if TYPE_CHECKING:  # the renderers stay light to import: `forkflow status` loads this module
    from forkflow.conflicts import records as crecords
    from forkflow.context import Context
    from forkflow.init import InitResult
    from forkflow.landing.ingest import IngestReport
    from forkflow.planning.model import Plan


def short(sha: str | None) -> str:
    """A commit's first 12 hex digits, or "-" (the CLI, the demo and the dashboard's `short` filter)."""
    return (sha or "-")[:12]


def render_init(console: Console, r: InitResult, store: str | None) -> None:
    verb = "wrote" if r.config_written else "kept"
    console.print(f"{verb} {r.config_path}")
    console.print(f"upstream: remote '{r.remote}'" + (" (added)" if r.remote_added else ""))
    console.print(f"store: {r.store_url}")
    if store and has_password(store):
        console.print("the store URL has a password, so it was not written to forkflow.toml: "
                      "export FORKFLOW_STORE=<url> for the commands that follow")
    console.print("next: forkflow status")


def render_status(console: Console, ledger: Ledger, commits: bool,
                  keep: Callable[[LedgerEntry], bool] = lambda e: True, head: Headline | None = None) -> None:
    d = status_dict(ledger, head=head)
    t = Table(title="forkflow status", show_header=False, box=None)
    t.add_row("fork point", short(ledger.fork_point))
    t.add_row("upstream tip", f"{short(ledger.upstream_tip.sha)}  {d['upstream_tip']['date']}")
    t.add_row("ingestion point", f"{short(d['ingestion_point']['sha'])}  {d['ingestion_point']['date']}")
    for label, text in headline_lines(d["headline"]):  # forkflow/ledger/headline.py
        t.add_row(label, f"[bold]{escape(text)}[/]" if label == "days behind upstream" else escape(text))
    # the open commits at or before the point only (README): 0 beside "pending=11" before a first ingest
    t.add_row("backlog commits", f"[bold]{d['backlog_commits']}[/] (of the open, those at or before the ingestion point)")
    t.add_row("deferred", _by_decider(d["decisions"]["deferred"]))
    t.add_row("skipped", _by_decider(d["decisions"]["skipped"]))
    t.add_row("counts", "  ".join(f"{k}={v}" for k, v in d["counts"].items()))
    t.add_row("out-of-order picks", str(d["out_of_order_picks"]))
    console.print(t)
    for note in ledger.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    if commits:
        ct = Table(title="upstream commits after the fork point")
        for col in ("sha", "pr", "date", "subject", "disposition", "fork sha(s)", "evidence"):
            ct.add_column(col, overflow="fold")
        for e in filter(keep, ledger.entries):
            ct.add_row(short(e.commit.sha), f"#{e.pr}" if e.pr else "", iso(e.commit.date)[:10],
                       escape(e.commit.subject[:70]), e.disposition.value,
                       " ".join(short(s) for s in e.fork_shas),
                       escape("; ".join(x.describe() for x in e.evidence) or e.reason))
        console.print(ct)


def _by_decider(counts: dict[str, int]) -> str:
    """'12 (3 by a person, 9 automatic: conflicts)'."""
    words = {"person": "by a person", "auto": "automatic", "message": "in the fork's messages",
             "opt-out": "opted out upstream", "upstream-revert": "reverted upstream"}
    total = sum(counts.values())
    parts = [f"{n} {words.get(k, k)}" for k, n in counts.items()]
    return f"[bold]{total}[/]" + (f" ({', '.join(parts)})" if parts else "")


def render_plan(console: Console, p: Plan, subjects: dict[str, str]) -> None:
    if not p.units:
        console.print("nothing pending: every upstream commit has a decision")
        return
    t = Table(title=f"plan: {p.commit_count} upstream commits in {len(p.units)} landing units "
                    f"on {short(p.base)}")
    for col in ("unit", "kind", "commits", "why"):
        t.add_column(col, overflow="fold")
    for u in p.units:
        first = u.commits[0]
        why = u.reasons.get(first, "")
        if u.needs_resolution:
            why = "[yellow]needs resolution[/]: " + escape(why)
        else:
            why = escape(why)
        t.add_row(escape(u.name), u.kind.value, str(len(u.commits)), why)
    console.print(t)
    for u in p.units:
        if u.kind.value == "chain":
            for sha in u.commits:
                console.print(f"  {escape(u.name)}  {short(sha)}  {escape(subjects.get(sha, '')[:60])}  "
                              f"[dim]{escape(u.reasons.get(sha, ''))}[/]")


# Exit codes of `forkflow ingest` for cron and CI (docs/automation.md); 1, 2, 3 and 130 are the
# CLI's own (a user error, a usage error, a crash, interrupted).
EXIT_OK = 0              # nothing needs a person: every unit landed, validated or was empty
EXIT_NEEDS_PERSON = 4    # units wait on a person: a conflict, a review, a chain behind one
EXIT_FAILED = 5          # a unit failed L1, or could not be validated or landed, or the run stopped: look at why
EXIT_WHY = {EXIT_NEEDS_PERSON: "units wait on a person: open conflicts or reviews (forkflow conflicts)",
            EXIT_FAILED: "a unit failed L1 or could not land (forkflow ingest --unit ID after a fix), "
                         "or the run stopped (its note says why)"}
_DONE = {"landed", "validated", "would-pick", "empty", "closed"}
_FAILED = {"failed", "abandoned"}


def exit_code(report: IngestReport, open_conflicts: int = 0) -> int:
    """0 only when nothing needs a person; any status not known to be done needs one (issue 12)."""
    statuses = {u.status.value for u in report.results}
    if statuses & _FAILED or report.stopped:
        return EXIT_FAILED
    # a landed unit may have left commits out: they wait, as a unit of their own would (a dry run decides nothing)
    left_out = report.mode.value != "dry-run" and any(u.deferred for u in report.results)
    if statuses - _DONE or open_conflicts or left_out:
        return EXIT_NEEDS_PERSON
    return EXIT_OK


def render_exit(console: Console, code: int) -> None:
    """Why `forkflow ingest` exits with `code`, when it is not 0."""
    if code != EXIT_OK:
        console.print(f"[yellow]{escape(EXIT_WHY[code])}[/] (exit {code}; see docs/automation.md)", soft_wrap=True)


_STYLE = {"in-review": "cyan", "closed": "dim", "landed": "green", "validated": "green", "would-pick": "cyan", "failed": "red", "conflict": "yellow",
          "empty": "dim", "waiting": "dim", "abandoned": "red"}


def render_report(console: Console, r: IngestReport) -> None:
    from forkflow.landing.ingest import Mode

    t = Table(title=f"ingest ({r.mode.value}): fork branch {short(r.base)} -> {short(r.tip)}")
    for col in ("id", "unit", "status", "picked", "skipped", "deferred", "fork commit", "details"):
        t.add_column(col, overflow="fold")
    for u in r.results:
        style = _STYLE.get(u.status.value, "")
        detail = u.summary + "".join(f"; {k} resolved by {v}" for k, v in u.resolved_by.items())
        t.add_row(str(u.unit_id or ""), escape(u.name), f"[{style}]{u.status.value}[/]", str(len(u.picked)), str(len(u.skipped)),
                  str(len(u.deferred)), short(u.fork_sha) if u.fork_sha else "", escape(detail[:300]))
    console.print(t)
    if r.ingestion_point:  # forkflow's ref: how far its runs handled upstream, holds included
        console.print(f"recorded point (forkflow's runs, holds included): {short(r.ingestion_point)}")
    for note in r.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    if r.mode is Mode.VALIDATE and r.results:
        console.print("nothing landed (validation only); run `forkflow ingest --land` to land passing units")
    if any(u.status.value in ("failed", "waiting", "conflict") and u.unit_id for u in r.results):
        console.print("re-run one on the current tip once its cause is fixed: forkflow ingest --unit ID")


def render_conflicts(console: Console, rows: list[crecords.ConflictInfo], waiting: set[int],
                     owners: Callable[[str, list[str]], str]) -> None:
    """The open conflicts, one row per upstream commit."""
    if not rows:
        console.print("no open conflicts")
        return
    t = Table(title="conflicts kept for a person, by upstream commit")
    for col in ("ids", "upstream", "subject", "paths", "kind", "chain", "owner", "seen", "status"):
        t.add_column(col, overflow="fold")
    for group in group_conflicts(rows):
        x = group[0]
        paths = [g.path for g in group]
        owner = owners(x.chain, paths)
        status = "proposal waits" if any(g.id in waiting for g in group) else x.status
        t.add_row(" ".join(str(g.id) for g in group), short(x.upstream_sha), escape(x.subject[:60]),
                  escape(", ".join(paths[:4]) + (f" +{len(paths) - 4} more" if len(paths) > 4 else "")),
                  ", ".join(sorted({g.kind for g in group})), escape(x.chain), escape(owner),
                  str(max(g.seen for g in group)), status)
    console.print(t)
    if waiting:
        console.print("a proposal waits for a person (an agent's, or a rule's not yet trusted on this "
                      "fork): read it with `forkflow conflicts show ID`, then `forkflow conflicts approve ID --proposal HASH` with the hash it prints")
    console.print("show one: forkflow conflicts show ID; settle it: forkflow conflicts resolve ID --file FILE")


def group_conflicts(rows: list[crecords.ConflictInfo]) -> list[list[crecords.ConflictInfo]]:
    """One group per upstream commit (a commit conflicting in 9 files is one thing to settle)."""
    groups: dict[str, list[crecords.ConflictInfo]] = {}
    for x in rows:
        groups.setdefault(x.upstream_sha, []).append(x)
    return list(groups.values())


def conflict_owners(c: Context) -> Callable[[str, list[str]], str]:
    """Who owns a conflict, as the fork says it (conflicts/owners.py): `[owners]`, its chain's
    owner, the fork's own CODEOWNERS entries (not those inherited from upstream), else the authors
    of the fork's own commits to its paths; '-' when nobody is found."""
    from forkflow import wiring
    from forkflow.conflicts.owners import owner_finder
    from forkflow.landing.settings import ingest_settings

    chains = {spec.name: spec.owner for spec in ingest_settings(c.config).chains if spec.owner}
    finder = owner_finder(c.repo, c.config, wiring.ledger(c), chains)

    def owner(chain: str, paths: list[str]) -> str:
        return ", ".join(finder.paths(chain, paths).people) or "-"
    return owner
