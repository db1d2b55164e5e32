"""Moving refs after a unit passed L1: compare-and-swap only, and the recorded ingestion point."""
from __future__ import annotations

from collections.abc import Iterable, Sequence, Set

from forkflow.config import Config
from forkflow.git.repo import Repo
from forkflow.ledger.refs import ingestion_ref
from forkflow.ledger.evidence import trailers
from forkflow.models import Sha

CANDIDATE_PREFIX = "refs/forkflow/candidates/"


def land(repo: Repo, config: Config, candidate: Sha, base: Sha, unit: str) -> bool:
    """Move the fork branch from `base` to `candidate`; False when someone else moved it first."""
    return repo.update_ref(config.fork_ref, candidate, base, message=f"forkflow: land {unit}")


def keep_candidate(repo: Repo, unit: str, candidate: Sha) -> str:
    """A validated but unlanded unit stays reachable under refs/forkflow/candidates/."""
    ref = CANDIDATE_PREFIX + "".join(c if c.isalnum() or c in "-_." else "-" for c in unit)
    old = repo.read_ref(ref)
    repo.update_ref(ref, candidate, old, message=f"forkflow: candidate {unit}")
    return ref


def prune_candidates(repo: Repo, settled: Set[Sha]) -> list[str]:
    """Delete the candidate refs whose upstream commits all have a final decision (landed as another
    commit, skipped): they can never land.  Each by compare-and-swap; returns the refs it deleted."""
    out = repo.git("for-each-ref", "--format=%(objectname) %(refname)%00%(contents)%00", CANDIDATE_PREFIX)
    fields = out.split("\0")
    gone: list[str] = []
    for head, message in zip(fields[0::2], fields[1::2]):
        sha, _, ref = head.strip().partition(" ")
        carried = trailers(message)
        if carried and all(t in settled for t in carried):
            repo.git("update-ref", "-d", ref, sha, check=False)  # moved meanwhile: a fresh candidate stays
            gone.append(ref)
    return gone


def decided_prefix(order: Sequence[Sha], decided: Iterable[Sha]) -> Sha | None:
    """The newest upstream commit up to which every commit has a decision.  [pure]"""
    done = set(decided)
    last: Sha | None = None
    for sha in order:
        if sha not in done:
            break
        last = sha
    return last


def advance_ingestion_point(repo: Repo, config: Config, order: Sequence[Sha], decided: Iterable[Sha]) -> Sha | None:
    """Move the recorded ingestion point forward (never back) by compare-and-swap; returns it."""
    ref = ingestion_ref(config)
    old = repo.read_ref(ref)
    new = decided_prefix(order, decided)
    if new is None:
        return old
    position = {sha: i for i, sha in enumerate(order)}
    if old is not None and position.get(old, -1) >= position[new]:
        return old
    if repo.update_ref(ref, new, old, message="forkflow: ingestion point"):
        return new
    return repo.read_ref(ref)  # another run moved it: theirs stands
