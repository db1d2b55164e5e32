"""`forkflow conflicts`: what no resolver settled, worked by a person.

`conflicts` lists the open ones with their owners (the fork's people, `conflicts/owners.py`) and
the upstream commit's age; `next` shows the oldest; `show` prints the conflicted regions with
context and line numbers beside the upstream commit's change and the fork's own change (only the
hunks that touch the regions) and any proposal; `edit` writes the marked file to a scratch folder
and opens $EDITOR; `resolve` takes it back through the guardrails; `approve` records a proposal.
"""
from __future__ import annotations

import getpass
import os
import re
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from forkflow.cli.common import JsonOpt, RepoOpt, StoreOpt, console, print_json, short
from forkflow.conflicts import approval, guardrails
from forkflow.conflicts import owners as cowners
from forkflow.conflicts import records as crecords
from forkflow.conflicts import regions as cregions
from forkflow.conflicts.case import case_from_marked
from forkflow.conflicts.classify import ConflictKind
from forkflow.conflicts.rules_view import proposal_diff, rule_rows, stored_or_backtested
from forkflow.conflicts.settle import by_hand, has_file_resolution
from forkflow.conflicts.provenance import note_people
from forkflow.context import Context, open_context
from forkflow.errors import ForkflowError, UserError
from forkflow.ledger.decisions import person
from forkflow.render import group_conflicts
from forkflow.state import state_dir

conflicts_app = typer.Typer(help="Conflicts no resolver settled, kept for a person.", no_args_is_help=False)

OwnerOpt = Annotated[str | None, typer.Option("--owner", help="Only the conflicts this person owns (a login, "
                                                               "a name or part of one).")]
MAX_ATTEMPTS_SHOWN = 10
MAX_RESOLUTION = 64 * 2**20  # bytes `conflicts resolve --file` reads at most
SCRATCH = "conflicts"  # <state dir>/conflicts/<id>/<file name>: where `conflicts edit` writes
_WHERE = "written-to"  # in the scratch folder: the file `edit --to` wrote, for `resolve`
_STYLE = {cregions.OPEN: "bold yellow", cregions.BASE_MARK: "bold yellow", cregions.SEP: "bold yellow",
          cregions.CLOSE: "bold yellow", cregions.OURS: "cyan", cregions.BASE: "dim", cregions.THEIRS: "magenta"}


# -- reading ------------------------------------------------------------------------------
class _Owned:
    """Owners and ages of the open conflicts of one fork (the ledger is read once)."""

    def __init__(self, c: Context) -> None:
        from forkflow import wiring
        from forkflow.landing.settings import ingest_settings

        chains = {spec.name: spec.owner for spec in ingest_settings(c.config).chains if spec.owner}
        self.finder = cowners.owner_finder(c.repo, c.config, wiring.ledger(c), chains,
                                           state_dir(c.repo) / "cache" / "owners.json")
        self.repo = c.repo
        self.dates: dict[str, int] = {}
        self.now = cowners.upstream_now(c.repo, c.config)  # ages are counted to upstream's tip

    def of(self, x: crecords.ConflictInfo) -> cowners.Owners:
        return self.finder.conflict(x)

    def date(self, rows: list[crecords.ConflictInfo]) -> Callable[[crecords.ConflictInfo], int | None]:
        missing = [x.upstream_sha for x in rows if x.upstream_sha not in self.dates]
        if missing:
            self.dates.update(cowners.commit_dates(self.repo, missing))
        return lambda x: self.dates.get(x.upstream_sha)

    def done(self) -> None:
        try:
            self.finder.save()
        except OSError:  # only a cache: a read-only state folder costs the next command time, nothing else
            pass


def _oldest_first(rows: list[crecords.ConflictInfo], date: Callable[[crecords.ConflictInfo], int | None]
                  ) -> list[crecords.ConflictInfo]:
    return sorted(rows, key=lambda x: (date(x) is None, date(x) or 0, x.id))


def _owned(rows: list[crecords.ConflictInfo], owned: _Owned, who: str | None) -> list[crecords.ConflictInfo]:
    return rows if who is None else [x for x in rows if owned.of(x).names(who)]


@conflicts_app.callback(invoke_without_command=True)
def conflicts_list(
    ctx: typer.Context,
    all_: Annotated[bool, typer.Option("--all", help="Resolved ones too.")] = False,
    owner: OwnerOpt = None,
    json_out: JsonOpt = False, repo: RepoOpt = Path("."), store: StoreOpt = None,
) -> None:
    """List open conflicts, oldest upstream commit first, with their owners (`forkflow conflicts
    next` shows the oldest, `show ID` one)."""
    if ctx.invoked_subcommand is not None:
        return
    c = open_context(repo, store)
    with c.store.session_scope() as s:
        rows = crecords.conflicts(s, c.fork_id, None if all_ else "open")
        waiting = {x.id for x in rows if x.status == "open" and approval.proposal(s, c.fork_id, x) is not None}
    owned = _Owned(c)
    date = owned.date(rows)
    rows = _oldest_first(_owned(rows, owned, owner), date)
    owned.done()
    if json_out:
        print_json({"conflicts": [_conflict_json(x, with_text=False) | _owner_json(owned.of(x), date(x), owned.now)
                                  | {"proposal_waiting": x.id in waiting} for x in rows]})
        return
    _render_list(rows, waiting, owned, date, owner)


def _owner_json(o: cowners.Owners, when: int | None, now: int | None) -> dict[str, object]:
    return {"owner": ", ".join(o.people) or "-", "owners": list(o.people), "owners_source": o.source or None,
            "upstream_date": when, "age_days": cowners.age_days(when, now)}


def _age(when: int | None, now: int | None) -> str:
    days = cowners.age_days(when, now)
    return "-" if days is None else f"{days} d"


def _render_list(rows: list[crecords.ConflictInfo], waiting: set[int], owned: _Owned,
                 date: Callable[[crecords.ConflictInfo], int | None], who: str | None) -> None:
    if not rows:
        console.print("no open conflicts" if who is None else
                      f"no open conflict is owned by {escape(who)}; `forkflow conflicts` lists them all")
        return
    t = Table(title="conflicts kept for a person, by upstream commit, oldest first")
    for col in ("ids", "upstream", "age", "subject", "paths", "kind", "owners (from)", "status"):
        t.add_column(col, overflow="fold")
    for group in group_conflicts(rows):
        x = group[0]
        paths = [g.path for g in group]
        status = "proposal waits" if any(g.id in waiting for g in group) else x.status
        t.add_row(" ".join(str(g.id) for g in group), short(x.upstream_sha), _age(date(x), owned.now), escape(x.subject[:60]),
                  escape(", ".join(paths[:4]) + (f" +{len(paths) - 4} more" if len(paths) > 4 else "")),
                  ", ".join(sorted({g.kind for g in group})), escape(owned.finder.commit(group).describe()), status)
    console.print(t)
    if waiting:
        console.print("a proposal waits for a person (an agent's, or a rule's not yet trusted on this fork): read "
                      "it with `forkflow conflicts show ID`, then `forkflow conflicts approve ID --proposal HASH`",
                      soft_wrap=True)
    console.print("work the oldest: forkflow conflicts next; one: forkflow conflicts show ID, then "
                  "forkflow conflicts edit ID and forkflow conflicts resolve ID", soft_wrap=True)


def _conflict_json(x: crecords.ConflictInfo, with_text: bool = True) -> dict[str, object]:
    d: dict[str, object] = {"id": x.id, "upstream_sha": x.upstream_sha, "subject": x.subject, "path": x.path,
                            "kind": x.kind, "chain": x.chain, "base": x.base_sha, "status": x.status,
                            "seen": x.seen, "tried": list(x.tried), "last_seen": x.last_seen.isoformat()}
    if with_text:
        d["conflicted"] = x.marked
    return d


def _get_conflict(repo: Path, store: str | None, cid: int) -> tuple[Context, crecords.ConflictInfo]:
    c = open_context(repo, store)
    with c.store.session_scope() as s:
        x = crecords.conflict(s, c.fork_id, cid)
    if x is None:
        raise UserError(f"no conflict with id {cid}; list them with `forkflow conflicts --all`")
    return c, x


def _on_tip(c: Context, x: crecords.ConflictInfo) -> tuple[crecords.ConflictInfo, str]:
    """The conflict as it stands on the fork's tip now: picked again there when the fork moved
    since it was kept, and kept again (with any other file of the commit that conflicts there
    now) when that differs, since that is what the next ingest meets and what a resolution must
    match.  A note says what changed, or that the path no longer conflicts."""
    tip = c.repo.resolve(c.config.fork_ref)
    if x.status != "open" or tip is None:
        return x, ""
    found = cregions.on_tip(c.repo, x, tip)
    if found is None or found == [x]:
        return x, ""
    with c.store.session_scope() as s:
        # every record of the commit, settled ones too: one a person resolved on this tip stays resolved
        kept = {y.path: y for y in crecords.conflicts(s, c.fork_id, None) if y.upstream_sha == x.upstream_sha}
        changed = [y for y in found if y.path not in kept or (kept[y.path].marked, kept[y.path].key, kept[y.path].kind)
                   != (y.marked, y.key, y.kind)]
        gone = [y for path, y in kept.items() if path not in {z.path for z in found} and y.status == "open"]
        for y in gone:  # merges cleanly on the tip now: nothing left to settle in this file
            crecords.set_conflict_status(s, y.id, "resolved")
        for y in changed:
            crecords.upsert_conflict(s, c.fork_id, upstream_sha=y.upstream_sha, subject=y.subject, path=y.path,
                                     kind=y.kind, chain=y.chain, base_sha=y.base_sha, key=y.key, marked=y.marked,
                                     tried=y.tried)
        now = crecords.conflict(s, c.fork_id, x.id) or x
    added = [y.path for y in changed if y.path not in kept]
    notes = []
    if x.path not in {y.path for y in found}:
        notes.append(f"{short(x.upstream_sha)} no longer conflicts in {x.path} on the fork's tip {short(tip)} "
                     "(closed): " + ("re-run its unit (forkflow ingest --unit ID) or forkflow ingest --land"
                                     if not found else "settle its other files"))
    elif any(y.path == x.path for y in changed):
        notes.append(f"the fork's file changed since this conflict was kept: shown on its tip {short(tip)}")
    if added:
        notes.append(f"on the fork's tip {short(tip)} it also conflicts in {', '.join(added)} (kept now)")
    return now, "; ".join(notes)


# -- show / next ---------------------------------------------------------------------------
@conflicts_app.command("show")
def conflicts_show(cid: Annotated[int, typer.Argument(help="Conflict id from `forkflow conflicts`.")],
                   full: Annotated[bool, typer.Option("--full", help="Print the whole file with markers, "
                                                      "not only the regions.")] = False,
                   json_out: JsonOpt = False, repo: RepoOpt = Path("."), store: StoreOpt = None) -> int:
    """Print one conflict: its regions with context and line numbers, the upstream commit's change
    and the fork's own change near them, what each resolver said, any proposal."""
    c, x = _get_conflict(repo, store, cid)
    _show(c, x, full, json_out)
    return 0


@conflicts_app.command("next")
def conflicts_next(owner: OwnerOpt = None, full: Annotated[bool, typer.Option("--full", help="The whole file.")] = False,
                   json_out: JsonOpt = False, repo: RepoOpt = Path("."), store: StoreOpt = None) -> int:
    """Show the open conflict of the oldest upstream commit (of one owner's, with --owner); a
    commit a person decided on (`forkflow decide`) is passed over."""
    from forkflow.ledger.records import recorded_decisions
    from forkflow.models import Decider

    c = open_context(repo, store)
    with c.store.session_scope() as s:
        rows = crecords.conflicts(s, c.fork_id, "open")
        # a commit a person decided on (skip, defer, won't port) waits on nobody
        decided = {d.sha for d in recorded_decisions(s, c.fork_id) if d.source is Decider.PERSON}
    rows = [x for x in rows if x.upstream_sha not in decided]
    owned = _Owned(c)
    rows = _oldest_first(_owned(rows, owned, owner), owned.date(rows))
    if not rows:
        owned.done()
        if json_out:
            print_json({"conflict": None})
        else:
            console.print("no open conflicts" if owner is None else
                          f"no open conflict is owned by {escape(owner)}; `forkflow conflicts` lists them all")
        return 0
    _show(c, rows[0], full, json_out, owned, left=len(rows) - 1)
    return 0


def _show(c: Context, x: crecords.ConflictInfo, full: bool, json_out: bool, owned: _Owned | None = None,
          left: int | None = None) -> None:
    x, moved = _on_tip(c, x)
    with c.store.session_scope() as s:
        attempts = [a for a in crecords.attempts(s, c.fork_id, x.upstream_sha) if a.path == x.path]
        unit = _unit_of(s, c.fork_id, x.upstream_sha)
        others = [y for y in crecords.conflicts(s, c.fork_id, "open") if y.upstream_sha == x.upstream_sha and y.id != x.id]
    waiting = _waiting_proposal(c, x)
    record = _record(c, waiting.rule) if waiting is not None and waiting.rule else None
    owned = owned or _Owned(c)
    who, when = owned.of(x), owned.date([x])(x)
    owned.done()
    view = cregions.three_way(c.repo, x)
    diff = proposal_diff(x, waiting.content) if waiting is not None else ""
    if json_out:
        doc = _conflict_json(x) | _owner_json(who, when, owned.now) | {"agent_attempts": [
            {"backend": a.backend, "outcome": a.outcome, "reason": a.reason, "duration_ms": a.duration_ms}
            for a in attempts]} | {"proposal": None if waiting is None else {
                "attempt_id": waiting.attempt_id, "hash": waiting.digest, "backend": waiting.backend,
                "rule": waiting.rule or None, "record": record, "diff": diff, "content": waiting.content}}
        doc |= {"region_count": view.regions, "regions": view.regions_json(), "fork_point": view.fork_point or None,
                "upstream_change": view.upstream.to_json(), "fork_change": view.fork.to_json(),
                "unit": unit, "scratch": str(_scratch_file(c, x)),
                "same_commit": [{"id": y.id, "path": y.path, "kind": y.kind} for y in others],
                "note": moved or None}
        print_json(doc if left is None else {"conflict": doc, "more_open": left})
        return
    console.print(f"conflict {x.id} ({x.status}): {x.kind} in [bold]{escape(x.path)}[/]"
                  + (f", {view.regions} region(s)" if view.regions else ""), soft_wrap=True)
    console.print(f"upstream {x.upstream_sha}  {escape(x.subject)}", soft_wrap=True)
    console.print(f"  {_age(when, owned.now)} old; owners: {escape(who.describe())}", soft_wrap=True, highlight=False)
    console.print(f"chain {escape(x.chain) or '-'}, picked onto {short(x.base_sha)}, seen {x.seen} time(s)"
                  + (f", landing unit {unit}" if unit else ""), soft_wrap=True)
    if moved:
        console.print(f"[yellow]note:[/] {escape(moved)}", soft_wrap=True, highlight=False)
    if others:
        console.print(f"this upstream commit also waits on conflict(s) "
                      f"{', '.join(f'{y.id} ({escape(y.path)})' for y in others)}", soft_wrap=True, highlight=False)
    for line in x.tried:
        console.print(f"  tried {escape(line)}", soft_wrap=True)
    if len(attempts) > MAX_ATTEMPTS_SHOWN:
        console.print(f"  agent: {len(attempts) - MAX_ATTEMPTS_SHOWN} earlier attempt(s) not shown (--json lists all)")
    for a in attempts[-MAX_ATTEMPTS_SHOWN:]:
        console.print(f"  agent attempt ({escape(a.backend)}, {a.duration_ms / 1000:.1f}s): {a.outcome}: "
                      f"{escape(a.reason)}", soft_wrap=True)
    if x.marked and (full or not view.excerpts):
        console.rule("conflicted file (fork | base | upstream)")
        console.out(x.marked, highlight=False)
    elif view.excerpts:
        _print_regions(view)
        _print_change(view.upstream)
        _print_change(view.fork)
    if waiting is not None and waiting.rule:
        console.rule(f"rule proposal #{waiting.attempt_id}, hash {waiting.digest}: read it before approving")
        console.print(f"rule {escape(waiting.rule)}", soft_wrap=True)
        console.print(f"its record on this fork: {escape(record or 'none')} (`forkflow conflicts rules`)", soft_wrap=True)
        console.rule("the proposal against the fork's file")
        _print_diff(diff or "(the fork's file as it is)")
    elif waiting is not None:
        console.rule(f"agent proposal #{waiting.attempt_id} ({escape(waiting.backend)}), hash {waiting.digest}: "
                     "read it before approving")
        _print_diff(diff) if diff else console.out(waiting.content, highlight=False)
    if waiting is not None:
        console.print(f"approve it (the next `forkflow ingest` picks it and runs L1): "
                      f"forkflow conflicts approve {x.id} --proposal {waiting.digest}", soft_wrap=True)
    if has_file_resolution(x):
        console.print(f"settle it: forkflow conflicts edit {x.id} (writes the marked file, opens $EDITOR), then "
                      f"forkflow conflicts resolve {x.id}", soft_wrap=True)
    else:
        console.print(escape(f"settle it {by_hand(x, c.config.fork_branch)}"), soft_wrap=True)
    # the fork may not want the commit at all (a revert of a change it never had, a version bump)
    console.print(f"or decide not to take it: forkflow decide {short(x.upstream_sha)} --skip|--wont-port|--defer "
                  "--reason TEXT", soft_wrap=True, highlight=False)
    if left:
        console.print(f"{left} more open conflict(s) after this one", highlight=False)


def _print_regions(view: cregions.ThreeWay) -> None:
    for e in view.excerpts:
        names = ", ".join(str(sp.index) for sp in e.spans)
        _heading(f"region {names} of {view.regions}: lines {e.first}-{e.last} of the marked file")
        width = len(str(e.last))
        for line in e.lines:
            row = Text(f"{line.no:>{width}} ", style="dim")
            row.append(line.text, style=_STYLE.get(line.kind, ""))
            console.print(row, soft_wrap=True, highlight=False)


def _print_change(ch: cregions.Change) -> None:
    if not ch.available:
        _heading(f"{ch.what}: not available in this repository")
        return
    shown = f"{ch.touched} of {ch.total} hunk(s) touch the regions" if ch.total else "no change to the file"
    _heading(f"{ch.what}: {shown}")
    for h in ch.hunks:
        _print_diff(h.text)


def _heading(text: str) -> None:
    """A rule with its text whole (console.rule cuts a long one to the terminal's width)."""
    line = Text("── ", style="bold")
    line.append(text, style="bold")
    line.append(" " + "─" * max(3, console.width - len(text) - 4), style="bold")
    console.print(line, soft_wrap=True, highlight=False, crop=False)


def _print_diff(text: str) -> None:
    for line in text.splitlines():
        style = ("cyan" if line.startswith("@@") else "green" if line.startswith("+") and not line.startswith("+++")
                 else "red" if line.startswith("-") and not line.startswith("---") else "")
        console.print(Text(line, style=style), soft_wrap=True, highlight=False)


def _unit_of(s: object, fid: int, sha: str) -> int | None:
    """The newest landing unit that waits with `sha` (what `forkflow ingest --unit ID` re-runs)."""
    from sqlalchemy.orm import Session

    from forkflow.landing import records as landing_records
    from forkflow.models import RETRYABLE_STATES, UnitState

    assert isinstance(s, Session)
    waiting = [u for u in landing_records.units(s, fid, RETRYABLE_STATES)
               if u.status is not UnitState.PASSED and any(m == sha for m, _ in u.members)]
    return waiting[-1].id if waiting else None


# -- edit / resolve -----------------------------------------------------------------------
_NAME = re.compile(r"[^A-Za-z0-9._+-]")


def _scratch_file(c: Context, x: crecords.ConflictInfo) -> Path:
    """<state dir>/conflicts/<id>/<the file's name>; the name only, made safe (the path is upstream's)."""
    name = _NAME.sub("_", x.path.rsplit("/", 1)[-1]).lstrip(".") or "file"
    return state_dir(c.repo) / SCRATCH / str(x.id) / name


def _written(c: Context, x: crecords.ConflictInfo) -> Path:
    """Where `conflicts edit` last wrote the conflict's file (its --to, else the scratch folder)."""
    scratch = _scratch_file(c, x)
    pointer = scratch.parent / _WHERE
    try:
        named = pointer.read_text(encoding="utf-8").strip()
    except OSError:
        return scratch
    return Path(named) if named else scratch


@conflicts_app.command("edit")
def conflicts_edit(
    cid: Annotated[int, typer.Argument(help="Conflict id.")],
    to: Annotated[Path | None, typer.Option("--to", help="Write the file here (a file, or a folder to put it "
                                                         "in) instead of forkflow's scratch folder.")] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="Write the marked file again over your edits.")] = False,
    no_edit: Annotated[bool, typer.Option("--no-edit", help="Only write the file; do not open $EDITOR.")] = False,
    repo: RepoOpt = Path("."), store: StoreOpt = None,
) -> int:
    """Write the conflicted file with its markers where you can edit it, and open $EDITOR on it;
    `forkflow conflicts resolve ID` then takes it back."""
    c, x = _get_conflict(repo, store, cid)
    if x.status != "open":
        raise UserError(f"conflict {x.id} is {x.status}; only an open conflict is edited "
                        "(`forkflow conflicts` lists them)")
    if not has_file_resolution(x):
        raise UserError(f"conflict {x.id} is a {x.kind} conflict with no text regions to edit; settle it "
                        f"{by_hand(x, c.config.fork_branch)}")
    x, moved = _on_tip(c, x)
    if "no longer conflicts in" in moved:  # it merges cleanly on the tip now: nothing to edit
        raise UserError(moved)
    if moved:
        console.print(f"[yellow]note:[/] {escape(moved)}", soft_wrap=True, highlight=False)
    scratch = _scratch_file(c, x)
    target = scratch if to is None else (to / scratch.name if to.is_dir() else to)
    target = target.absolute()
    kept = False
    try:
        if target.exists() and not fresh and target.read_bytes() != x.marked.encode("utf-8", "surrogateescape"):
            kept = True  # a person's edits from an earlier `edit`: never written over without --fresh
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            tmp.write_bytes(x.marked.encode("utf-8", "surrogateescape"))
            os.replace(tmp, target)
        scratch.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        (scratch.parent / _WHERE).write_text(str(target) + "\n", encoding="utf-8")
    except OSError as e:
        raise UserError(f"cannot write {target} ({e.strerror}); pass a writable place with --to") from e
    console.print(("kept your edits in " if kept else "wrote the conflicted file to ") + escape(str(target))
                  + (" (--fresh writes the marked file again)" if kept else ""), soft_wrap=True, highlight=False)
    editor = os.environ.get("EDITOR", "").strip()
    if editor and not no_edit:
        _run_editor(editor, target)
    console.print(f"edit between the markers and remove them, then: forkflow conflicts resolve {x.id}",
                  soft_wrap=True, highlight=False)
    return 0


conflicts_app.command("checkout", help="The same as `forkflow conflicts edit`.")(conflicts_edit)


def _run_editor(editor: str, file: Path) -> None:
    """$EDITOR on `file`: split like a shell would, run without one (no expansion, no `;`)."""
    try:
        argv = shlex.split(editor)
    except ValueError as e:
        raise UserError(f"$EDITOR ({editor[:80]!r}) does not parse ({e}); fix it, or edit {file} yourself") from e
    if not argv:
        return
    try:
        done = subprocess.run([*argv, str(file)], check=False)
    except OSError as e:
        raise UserError(f"cannot start $EDITOR {argv[0]!r} ({e.strerror}); edit {file} yourself, or set "
                        "EDITOR") from e
    if done.returncode != 0:
        raise UserError(f"$EDITOR exited {done.returncode}; your file is at {file}; when it is settled run "
                        "`forkflow conflicts resolve` with the conflict's id")


@conflicts_app.command("resolve")
def conflicts_resolve(
    cid: Annotated[int, typer.Argument(help="Conflict id.")],
    file: Annotated[Path | None, typer.Option("--file", help="The resolved file (default: the one "
                                                             "`forkflow conflicts edit ID` wrote).")] = None,
    repo: RepoOpt = Path("."), store: StoreOpt = None,
) -> int:
    """Record a person's resolution; the next `forkflow ingest` uses it (recorded resolutions)."""
    c, x = _get_conflict(repo, store, cid)
    if not has_file_resolution(x):
        raise UserError(f"conflict {x.id} is a {x.kind} conflict with no text regions, which --file cannot "
                        f"settle; settle it {by_hand(x, c.config.fork_branch)}")
    from_edit = file is None
    if file is None:
        file = _written(c, x)
        if not file.is_file():
            raise UserError(f"no --file, and no file from `forkflow conflicts edit {x.id}`; run that first, "
                            "or pass the resolved file with --file")
    try:
        with file.open("rb") as f:  # capped: `--file /dev/zero` used to read without end
            data = f.read(MAX_RESOLUTION + 1)
    except OSError as e:
        raise UserError(f"cannot read {file} ({e.strerror}); pass the resolved file with --file") from e
    if len(data) > MAX_RESOLUTION:
        raise UserError(f"{file} is over {MAX_RESOLUTION // 2**20} MiB; pass the resolved file with --file")
    texts = resolution_regions(x, data, _fork_file(c, x))
    with c.store.session_scope() as s:
        crecords.save_resolution(s, x.key, x.path, texts, "person")
        note_people(s, x.key, decided_by=person(c.repo) or _user())  # the landed commit's Resolved-By
        crecords.set_conflict_status(s, x.id, "resolved")
    with c.store.session_scope() as s:
        left = [y.id for y in crecords.conflicts(s, c.fork_id, "open") if y.upstream_sha == x.upstream_sha]
        unit = _unit_of(s, c.fork_id, x.upstream_sha)
    if from_edit:
        _clean_scratch(c, x)
    console.print(f"recorded; forkflow ingest uses it for {short(x.upstream_sha)} {escape(x.path)}", soft_wrap=True)
    if left:
        console.print(f"{short(x.upstream_sha)} still waits on conflict(s) {' '.join(map(str, left))}: "
                      f"forkflow conflicts edit {left[0]}", soft_wrap=True, highlight=False)
    else:
        land = f"forkflow ingest --unit {unit}" if unit else "forkflow ingest --land"
        console.print(f"land it: {land} (picks with it, runs L1, lands if it passes)", soft_wrap=True,
                      highlight=False)
    return 0


def _clean_scratch(c: Context, x: crecords.ConflictInfo) -> None:
    """Remove the scratch folder `edit` made (a file it wrote elsewhere with --to stays)."""
    scratch = _scratch_file(c, x)
    for f in (scratch, scratch.parent / _WHERE):
        try:
            f.unlink()
        except OSError:
            pass
    try:
        scratch.parent.rmdir()
    except OSError:
        pass


def _fork_file(c: Context, x: crecords.ConflictInfo) -> bytes | None:
    """The fork's own file on the tip the conflict was picked onto: what `ingest` checks the
    result against (None when that tip lacks it)."""
    try:
        return c.repo.git_bytes("cat-file", "blob", f"{x.base_sha}:{x.path}")
    except ForkflowError:
        return None


def resolution_regions(x: crecords.ConflictInfo, data: bytes, fork_file: bytes | None = None) -> list[str]:
    """The resolved text of each region of a conflict, or a UserError naming the guardrail it fails
    (the same checks a resolver's proposal passes, the parse check against `fork_file` as `ingest`
    makes it)."""
    case = case_from_marked(x.upstream_sha, x.subject, x.path, ConflictKind(x.kind), x.marked, x.key)
    assert case is not None, "has_file_resolution(x) first"
    verdict = guardrails.check(case, data, fork_file)
    if not verdict.ok:
        raise UserError(f"refused: {verdict.reason} ({x.path}); start from `forkflow conflicts edit {x.id}`, "
                        "edit only between the markers, remove them, and keep the file parsing")
    return list(verdict.regions)


# -- rules / approve ------------------------------------------------------------------------
def _record(c: Context, rule: str) -> str:
    """The rule's record on this fork, as the last backtest stored it."""
    from forkflow.conflicts.rulebook import load_book

    with c.store.session_scope() as s:
        found = load_book(s, c.fork_id)
    return found[0].record(rule).describe() if found is not None else "not backtested yet"


@conflicts_app.command("rules")
def conflicts_rules(
    refresh: Annotated[bool, typer.Option("--refresh", help="Backtest again on the fork's past picks.")] = False,
    json_out: JsonOpt = False, repo: RepoOpt = Path("."), store: StoreOpt = None,
) -> int:
    """Each resolver rule's record on this fork (its past answers against the files the fork's
    engineers committed), and whether its answers land alone or wait for a person."""
    c = open_context(repo, store)
    book, when, settings = stored_or_backtested(c.repo, c.config, c.store, c.fork_id, refresh)
    rows = rule_rows(book, settings)
    if json_out:
        print_json({"min_precision": settings.min_precision, "min_cases": settings.min_cases,
                    "files": book.files, "computed_at": when.isoformat(), "rules": rows})
        return 0
    console.print(f"{book.files} past conflicted file(s) replayed ({when:%Y-%m-%d %H:%M} UTC); a rule's answer "
                  f"lands alone at >= {100 * settings.min_precision:g}% precision over >= {settings.min_cases} "
                  "cases (\\[trust] in forkflow.toml), else it is a proposal a person approves", soft_wrap=True)
    if not rows:
        console.print("no rule has answered on this fork's past picks yet: every rule proposes")
        return 0
    console.print(f"{'cases':>6} {'identical':>9} {'different':>9} {'precision':>9}  {'status':<9} rule", highlight=False)
    for r in rows:
        prec = "-" if r["precision"] is None else f"{100 * float(str(r['precision'])):.0f}%"
        console.print(f"{r['cases']:>6} {r['identical']:>9} {r['different']:>9} {prec:>9}  {r['status']:<9} "
                      f"{escape(str(r['rule']))}", highlight=False, soft_wrap=True)
    return 0


def _waiting_proposal(c: Context, x: crecords.ConflictInfo) -> approval.Proposal | None:
    if x.status != "open":
        return None
    with c.store.session_scope() as s:
        return approval.proposal(s, c.fork_id, x)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        return "unknown user"


@conflicts_app.command("approve")
def conflicts_approve(
    cid: Annotated[int, typer.Argument(help="Conflict id.")],
    proposal: Annotated[str | None, typer.Option(
        "--proposal", help="The proposal's hash, as `forkflow conflicts show ID` prints it.")] = None,
    repo: RepoOpt = Path("."), store: StoreOpt = None,
) -> int:
    """Approve the agent's proposal for a conflict (read it in `forkflow conflicts show ID`); the
    next `forkflow ingest` picks with it and runs L1."""
    c = open_context(repo, store)
    with c.store.session_scope() as s:
        x, p = approval.approve(s, c.fork_id, cid, person(c.repo) or f"{_user()} (cli)", proposal,
                                lambda info: _fork_file(c, info))
    console.print(f"approved proposal {p.digest}; `forkflow ingest --land` will use it for "
                  f"{short(x.upstream_sha)} {escape(x.path)}")
    return 0


def register(app: typer.Typer) -> None:
    app.add_typer(conflicts_app, name="conflicts")
