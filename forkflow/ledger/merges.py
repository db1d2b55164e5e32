"""Forks that merge upstream (`[fork] intake = "merge"`): how they take upstream, read from git.

A fork takes upstream in one of two ways, recorded at `forkflow init` as `[fork] intake`:

* `pick`: cherry-picks and bundles (fbtriton); the fork's own commits say what they took;
* `merge`: merge commits whose second parent is an upstream commit (Intel's and AMD's forks,
  most LLVM-based forks); everything upstream that the fork tip reaches is taken.

On a merge fork the state at a past time is the fork branch's first-parent history, the fork
point of that time is its merge base with upstream, and the upstream commits it reaches are
TAKEN (evidence `merge`).  The ledger lists them from the *original* fork point: the upstream
commit the fork's oldest first-parent commit of its own grew from.  A fork commit that picked an
upstream commit before a later merge brought it in is one taken commit, never two.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from forkflow.config import Config
from forkflow.errors import UserError
from forkflow.git.repo import Repo
from forkflow.models import Sha

PICK, MERGE = "pick", "merge"
INTAKES = (PICK, MERGE)


def intake_of(config: Config) -> str:
    """`[fork] intake` of forkflow.toml: "pick" (the default) or "merge"."""
    value = config.section("fork").get("intake", PICK)
    if value not in INTAKES:
        where = f"{config.path}" if config.path else "forkflow.toml"
        raise UserError(f"{where}: key 'fork.intake' must be \"pick\" or \"merge\", not {value!r}; fix it and retry")
    return str(value)


@dataclass(frozen=True, slots=True)
class Intake:
    """What the fork's own history says about how it takes upstream."""

    style: str  # "pick" or "merge"
    upstream_merges: int  # merge commits of the fork whose second (or later) parent is upstream's
    other_merges: int  # merges of the fork's own branches (PR branches, feature branches)
    octopus: int  # merges with three or more parents, an upstream one among them
    newest_merge: Sha | None  # the newest upstream merge on the fork branch

    def describe(self) -> str:
        if self.style == PICK:
            return "pick: no merge of upstream on the fork branch; it takes upstream by cherry-picks"
        extra = f", {self.octopus} octopus" if self.octopus else ""
        return (f"merge: {self.upstream_merges} merge commit(s) of upstream on the fork branch{extra} "
                f"(newest {str(self.newest_merge)[:12]})")


def fork_side(repo: Repo, fork_tip: str, upstream_tip: str) -> list[tuple[Sha, tuple[Sha, ...]]]:
    """Every commit of the fork branch that upstream does not reach, newest first, with its parents."""
    out = repo.git("rev-list", "--parents", fork_tip, f"^{upstream_tip}")
    rows: list[tuple[Sha, tuple[Sha, ...]]] = []
    for line in out.splitlines():
        parts = line.split()
        if parts:
            rows.append((Sha(parts[0]), tuple(Sha(p) for p in parts[1:])))
    return rows


def detect_intake(repo: Repo, fork_tip: str, upstream_tip: str) -> Intake:
    """Read the intake style from the fork's own history: a merge commit of the fork (not reachable
    from upstream) whose second or later parent upstream reaches merged upstream."""
    rows = fork_side(repo, fork_tip, upstream_tip)
    own = {sha for sha, _ in rows}
    up = other = octopus = 0
    newest: Sha | None = None
    for sha, parents in rows:  # newest first
        if len(parents) < 2:
            continue
        if any(p not in own for p in parents[1:]):
            up += 1
            octopus += len(parents) > 2
            newest = newest or sha
        else:
            other += 1
    return Intake(MERGE if up else PICK, up, other, octopus, newest)


def original_fork_point(repo: Repo, fork_tip: str, upstream_tip: str) -> Sha | None:
    """The upstream commit the fork grew from: where its oldest first-parent commit of its own
    meets upstream (None when the fork branch has no commit of its own)."""
    own = repo.git("rev-list", "--first-parent", "--reverse", fork_tip, f"^{upstream_tip}").split()
    if not own:
        return repo.merge_base(fork_tip, upstream_tip)
    return repo.merge_base(own[0], upstream_tip)


def merged_upstream(repo: Repo, fork_tip: str, origin: str, listed: set[Sha]) -> set[Sha]:
    """The listed upstream commits the fork tip reaches (its merges brought them in)."""
    reach = repo.git("rev-list", fork_tip, f"^{origin}").split()
    return {Sha(s) for s in reach if s in listed}


def first_parent_before(repo: Repo, ref: str, unix_time: int) -> Sha | None:
    """The branch as it was at `unix_time`: its newest first-parent commit dated (committer date)
    on or before it.  Without --first-parent, git finds an upstream commit a later merge brought in."""
    out = repo.git("rev-list", "-1", "--first-parent", f"--before={unix_time}", ref, check=False).strip()
    return Sha(out) if out else None


_MERGE_OF = re.compile(r"Merge (?:commit '([0-9a-f]{7,40})'|(?:remote-tracking )?branch '([^']+)')", re.A)


def former_upstream(repo: Repo, fork_tip: str, upstream_tip: str, remote: str, branch: str) -> tuple[set[Sha], list[str]]:
    """Commits a merge of upstream brought in that upstream's branch no longer has (upstream was
    rewritten, force-pushed): the fork's merge says in its own words that it merged upstream
    (`Merge commit '<sha>'` naming its second parent, or `Merge branch '<remote>/<branch>'`), yet
    that parent is on the fork side now.  They are upstream's words, not the fork's: the ledger
    reads them by their patch only.  Returns them and one note per such merge."""
    rows = fork_side(repo, fork_tip, upstream_tip)
    own = {sha for sha, _ in rows}
    merges = [(sha, parents) for sha, parents in rows if len(parents) >= 2 and parents[1] in own]
    if not merges:
        return set(), []
    subjects = dict(line.split(" ", 1) for line in repo.git(
        "log", "--no-walk=unsorted", "--format=%H %s", *[m for m, _ in merges]).splitlines() if " " in line)
    out: set[Sha] = set()
    notes: list[str] = []
    for sha, parents in merges:
        m = _MERGE_OF.match(subjects.get(sha, ""))
        if m is None:
            continue
        named, ref = m.group(1), m.group(2)
        if named is not None and not parents[1].startswith(named):
            continue
        if ref is not None and ref not in (f"{remote}/{branch}", f"refs/remotes/{remote}/{branch}"):
            continue
        side = repo.git("rev-list", parents[1], f"^{parents[0]}", f"^{upstream_tip}").split()
        out |= {Sha(x) for x in side}
        notes.append(f"merge {sha[:12]} merged upstream commit {parents[1][:12]}, which upstream's branch no longer "
                     f"has (rewritten upstream?); the {len(side)} commit(s) it brought count by their patch only")
    return out, notes
