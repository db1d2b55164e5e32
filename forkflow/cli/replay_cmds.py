"""`forkflow replay`: what forkflow would have done, step by step, over the fork's own history."""
from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from forkflow.cli.common import JsonOpt, RepoOpt, StoreOpt, clean_text, console, print_json
from forkflow.cli.progress import PhaseBar, progress_bar
from forkflow.context import open_context
from forkflow.replay.html import headline_cells
from forkflow.render import EXIT_FAILED
from forkflow.replay.model import Report, Step, iso_day, parse_day, parse_every


class _BarReporter(PhaseBar):
    def start(self, total: int) -> None:
        self.progress.update(self.task, description="replaying", total=total, completed=0)

    def step_done(self, step: Step) -> None:
        how = " (cached)" if step.cached else ""
        self.progress.update(self.task, advance=1, description=f"{iso_day(step.at)}{how}")


def replay(
    since: Annotated[str, typer.Option("--since", help="First step, YYYY-MM-DD.")],
    until: Annotated[str, typer.Option("--until", help="Last step, YYYY-MM-DD.")],
    every: Annotated[str, typer.Option("--every", help="Step length: day, week, 2w, 3d, 12h.")] = "week",
    gate: Annotated[str, typer.Option("--gate", help="L1 command each landing unit must pass (default: "
                                      "none, merge-ability only).")] = "",
    independent: Annotated[bool, typer.Option("--independent", help="Start each step from the fork as it "
                                              "really was, not from forkflow's branch of the step before.")] = False,
    jobs: Annotated[int, typer.Option("--jobs", min=1, help="With --independent: steps computed at once, "
                                      "one process each.")] = 1,
    html: Annotated[Path | None, typer.Option("--html", help="Write a self-contained HTML report here.")] = None,
    json_out: JsonOpt = False, repo: RepoOpt = Path("."), store: StoreOpt = None,
) -> int:
    """Replay the fork's own history: real vs forkflow, days behind and backlog, step by step."""
    from forkflow.replay.driver import Request
    from forkflow.replay.driver import replay as run_replay

    request = Request(parse_day(since, "--since"), parse_day(until, "--until"), parse_every(every), gate,
                      independent=independent)
    ctx = open_context(repo, store)
    with progress_bar(console, disable=json_out) as bar:
        report = run_replay(ctx.repo, ctx.config, ctx.store, ctx.fork_id, request, _BarReporter(bar),
                            jobs=jobs)
    if html is not None:
        from forkflow.replay.html import render_html

        html.write_text(render_html(report, ctx.fork_name), encoding="utf-8")
    if json_out:
        print_json(report.to_json())
    else:
        render(report)
        if html is not None:
            console.print(f"wrote {html}")
    stopped = [s for s in report.steps if s.stopped]
    if stopped:
        # the gate could not judge forkflow's work there: the replay's figures of those steps
        # are not forkflow's, and an unattended run must not read them as a pass
        first = stopped[0]
        print(clean_text(f"replay: {len(stopped)} step(s) stopped, the first on {iso_day(first.at)}: "
                         + " ".join(first.stopped.split())), file=sys.stderr)
        return EXIT_FAILED
    return 0


def _n(x: float | None, unit: str = "") -> str:
    return "-" if x is None else f"{x:g}{unit}"


def render(report: Report) -> None:
    t = Table(title="forkflow replay: the fork as it was vs after forkflow")
    for col in ("step", "behind", "→ff", "→ff=", "backlog", "→ff", "→ff=", "open", "→ff", "landed", "deferred",
                "waiting", "oldest→ff", "conflicts→ff", "if deferred→ff"):
        t.add_column(col, justify="left" if col == "step" else "right")
    for s in report.steps:
        same = s.after_same_rule
        t.add_row(iso_day(s.at) + ("*" if s.cached else ""), f"{s.real.days_behind:.1f}",
                  f"{s.after.days_behind:.1f}", f"{same.days_behind:.1f}", str(s.real.backlog), str(s.after.backlog),
                  str(same.backlog), str(s.real.open), str(s.after.open), str(len(s.landed)), str(s.deferred),
                  str(s.waiting), *headline_cells(asdict(s.after)))
    console.print(t)
    console.print("days behind, backlog and open (not taken) commits: the fork as it was, then →ff after "
                  "forkflow, →ff= forkflow's branch by the real fork's rule (picks alone); then forkflow's "
                  "oldest open commit (days), open conflicts as commits (files), and days behind were its "
                  "held commits deferred, as `forkflow status` shows them; * = from the cache")
    m = report.summary
    console.print(f"landed by forkflow: {m.landed_commits} upstream commits; lag saved (days, {m.lag_saved_count} "
                  f"the fork took later): median {_n(m.lag_saved_median)}, p90 {_n(m.lag_saved_p90)}; "
                  f"{m.not_taken} not taken by the fork yet")
    console.print(f"same change as the fork's own pick: {m.clean_same} of {m.clean_compared} clean landings; "
                  f"hand-resolved picks resolved the same way: {m.resolved_same} of {m.resolved_compared} "
                  f"({m.resolved_by_forkflow} resolved by forkflow's resolvers)")
    console.print(f"after forkflow: at most {m.max_days_behind_after:g} days behind; backlog no larger than the "
                  f"fork's at {m.steps_backlog_not_larger} of {m.steps} steps; by the real fork's rule: at most "
                  f"{m.max_days_behind_same_rule:g} days behind, backlog no larger at "
                  f"{m.steps_backlog_not_larger_same_rule} of {m.steps}; at the fork's own point, no more "
                  f"untaken at {m.steps_backlog_at_real_point_not_larger} of {m.steps}; {report.wall_seconds:.0f}s")
    for note in report.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")


def register(app: typer.Typer) -> None:
    app.command()(replay)
