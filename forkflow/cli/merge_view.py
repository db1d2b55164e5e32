"""`forkflow ingest` on a fork whose `[fork] intake` is "merge": the run under the fork lock, and
what it prints (docs/ingest.md, "Forks that merge upstream")."""
from __future__ import annotations

from rich.markup import escape

from forkflow.cli.common import console, print_json, short
from forkflow.context import Context
from forkflow.errors import GitError, UserError
from forkflow.landing.ingest import Mode, check_push_remote
from forkflow.landing.lock import fork_lock
from forkflow.landing.merge_intake import ConflictDesk, MergeReport, merge_intake
from forkflow.landing.settings import ingest_settings
from forkflow.landing.review import review_settings
from forkflow.landing.wired import reviewer_of, select_gate
from forkflow.landing.worktree import refuse_dirty_work_trees
from forkflow.render import EXIT_FAILED, EXIT_NEEDS_PERSON, EXIT_OK, conflict_owners


def merge_ingest(ctx: Context, mode: Mode, until: str | None, push: bool, json_out: bool) -> int:
    """Merge the newest cleanly mergeable upstream commit (dry run: find it only)."""
    settings = ingest_settings(ctx.config)
    if push:
        check_push_remote(ctx.repo, settings)
    if mode is Mode.DRY_RUN:
        report = merge_intake(ctx.repo, ctx.config, None, "dry-run", until, ConflictDesk(ctx.store, ctx.fork_id, False))
    else:
        with fork_lock(ctx.repo, ctx.store, ctx.fork_id) as lease:
            if mode is Mode.LAND:
                refuse_dirty_work_trees(ctx.repo, ctx.config)
            review = review_settings(ctx.config) if mode is Mode.LAND else None
            reviewer = reviewer_of(ctx, review) if review is not None else None
            settled = reviewer.settle() if reviewer is not None else []
            waiting = [detail for name, outcome, detail in settled if outcome == "open" and name.startswith("merge-")]
            gate = select_gate(ctx, settings)
            try:
                if waiting:  # one merge in review at a time: the next one is made on top of it
                    report = merge_intake(ctx.repo, ctx.config, gate, "dry-run", until,
                                          ConflictDesk(ctx.store, ctx.fork_id, False))
                    report.proposed = waiting[0]
                else:
                    report = merge_intake(ctx.repo, ctx.config, gate, mode.value, until,
                                          ConflictDesk(ctx.store, ctx.fork_id, True), proposer=reviewer)
                report.notes[:0] = [f"review {name}: {outcome}: {detail}" for name, outcome, detail in settled]
            finally:
                close = getattr(gate, "close", None)
                if close is not None:
                    close()
            if push and report.landed:
                lease.verify()  # still this fork's one writer (docs/team.md): else stop, push nothing
                _push(ctx, settings.push_remote, report)
    owner = ""
    if report.next_conflict is not None and report.next_conflict.files:
        owner = conflict_owners(ctx)("", list(report.next_conflict.files))
    code = exit_of(report)
    if json_out:
        print_json(report.to_json() | {"owner": owner or None, "exit_code": code})
        return code
    render(report, owner)
    return code


def exit_of(report: MergeReport) -> int:
    if report.passed is False or (report.mode == "land" and report.candidate and not report.landed
                                  and not report.proposed):
        return EXIT_FAILED
    if report.next_conflict is not None or report.proposed:
        return EXIT_NEEDS_PERSON
    return EXIT_OK


def _push(ctx: Context, remote: str, report: MergeReport) -> None:
    ref = ctx.config.fork_ref
    try:
        ctx.repo.git("push", "--quiet", "--porcelain", remote, f"{ref}:{ref}")
    except GitError as e:  # never forced: a shared branch that moved keeps what others pushed
        raise UserError(f"push to '{remote}' failed: {e.reason}; the merge is on {ref} here: fetch {remote}, "
                        f"merge or rebase {ref} on it, and push by hand (or run ingest --land --push again "
                        "once this checkout has the shared branch)") from e
    report.notes.append(f"pushed {ref} to {remote}")


def render(r: MergeReport, owner: str) -> None:
    console.print(f"intake merge: {r.pending} upstream commit(s) after the merge base {short(r.merge_base)}; "
                  f"{r.trials} merge trial(s), {r.seconds:.1f}s", highlight=False)
    if r.target is not None:
        what = {"dry-run": "would merge", "validate": "validated the merge of", "land": "merged"}[r.mode]
        if r.mode == "land" and not r.landed:
            what = "proposed the merge of" if r.proposed else "did not land the merge of"
        console.print(f"{what} {r.merged} commit(s) up to {short(r.target)}"
                      + (f" as {short(r.candidate)}" if r.candidate else "")
                      + (f"; L1: {escape(r.gate)}" if r.gate else ""), highlight=False)
    if r.l1_run is not None:
        console.print(f"L1 run {r.l1_run}: the merge; forkflow triage {r.l1_run}", highlight=False)
    if r.proposed:
        console.print(f"the merge waits for review: {escape(r.proposed)}", highlight=False)
    for path, resolver in sorted(r.resolved_by.items()):
        console.print(f"  resolved {escape(path)} ({escape(resolver)})", highlight=False)
    nxt = r.next_conflict
    if nxt is not None:
        why = escape(nxt.reason) if nxt.reason else "conflicts in " + escape(", ".join(nxt.files[:10])) + (
            f" and {len(nxt.files) - 10} more" if len(nxt.files) > 10 else "")
        console.print(f"next for a person: {short(nxt.sha)} {escape(nxt.subject)}: {why}"
                      + (f" (owner {escape(owner)})" if owner and owner != "-" else ""), highlight=False)
        if not nxt.reason and r.mode != "dry-run":
            console.print("its conflicts are kept: `forkflow conflicts`, then `forkflow conflicts resolve ID --file F`; "
                          "the next `forkflow ingest` merges with that resolution", highlight=False)
    for note in r.notes:
        console.print(escape(note), highlight=False)
