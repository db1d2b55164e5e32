"""forkflow's state carried from one replay step to the next (see #15).

Had the fork run forkflow since the first step, its branch at step t+1 would hold what forkflow
had landed up to t, and the fork's own work between t and t+1: its features, its fixes, and its
hand-made picks of upstream commits.  `carry_forward` builds that branch: each first-parent fork
commit of (t, t+1] is put on forkflow's branch in order, as its own commit (author, committer and
message kept, so the ledger reads its pick markers as it reads the fork's):

- a fork commit that only took upstream commits forkflow had landed already is left out (its
  change is there, forkflow's way);
- any other commit is merged onto forkflow's branch (three-way, its own parent as the base);
  where it conflicts with what forkflow landed, the fork's version wins (the fork's engineers
  wrote that code for their own state; a conflict of a file deleted on one side keeps the fork's
  side too), and the commit counts as forced;
- a commit whose change is already there (an empty merge) adds nothing, except a pick of
  upstream commits, which goes on as an empty commit: its message is the evidence the ledger
  reads (without it, an upstream commit the fork took would count as not taken).

On a fork that merges upstream (`keep_merges`), a merge commit of the fork keeps its other
parents: its merge of upstream (directly, or inside a PR branch it merges) stays a merge on
forkflow's branch, so that forkflow's merge base moves with the fork's own merges, as it did on
the fork; flattened into one commit, the merged upstream commits would read as never taken.
"""
from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass

from forkflow.git.commits import copy_commit, merge_fork_side, parents_of
from forkflow.git.pick import MemoryPicker, PickStatus
from forkflow.models import Sha


@dataclass(frozen=True, slots=True)
class Carried:
    tip: Sha
    applied: int  # fork commits put on forkflow's branch
    forced: int  # ... of them, with conflicts settled to the fork's version
    left_out: int  # fork picks of upstream commits forkflow had landed already


def carry_forward(picker: MemoryPicker, onto: Sha, fork_commits: list[Sha],
                  takes: Mapping[str, tuple[str, ...]], landed: Set[str], keep_merges: bool = False) -> Carried:
    """Put `fork_commits` (oldest first) on `onto`, forkflow's branch; see the module docstring.

    Args:
        picker: forkflow's in-memory picker on the repository (it writes straight to disk).
        takes: fork commit -> the upstream commits it took (the fork's own picks).
        landed: upstream commits forkflow has landed on `onto` so far.
        keep_merges: a fork merge keeps its other parents (a fork that merges upstream)."""
    tip, tip_tree = onto, picker.commit_tree(onto)
    applied = forced = left_out = 0
    for sha in fork_commits:
        took = takes.get(sha, ())
        if took and all(u in landed for u in took):
            left_out += 1
            continue
        parents = parents_of(picker, sha)
        assert parents is not None
        step = picker.pick(tip_tree, sha) if len(parents) == 1 else None
        if step is not None and step.status in (PickStatus.APPLIED, PickStatus.EMPTY):
            tree = step.tree
        else:  # a conflict of the path merge (or a merge commit): the whole-tree merge, with renames
            tree, was_forced = merge_fork_side(picker, tip, sha)
            forced += was_forced
        merge = keep_merges and len(parents) > 1
        if tree == tip_tree and not took and not merge:
            continue
        tip, tip_tree = copy_commit(picker, sha, tree, [tip, *parents[1:]] if merge else [tip]), tree
        applied += 1
    return Carried(tip, applied, forced, left_out)
