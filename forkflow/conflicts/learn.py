"""Learning how the fork settled conflicts, from its own pick commits.

Each past pick (an upstream commit and the fork commit that took it) is replayed in memory: the
upstream commit picked onto the fork commit's parent.  Where that conflicts, the fork commit's file
is what the fork's engineers made of it; `history.learn` remembers it region by region.
"""
from __future__ import annotations

import atexit
import pickle
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.history import History, learn
from forkflow.conflicts.trust import RuleBook, backtest
from forkflow.children import LEARN_CHILD, python_child, take_early
from forkflow.config import DEFAULT_MARKERS
from forkflow.errors import GitError, UserError
from forkflow.git.commits import ObjectError, committed_file, parents_of
from forkflow.git.reads import quick_reads
from forkflow.git.repo import Repo
from forkflow.conflicts.bare import bare_case
from forkflow.git.pick import MemoryPicker, MissingBlob, PickStatus
from forkflow.ledger.evidence import markers, trailers
from forkflow.models import Sha


@dataclass(frozen=True, slots=True)
class Settled:
    """One conflicted path of a past pick and the file the fork committed (None: it deleted it)."""

    fork_sha: Sha
    case: ConflictCase
    fork: bytes | None


def replay_pick(repo: Repo, picker: MemoryPicker, upstream_sha: Sha, fork_sha: Sha,
                origin: bool = True) -> Iterator[Settled]:
    """The conflicts of picking `upstream_sha` onto `fork_sha`'s parent, each with the fork's file;
    with `origin` False, the cases lack the path at the fork point (what learning does not read:
    a `git merge-base` each was most of a real fork's learning).

    Raises ObjectError when an object is missing (a partial clone, a snapshot without big blobs)."""
    parents = parents_of(picker, fork_sha, strict=True)
    if not parents:
        return
    step = picker.pick(picker.commit_tree(parents[0]), upstream_sha)
    if step.status is not PickStatus.CONFLICT:
        return
    point = repo.merge_base(parents[0], upstream_sha) if origin else None
    for c in step.conflicts:
        try:
            case = bare_case(repo, picker, upstream_sha, c, fork_point=point, origin=origin)
        except MissingBlob:  # a side the clone lacks: nothing to learn from this file
            continue
        path = c.ours.path if c.ours is not None else c.path
        yield Settled(fork_sha, case, committed_file(picker, fork_sha, path))


def learn_from_picks(path: Path, picks: Iterable[tuple[Sha, Sha]],
                     whole: int | None = None) -> tuple[History, list[str]]:
    """A History of every conflict the given (upstream sha, fork sha) picks settled, oldest first,
    and the picks that could not be replayed (with why).  The same replay backtests every resolver
    rule (`conflicts.trust.backtest`): the history's `book`.

    With `whole`, only the newest `whole` picks are replayed whole; an older one only when it
    changes a file the fork's side lacked (a delete/modify, told from paths without a merge): a
    fork settles those the same way for years (upstream's CI workflows it deleted), and the
    newest picks alone hold too few of them to earn the rule its record."""
    repo = Repo(path)
    # the replays' merged files and trees stay in memory, never on disk: 3,100 loose objects a run
    # were written and never read again (and slowed the landing's writes in the same folders)
    picker = MemoryPicker(path, batch_writes=True)
    skipped: list[str] = []
    ordered = list(picks)
    older = len(ordered) - whole if whole is not None else 0

    def replayed() -> Iterator[tuple[str, ConflictCase, bytes | None]]:
        for i, (upstream_sha, fork_sha) in enumerate(ordered):
            try:
                if i < older and not _meets_deletion(picker, upstream_sha, fork_sha):
                    continue
                # the backtest's `lag` rule reads the path at the fork point (a merge-base per conflicted pick)
                for s in list(replay_pick(repo, picker, upstream_sha, fork_sha, origin=True)):
                    yield fork_sha, s.case, s.fork
            except (ObjectError, KeyError, UserError, GitError) as e:  # a marker naming a commit not here
                skipped.append(f"{fork_sha[:10]}: {e}")
            picker.forget_writes(over=LEARN_MEMORY)

    book, history = backtest(replayed())
    history.book = book
    return history, skipped


def _meets_deletion(picker: MemoryPicker, upstream_sha: Sha, fork_sha: Sha) -> bool:
    parents = parents_of(picker, fork_sha, strict=True)
    return parents is not None and len(parents) > 0 \
        and picker.modifies_missing(upstream_sha, picker.commit_tree(parents[0]))


_HISTORIES: dict[str, History] = {}
_AHEAD: dict[str, _Child] = {}  # repository -> its history, being learnt in a child process
LEARN_MEMORY = 64 << 20  # bytes of replayed merges kept in memory before they are dropped
MAX_PAST_PICKS = 400  # the newest picks replayed whole, once per run on its first conflict: 14 s on fbtriton
MAX_SCANNED_PICKS = 5_000  # picks read for their delete/modify conflicts (paths only, no merge)


def fork_history(repo: Repo) -> History:
    """What the fork's engineers made of the conflicts of its past picks: the newest commits of the
    checked-out fork branch that name the upstream commit they pick (`(cherry picked from commit
    X)`, `Upstream-Commit: X`, the other markers of DEFAULT_MARKERS), replayed in memory once per
    process and repository (learn_from_picks); the branch moving as units land does not relearn."""
    cache = str(repo.path)  # once per run: what the run lands itself, forkflow records
    ahead = _AHEAD.pop(cache, None)
    if ahead is not None and cache not in _HISTORIES:
        try:
            learnt = ahead.result()
            _HISTORIES.clear()
            _HISTORIES[cache] = learnt
        except Exception:  # noqa: BLE001 - the child died or its answer did not come back: learn here
            pass
    if cache not in _HISTORIES:
        tip = repo.resolve("HEAD")  # only here: a git process each conflict was a tenth of the resolvers' time
        if tip is None:
            return History()
        _HISTORIES.clear()
        try:
            _HISTORIES[cache] = learn_fork(repo, tip)[0]
        except (GitError, UserError):  # no history to learn from is no reason to stop a pick
            _HISTORIES[cache] = History()
    return _HISTORIES[cache]


def fork_book(repo: Repo) -> RuleBook:
    """Each resolver rule's backtest on the fork's past picks (learnt with `fork_history`)."""
    return fork_history(repo).book or RuleBook()


def learn_ahead(repo: Repo) -> bool:
    """Start learning `fork_history` in a child process, while this one plans and lands (a real
    fork's replay of its 400 newest picks is seconds of CPU); `fork_history` takes its answer at
    the first conflict.  The child is a fresh interpreter that imports only what learning needs
    (a multiprocessing spawn imported the whole command line again: 1.5 s of CPU on the core the
    plan's `git diff-tree` uses), reads the repository, writes nothing, and hands back its History
    pickled on its standard output; it is killed when this process ends first.  Where it cannot
    start, or fails, `fork_history` learns in-process as before.  False when nothing was started."""
    cache = str(repo.path)
    if cache in _HISTORIES or cache in _AHEAD:
        return False
    proc = take_early("learn", repo.path) or python_child(LEARN_CHILD, cache)  # the entry's, if it started one
    if proc is None:
        return False
    _AHEAD[cache] = _Child(proc)
    return True


class _Child:
    """A learning child process; `result()` waits for its History."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        atexit.register(self.stop)

    def result(self) -> History:
        out, _ = self.proc.communicate()
        atexit.unregister(self.stop)
        if self.proc.returncode != 0:
            raise RuntimeError(f"the learning child exited {self.proc.returncode}")
        history = pickle.loads(out)  # our own child's answer, not a stranger's
        if not isinstance(history, History):
            raise RuntimeError("the learning child answered something else")
        return history

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _child_main(path: str) -> None:
    """The learning child: its History, pickled, on standard output."""
    data = pickle.dumps(_learn_in_child(path), protocol=pickle.HIGHEST_PROTOCOL)
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _learn_in_child(path: str) -> History:
    repo = Repo(Path(path))
    tip = repo.resolve("HEAD")
    if tip is None:
        return History()
    try:
        with quick_reads():  # the child's replays merge files as the parent's picks do
            return learn_fork(repo, tip)[0]
    except (GitError, UserError):
        return History()


def learn_fork(repo: Repo, tip: Sha) -> tuple[History, list[str]]:
    """The fork's history and backtest from its pick commits reachable from `tip`: the newest
    MAX_PAST_PICKS replayed whole, older ones (up to MAX_SCANNED_PICKS) for their delete/modify
    conflicts only."""
    return learn_from_picks(repo.path, reversed(past_picks(repo, tip, MAX_SCANNED_PICKS)), whole=MAX_PAST_PICKS)


def past_picks(repo: Repo, tip: Sha, limit: int | None = None) -> list[tuple[Sha, Sha]]:
    """(upstream sha, fork sha) of the newest single-commit picks reachable from `tip`, newest
    first: MAX_PAST_PICKS of them unless `limit` says."""
    limit = MAX_PAST_PICKS if limit is None else limit
    out = git_log_messages(repo, tip)
    patterns = [re.compile(p) for p in DEFAULT_MARKERS]
    picks: list[tuple[Sha, Sha]] = []
    for fork_sha, message in out:
        named = set(trailers(message)) | set(markers(message, patterns))
        if len(named) == 1:
            named_sha = named.pop()
            up = Sha(named_sha) if len(named_sha) == 40 else repo.resolve(named_sha)
            if up is not None:
                picks.append((up, fork_sha))
        if len(picks) == limit:
            break
    return picks


def git_log_messages(repo: Repo, tip: Sha) -> list[tuple[Sha, str]]:
    raw = repo.git("log", "--no-merges", "-E", "-i", "--grep=cherry picked from commit|Upstream-Commit:|"
                   "Revision:|Original Commit:|Upstream commit:", "--format=%H%x00%B%x1e", tip)
    out = []
    for rec in raw.split("\x1e"):
        if "\x00" in rec:
            sha, body = rec.strip("\n").split("\x00", 1)
            out.append((Sha(sha), body))
    return out
