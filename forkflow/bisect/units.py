"""Landing units between two fork commits, and in-memory replays of a bundle's prefixes.

A landing unit is a commit on the fork branch's first-parent line: a pick or bundle (one or
more `Upstream-Commit:` trailers), a fork-own commit, or a merge.  Inside a guilty bundle the
search goes on over its upstream commits: prefix k is the unit's base (its first parent) with
the first k upstream commits picked onto it in memory (libgit2's tree merge, through
`forkflow.git.pick.MemoryPicker`); prefix commits are objects only, no ref, no work tree.
"""
from __future__ import annotations

from dataclasses import dataclass

from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.git.pick import MemoryPicker, PickStatus
from forkflow.ledger.evidence import pr_number, trailers
from forkflow.models import Sha

CONFLICT_PREFIX = "conflict:"  # a prefix that could not be replayed: untestable


@dataclass(frozen=True, slots=True)
class LandingUnit:
    sha: Sha
    subject: str
    parent: Sha | None
    upstream: tuple[Sha, ...] = ()
    is_merge: bool = False

    @property
    def is_bundle(self) -> bool:
        return len(self.upstream) > 1


@dataclass(frozen=True, slots=True)
class Prefix:
    """Prefix k of a bundle: its base plus the first k upstream commits."""

    k: int
    upstream: Sha     # the k-th upstream commit, the one this prefix adds
    sha: Sha          # the replayed commit, or CONFLICT_PREFIX + reason


def resolve_range(repo: Repo, good: str, bad: str) -> tuple[Sha, Sha]:
    """Both ends as SHAs, the good end an ancestor of the bad end; say how to fix it if not."""
    g, b = repo.resolve(good), repo.resolve(bad)
    for name, value, sha in (("--good", good, g), ("--bad", bad, b)):
        if sha is None:
            raise UserError(f"{name} {value!r} is not a commit in {repo.path}; pass a SHA or ref")
    assert g is not None and b is not None
    if g == b:
        raise UserError(f"--good and --bad are the same commit ({g[:12]}); pass two different commits")
    base = repo.merge_base(g, b)
    if base == g:
        return g, b
    if base == b:
        raise UserError(f"--good {good} is newer than --bad {bad} (it descends from it); swap them: "
                        f"--good {bad} --bad {good}")
    raise UserError(f"--good {good} is not an ancestor of --bad {bad}; pass two commits of one branch")


def landing_units(repo: Repo, good: Sha, bad: Sha) -> list[LandingUnit]:
    """The first-parent commits after `good` up to `bad`, oldest first."""
    units = []
    for c in repo.log(f"{good}..{bad}", first_parent=True):
        ups = tuple(dict.fromkeys(Sha(s) for s in trailers(c.message)))
        units.append(LandingUnit(c.sha, c.subject, c.parents[0] if c.parents else None, ups, c.is_merge))
    return units


def replay_prefixes(repo: Repo, unit: LandingUnit) -> list[Prefix]:
    """Prefixes 1..m-1 of a bundle of m upstream commits, replayed onto its base in memory."""
    if unit.parent is None:
        return []
    picker = MemoryPicker(repo.path)
    parent = unit.parent
    tree = picker.commit_tree(parent)
    out: list[Prefix] = []
    broken = ""
    for k, up in enumerate(unit.upstream[:-1], start=1):
        if not broken:
            try:
                step = picker.pick(tree, up)
            except UserError:
                step = None
            if step is None or step.status is PickStatus.CONFLICT:
                broken = f"{CONFLICT_PREFIX}{up[:12]} does not apply to the bundle's base"
            else:
                tree = step.tree
                msg = (f"forkflow bisect: {unit.sha[:12]} prefix {k}/{len(unit.upstream)}\n\n"
                       f"Upstream-Commit: {up}\n").encode()
                parent = picker.write_commit(tree, parent, msg)
        out.append(Prefix(k, up, Sha(broken) if broken else parent))
    return out


def upstream_pr(repo: Repo, sha: Sha) -> tuple[str, int | None]:
    """Subject and PR number of an upstream commit, when its object is here."""
    if repo.resolve(sha) is None:
        return "", None
    c = repo.log("-1", sha, reverse=False)[0]
    return c.subject, pr_number(c.subject)
