"""`forkflow replay`: the fork's own history, step by step, with and without forkflow.

The loop only gathers states and hands them to the engine.  By default forkflow's branch carries
from step to step (the fork's real new commits on top of what forkflow landed, `carry.py`), so
each step's result is cached by the SHAs of every step up to it; with `independent`, each step
starts from the real fork and is cached by its own two SHAs.  A re-run (or a run after an
interruption) recomputes nothing it has.
"""
from __future__ import annotations

import hashlib
import shlex
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from forkflow import __version__
from forkflow.config import Config
from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.ledger.merges import MERGE, intake_of, original_fork_point
from forkflow.ledger.refs import check_repo
from forkflow.models import Disposition, Ledger, Sha
from forkflow.replay import records
from forkflow.replay.carry import carry_forward
from forkflow.replay.engine import ENGINE_VERSION, Engine
from forkflow.replay.model import (
    DEFAULT_GATE_NOTE,
    Report,
    ResolvedPick,
    Step,
    iso_day,
    step_times,
    summarize,
)
from forkflow.replay.scratch import Scratch, has_commit, open_scratch, set_state
from forkflow.replay.step import Point, compute_step
from forkflow.store.session import Store


@dataclass(frozen=True, slots=True)
class Request:
    since: int
    until: int
    every: int
    gate: str = ""
    now: int = 0  # 0: the clock
    independent: bool = False  # each step from the real fork, not from forkflow's carried branch


class Reporter(Protocol):
    def phase(self, text: str) -> None: ...
    def start(self, total: int) -> None: ...
    def step_done(self, step: Step) -> None: ...


class QuietReporter:
    def phase(self, text: str) -> None:
        pass

    def start(self, total: int) -> None:
        pass

    def step_done(self, step: Step) -> None:
        pass


@dataclass(frozen=True, slots=True)
class Takes:
    """The fork's real picks as of its current tip: which fork commit took each upstream commit."""

    by_upstream: dict[str, tuple[str, int]]  # upstream sha -> (fork sha, its date)
    by_fork: dict[str, tuple[str, ...]]  # fork sha -> upstream shas it took, upstream order
    merges: frozenset[str] = frozenset()  # fork merges that took upstream commits (a merge fork's)


CARRIED_NOTE = ("forkflow's branch carries from step to step: the fork's real commits of each step go on top "
                "of what forkflow had landed (its picks of commits forkflow had landed are left out)")


def check_gate(command: str) -> None:
    """A gate command whose program cannot be found is a one-line error before any step runs."""
    try:
        words = shlex.split(command)
    except ValueError as e:
        raise UserError(f"--gate {command!r} cannot be parsed ({e})") from None
    program = words[0] if words else ""
    if not program or (shutil.which(program) is None and not Path(program).is_file()
                       and program not in _SHELL_WORDS):
        raise UserError(f"--gate: command {program or command!r} not found; pass a command on PATH "
                        "(it runs in a work tree of each landing unit, exit 0 passes)")


_SHELL_WORDS = {"true", "false", "test", "[", "exit", "cd", ":", "set", "export"}


def points(repo: Repo, config: Config, request: Request) -> list[Point]:
    """The fork and upstream SHAs of each step, or a UserError for a window that cannot be replayed."""
    fork_tip, upstream_tip = check_repo(repo, config)  # a shallow clone, a missing branch: one line
    fork_point = repo.merge_base(fork_tip, upstream_tip)
    if fork_point is None:
        raise UserError(f"fork branch '{config.fork_branch}' and upstream share no history; check --upstream")
    if intake_of(config) == MERGE:  # each merge moves the merge base: the fork began where it grew from
        fork_point = original_fork_point(repo, fork_tip, upstream_tip) or fork_point
    now = request.now or int(time.time())
    times = step_times(request.since, request.until, request.every, now=now,
                       fork_point_date=repo.commit_date(fork_point))
    _check_moved(repo, config, request, upstream_tip)
    out = []
    for t in times:
        fork = _at(repo, config.fork_ref, t)
        upstream = _at(repo, config.upstream_ref, t)
        if fork is None:
            first = repo.git("log", "--first-parent", "--reverse", "--format=%cs", config.fork_ref).split()
            raise UserError(f"fork branch '{config.fork_branch}' has no commit dated on or before {iso_day(t)} "
                            f"(its history starts {first[0] if first else 'nowhere'}); pass a later --since")
        if upstream is None or repo.merge_base(fork, upstream) is None:
            raise UserError(f"upstream has no commit shared with the fork on or before {iso_day(t)}; "
                            "pass a later --since")
        out.append(Point(t, fork, upstream))
    return out


def _check_moved(repo: Repo, config: Config, request: Request, upstream_tip: Sha) -> None:
    """A fork with no commit of its own in the window (or the step before it) has nothing to compare."""
    start = request.since - request.every
    moved = repo.git("rev-list", "--first-parent", "--count", f"--since={start}", f"--until={request.until}",
                     config.fork_ref, f"^{upstream_tip}").strip()
    if moved == "0":
        newest = iso_day(repo.commit_date(config.fork_ref))
        raise UserError(f"fork branch '{config.fork_branch}' has no commit of its own between {iso_day(start)} "
                        f"and {iso_day(request.until)} (its newest is from {newest}): nothing to compare; pass a "
                        "window in which the fork moved")


def _at(repo: Repo, ref: str, t: int) -> Sha | None:
    """The newest first-parent commit of `ref` dated <= t (committer date)."""
    out = repo.git("rev-list", "--first-parent", "-1", f"--before={t}", ref, check=False).strip()
    return Sha(out) if out else None


class Replay:
    """One replay; each public method is one step of it."""

    def __init__(self, repo: Repo, config: Config, store: Store, fork_id: int, request: Request,
                 reporter: Reporter | None = None, scratch: Scratch | None = None, jobs: int = 1) -> None:
        self.repo, self.config, self.store, self.fork_id = repo, config, store, fork_id
        self.request, self.jobs = request, jobs
        self.reporter = reporter or QuietReporter()
        self.scratch = scratch or open_scratch(repo, config)
        self.engine = Engine(self.scratch.repo, config, self.scratch.store, request.gate,
                             log_dir=self.scratch.root / "logs")
        self.notes: list[str] = []
        self._pids: dict[Sha, str] = {}
        self._settings_key = repr(self.engine.settings)

    def run(self) -> Report:
        start = time.monotonic()
        if self.jobs > 1 and not self.request.independent:
            raise UserError("--jobs computes independent steps at once; carried steps run in order: "
                            "add --independent, or leave out --jobs")
        if self.request.gate:
            check_gate(self.request.gate)
        else:
            self.notes.append(DEFAULT_GATE_NOTE)
        pts = points(self.repo, self.config, self.request)
        run_id = self.start_run()
        self.reporter.phase("reading the fork's own picks")
        takes = self.takes()
        self.reporter.start(len(pts))
        steps: list[Step] = []
        if not self.request.independent:
            self.notes.append(CARRIED_NOTE)
        for raw in (self.steps(pts) if self.request.independent else self.carried_steps(pts, takes)):
            step = self.annotate(raw, takes)
            steps.append(step)
            self.reporter.step_done(step)
        self.reporter.phase("comparing with the fork's hand-resolved picks")
        resolved = self.resolved_picks(takes, pts)
        report = Report(self.request.since, self.request.until, self.request.every, self.request.gate,
                        tuple(steps), summarize(steps, resolved), tuple(r.to_json() for r in resolved),
                        tuple(self.notes), time.monotonic() - start, self.request.independent)
        with self.store.session_scope() as s:
            records.finish_run(s, run_id, report.to_json())
        return report

    def start_run(self) -> int:
        r = self.request
        args = (iso_day(r.since), iso_day(r.until), r.every, r.gate)
        with self.store.session_scope() as s:
            if records.interrupted(s, self.fork_id, *args):
                self.notes.append("resumed an interrupted replay of this window: finished steps come from the cache")
            return records.start_run(s, self.fork_id, *args)

    def _key(self, *parts: str) -> str:
        h = hashlib.sha256()
        for p in (__version__, ENGINE_VERSION, self.request.gate, self._settings_key, *parts):
            h.update(p.encode("utf-8", "surrogateescape") + b"\0")
        return h.hexdigest()

    def _cached(self, key: str) -> Any:
        with self.store.session_scope() as s:
            return records.cached(s, key)

    def _save(self, key: str, kind: str, payload: Any) -> None:
        with self.store.session_scope() as s:
            records.save(s, key, kind, payload)

    def steps(self, pts: Sequence[Point]) -> Iterator[Step]:
        """Each step, from the cache where it is there; the others computed (by `jobs` processes)."""
        keys = {p.at: self._key("step", p.fork, p.upstream) for p in pts}
        hits = {p.at: self._cached(keys[p.at]) for p in pts}
        todo = [p for p in pts if hits[p.at] is None]
        fresh = iter(compute_steps(self, todo, self.jobs))
        for p in pts:
            hit = hits[p.at]
            if hit is not None:
                yield replace(Step.from_json(hit), at=p.at, cached=True)
                continue
            step = next(fresh)
            self._save(keys[p.at], "step", step.to_json())
            yield step

    def carried_steps(self, pts: Sequence[Point], takes: Takes) -> Iterator[Step]:
        """Each step from forkflow's branch as the step before left it, with the fork's new commits on it."""
        keys: list[str] = []
        for p in pts:
            keys.append(self._key("carried", keys[-1] if keys else "", p.fork, p.upstream))
        hits = [self._cached(k) for k in keys]
        first = next((i for i, h in enumerate(hits) if h is None), len(pts))
        if 0 < first < len(pts) and not has_commit(self.scratch, str(hits[first - 1].get("tip", ""))):
            first = 0  # the branch to go on from is gone with the scratch repository: from the start
        landed: set[str] = set()
        before: Step | None = None
        for i, p in enumerate(pts):
            if i < first:
                step = replace(Step.from_json(hits[i]), at=p.at, cached=True)
            else:
                carried = None
                if before is not None:
                    new = self.scratch.repo.git("rev-list", "--first-parent", "--reverse", p.fork,
                                                f"^{before.fork_sha}", f"^{p.upstream}").split()
                    carried = carry_forward(self.engine.picker, Sha(before.tip), [Sha(x) for x in new],
                                            takes.by_fork, landed, keep_merges=intake_of(self.config) == MERGE)
                step = compute_step(self.engine, self.scratch, self.config, p, carried, root=pts[0].fork)
                self._save(keys[i], "step", step.to_json())
            landed |= {x.sha for x in step.landed}
            before = step
            yield step

    def takes(self) -> Takes:
        """Which fork commit took each upstream commit, as of the fork's current tip."""
        repo, config = self.repo, self.config
        fork_tip, upstream_tip = check_repo(repo, config)
        set_state(self.scratch, config, fork_tip, upstream_tip)
        ledger = self.engine.status(self.engine.fork("replay:takes"), fork_tip, upstream_tip)
        dates: dict[str, int] = {c.sha: c.date for c in repo.log(fork_tip, f"^{ledger.fork_point}")}
        found = takes_of(ledger, dates)
        if intake_of(config) != MERGE:
            return found
        return merged_takes(repo, config, ledger, found, self.request.since - self.request.every)

    def annotate(self, step: Step, takes: Takes) -> Step:
        """Each landed commit with the fork's real pick of it, and whether the changes agree."""
        out = []
        self._patch_ids([takes.by_upstream[x.sha][0] for x in step.landed
                         if x.sha in takes.by_upstream and takes.by_upstream[x.sha][0] in takes.by_fork], takes)
        for x in step.landed:
            fork_sha, taken_at = takes.by_upstream.get(x.sha, ("", 0))
            same = ""
            if fork_sha and x.outcome == "applied" and fork_sha not in takes.merges:
                same = self.compare(Sha(fork_sha), takes.by_fork[fork_sha], resolve=False)
            out.append(replace(x, fork_sha=fork_sha, taken_at=taken_at, same=same))
        return replace(step, landed=tuple(out))

    def _patch_ids(self, fork_shas: Sequence[str], takes: Takes) -> None:
        """Patch-ids of the single picks not compared yet, in one git call (not one per pick)."""
        need = [f for f in set(fork_shas) if len(takes.by_fork[f]) == 1 and f not in self._pids
                and self._cached(self._key("compare", f, "False", *takes.by_fork[f])) is None]
        shas = [Sha(x) for f in need for x in (f, takes.by_fork[f][0])]
        self._pids.update(self.scratch.repo.patch_ids(shas))

    def compare(self, fork_sha: Sha, upstream: Sequence[str], *, resolve: bool) -> str:
        key = self._key("compare", fork_sha, str(resolve), *upstream)
        hit = self._cached(key)
        if hit is None:
            hit = self.engine.compare_pick(fork_sha, [Sha(u) for u in upstream], resolve=resolve,
                                           patch_ids=self._pids)
            self._save(key, "compare", hit)
        return str(hit)

    def resolved_picks(self, takes: Takes, pts: Sequence[Point]) -> list[ResolvedPick]:
        """The fork's picks in the window that conflict on their own parent, and what forkflow makes of them."""
        if not pts:
            return []
        first_at = pts[0].at
        out = []
        for fork_sha, ups in takes.by_fork.items():
            when = takes.by_upstream[ups[0]][1]  # the fork commit's date
            if when <= first_at or when > self.request.until + self.request.every:
                continue
            if self.compare(Sha(fork_sha), ups, resolve=False) != "conflict":
                continue
            verdict = self.compare(Sha(fork_sha), ups, resolve=True)
            out.append(ResolvedPick(fork_sha, tuple(ups), "same" if verdict in ("post-image", "patch-id")
                                    else verdict))
        return out


def takes_of(ledger: Ledger, dates: Mapping[str, int]) -> Takes:
    """The fork commit that took each picked upstream commit (its first, when several did)."""
    by_upstream: dict[str, tuple[str, int]] = {}
    by_fork: dict[str, list[str]] = {}
    for e in ledger.entries:
        if e.disposition is not Disposition.PICKED or not e.fork_shas or e.fork_shas[0] not in dates:
            continue
        f = e.fork_shas[0]
        by_upstream[e.commit.sha] = (f, dates[f])
        by_fork.setdefault(f, []).append(e.commit.sha)
    return Takes(by_upstream, {f: tuple(u) for f, u in by_fork.items()})


def merged_takes(repo: Repo, config: Config, ledger: Ledger, takes: Takes, since: int) -> Takes:
    """A merge fork's takes: each upstream commit a first-parent merge of the fork (dated from
    `since` on) brought in, taken by that merge at its date, where no pick took it first."""
    listed = {e.commit.sha for e in ledger.entries}
    rows = repo.git("log", "--first-parent", "--merges", "--reverse", f"--since={since}", "--format=%H %ct %P",
                    config.fork_ref).splitlines()
    by_upstream = dict(takes.by_upstream)
    merges: set[str] = set()
    for row in rows:
        sha, when, first, *others = row.split()
        for u in repo.git("rev-list", *others, f"^{first}").split():
            if u in listed and u not in by_upstream:
                by_upstream[u] = (sha, int(when))
                merges.add(sha)
    return Takes(by_upstream, takes.by_fork, frozenset(merges))


def compute_steps(run: Replay, todo: Sequence[Point], jobs: int) -> Iterator[Step]:
    """The steps in order: in this process, or spread over `jobs` worker processes."""
    if jobs <= 1 or len(todo) <= 1:
        for p in todo:
            yield compute_step(run.engine, run.scratch, run.config, p)
        return
    from forkflow.replay.pool import map_steps

    yield from map_steps(run.repo.path, run.config.root, run.request.gate, todo, jobs)


def replay(repo: Repo, config: Config, store: Store, fork_id: int, request: Request,
           reporter: Reporter | None = None, jobs: int = 1) -> Report:
    """Replay the window on fork `fork_id` of `store`, whose checkout is `repo`; see `Replay`."""
    return Replay(repo, config, store, fork_id, request, reporter, jobs=jobs).run()

