"""Learning how the fork settled conflicts, from its own pick commits.

Each past pick (an upstream commit and the fork commit that took it) is replayed in memory: the
upstream commit picked onto the fork commit's parent.  Where that conflicts, the fork commit's file
is what the fork's engineers made of it; `history.learn` remembers it region by region.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2

from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.history import History, learn
from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.landing.casework import build_case
from forkflow.landing.pick import MemoryPicker, PickStatus
from forkflow.models import Sha


@dataclass(frozen=True, slots=True)
class Settled:
    """One conflicted path of a past pick and the file the fork committed (None: it deleted it)."""

    fork_sha: Sha
    case: ConflictCase
    fork: bytes | None


def replay_pick(repo: Repo, picker: MemoryPicker, upstream_sha: Sha, fork_sha: Sha) -> Iterator[Settled]:
    """The conflicts of picking `upstream_sha` onto `fork_sha`'s parent, each with the fork's file.

    Raises pygit2.GitError when an object is missing (a partial clone, a snapshot without big blobs)."""
    fork = picker.repo[fork_sha]
    if not isinstance(fork, pygit2.Commit) or not fork.parents:
        return
    step = picker.pick(str(fork.parents[0].tree_id), upstream_sha)
    if step.status is not PickStatus.CONFLICT:
        return
    point = repo.merge_base(str(fork.parents[0].id), upstream_sha)
    for c in step.conflicts:
        case = build_case(repo, picker, upstream_sha, c, with_history=False, fork_point=point)
        path = c.ours.path if c.ours is not None else c.path
        try:
            obj = fork.tree[path]
        except KeyError:
            obj = None
        yield Settled(fork_sha, case, obj.data if isinstance(obj, pygit2.Blob) else None)


def learn_from_picks(path: Path, picks: Iterable[tuple[Sha, Sha]]) -> tuple[History, list[str]]:
    """A History of every conflict the given (upstream sha, fork sha) picks settled, oldest first,
    and the picks that could not be replayed (with why)."""
    repo = Repo(path)
    picker = MemoryPicker(path)
    history = History()
    skipped: list[str] = []
    for upstream_sha, fork_sha in picks:
        try:
            for s in replay_pick(repo, picker, upstream_sha, fork_sha):
                learn(history, s.case, s.fork, fork_sha[:10])
        except (pygit2.GitError, KeyError, UserError) as e:  # a marker naming a commit not here
            skipped.append(f"{fork_sha[:10]}: {e}")
    return history, skipped
