"""The fork's lines, where they already hold most of upstream's change in another version.  [pure]

A fork often took an upstream change early (a pick of an earlier revision of the same pull
request, or its own port of it) and the upstream commit picked now brings the final version: the
words it adds to the region are mostly already in the fork's lines, and the words it removes are
mostly gone from them. `lag` keeps a side only when it holds every word-level edit of the other at
the same place; this rule keeps the fork's lines when at least half of upstream's word change
(words added and words removed, counted as sets) is already there. Written and tuned on fbtriton's
`[RESOLVED]` picks dated before 2026-03-01, where the engineers kept the fork's lines in 9 of the
30 files no other rule settled; it is a proposer (the trust gate keeps its answers for a person
until its record on the fork says otherwise), last in the chain. Regions of other kinds are left to
the structural rules (`regionwise.settle`).
"""
from __future__ import annotations

import re

from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.classify import Region
from forkflow.conflicts.resolvers import Proposal
from forkflow.conflicts.resolvers.regionwise import MAX_REGION_WORDS, settle
from forkflow.conflicts.resolvers.structural import Declined

HELD = 0.5  # the share of upstream's word change the fork's lines must already hold
_WORD = re.compile(r"\w+")


def held(r: Region) -> float | None:
    """The share of upstream's word change in the region (words it added, words it removed) that
    the fork's lines already hold; None when upstream changed no word."""
    base, ours, theirs = (set(_WORD.findall(x)) for x in (r.base, r.ours, r.theirs))
    added, removed = theirs - base, base - theirs
    if not added and not removed:
        return None
    return (len(added & ours) + len(removed - ours)) / (len(added) + len(removed))


def settle_region(r: Region) -> tuple[str, str]:
    if sum(len(x.split()) for x in (r.base, r.ours, r.theirs)) > MAX_REGION_WORDS:
        raise Declined(f"a region of more than {MAX_REGION_WORDS} words")
    share = held(r)
    if share is None:
        raise Declined("upstream changed no word in the region")
    if share < HELD or r.ours == r.base:
        raise Declined("the fork's lines hold less than half of upstream's change")
    return r.ours, "the fork's lines already hold most of upstream's change"


class VersionResolver:
    """Proposes the fork's lines where they hold most of upstream's change (see the docstring)."""

    name = "version"

    def __init__(self) -> None:
        self.last_reason = ""

    def propose(self, case: ConflictCase) -> Proposal | None:
        proposal, self.last_reason = settle(case, settle_region)
        return proposal
