"""One side already has the other side's change, word for word: that side is the answer.  [pure]

A fork picks upstream changes out of order.  When it picked an upstream commit (or an earlier form
of it) before, and built on it, the upstream commit picked now conflicts with the fork's own later
lines: upstream's side of the region holds only the change, the fork's side holds the same change
and more.  And the other way: the fork's lines were an early pick of something upstream has since
extended, and upstream's side holds the fork's edit and more.  Git sees both sides change the same
lines; word by word, one side lags the other.

A region is settled when every word-level edit one side made to the base (words and punctuation,
whitespace aside) is in the other side at the same place: the words it added are there, between
the same base words, and the base words it removed are gone.  That other side is kept.  It
declines

- when each side has every edit of the other (then they differ in whitespace only: `trivial`);
- when neither has (both sides changed the words: a person's call);
- when both sides only inserted at one place and the other side's lines end the keeping side's
  insertion, its own lines leading: its own lines are then a separate addition (a registration,
  an include) whose order and need take judgement; on fbtriton's `[RESOLVED]` picks the engineers
  reordered or dropped them 2 times of 3;
- regions larger than 5,000 words (word alignment is quadratic in the worst case).

Regions of other kinds are left to the structural rules (`regionwise.settle`).
"""
from __future__ import annotations

from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.classify import Region
from forkflow.conflicts.resolvers import Proposal
from forkflow.conflicts.resolvers.regionwise import MAX_REGION_WORDS, settle
from forkflow.conflicts.resolvers.structural import Declined
from forkflow.conflicts.resolvers.tokens import Text, align
from forkflow.conflicts.resolvers.units import norm


def holds(base: str, side: str, other: str) -> bool:
    """Whether `side` has every word-level edit `other` made to `base`, each at the same place."""
    b, s, o = Text.of(base).words, Text.of(side).words, Text.of(other).words
    edits, _ = align(b, o)
    if not edits:
        return False
    _, base_in_side = align(b, s)
    _, other_in_side = align(o, s)
    for i1, i2, j1, j2 in edits:
        if any(j not in other_in_side for j in range(j1, j2)):
            return False  # a word the other side added is not in this side
        if any(i in base_in_side for i in range(i1, i2)):
            return False  # a base word the other side removed is still in this side
        if j1 < j2:
            before = base_in_side.get(i1 - 1, -1) if i1 > 0 else -1
            after = base_in_side.get(i2, len(s)) if i2 < len(b) else len(s)
            if not before < other_in_side[j1] <= other_in_side[j2 - 1] < after:
                return False  # the words are there, but elsewhere
    return True


def settle_region(r: Region) -> tuple[str, str]:
    """(the side that has the other's change, note), or raises Declined."""
    if max(len(Text.of(x).words) for x in (r.base, r.ours, r.theirs)) > MAX_REGION_WORDS:
        raise Declined(f"a region of more than {MAX_REGION_WORDS} words")
    ours_has, theirs_has = holds(r.base, r.ours, r.theirs), holds(r.base, r.theirs, r.ours)
    if ours_has == theirs_has:
        raise Declined("the sides differ in whitespace only" if ours_has
                       else "neither side has the other's word-level change")
    keep, other, who = (r.ours, r.theirs, "the fork") if ours_has else (r.theirs, r.ours, "upstream")
    if not r.base.strip():
        mine, theirs = norm(keep.splitlines()), norm(other.splitlines())
        if theirs and len(mine) > len(theirs) and mine[-len(theirs):] == theirs:
            raise Declined(f"both sides inserted at one place, {who}'s own lines leading the other's: "
                           "their order and need take judgement")
    return keep, f"{who}'s side already has the other's word-level change: {who}'s lines"


class LagResolver:
    """Keeps the side that already has the other side's change, word for word."""

    name = "lag"

    def __init__(self) -> None:
        self.last_reason = ""

    def propose(self, case: ConflictCase) -> Proposal | None:
        proposal, self.last_reason = settle(case, settle_region)
        return proposal
