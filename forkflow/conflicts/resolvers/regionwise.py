"""A resolver built from one region rule, tried after the structural rules.  [pure]

The `lag` and `layout` resolvers each settle one kind of conflict region.  A conflicted file often
has several regions of different kinds; a file is settled only when every region is.  So each of
these resolvers settles a region with its own rule, and the regions its rule leaves with the
structural resolver's rules (`structural.merge_region`); it answers only when its own rule settled
at least one region (the rest is the structural resolver's answer, earlier in the chain).  The rule
runs first on every region, so that a file with no region of its kind costs one pass of the rule
(no parse, no alignment with the fork point, no structural merge).

File-level declines, shared by both: no text to merge (binary, delete/modify, rename, submodule,
mode), CRLF on one side only, a side larger than 4 MB, a Python side that does not parse before the
merge, a merge that defines a Python or TableGen name twice, a merged file that no longer parses.
"""
from __future__ import annotations

from collections.abc import Callable

from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.classify import Region, regions
from forkflow.conflicts.resolvers import Proposal
from forkflow.conflicts.resolvers.structural import (
    Declined,
    Files,
    merge_region,
    merged_file,
    origin_regions,
    text_declines,
    unparsed,
)
from forkflow.planning.symbols import language_of

MAX_REGION_WORDS = 5_000  # word alignment is quadratic in the worst case: larger regions decline

RegionRule = Callable[[Region], tuple[str, str]]
"""(settled text, the rule's note) of one region, or raises Declined saying why not."""


def settle(case: ConflictCase, rule: RegionRule) -> tuple[Proposal | None, str]:
    """(proposal, "") when every region is settled, by `rule` or by the structural rules, and at
    least one by `rule`; otherwise (None, why)."""
    why = text_declines(case)
    if why is not None:
        return None, why
    # the rule first, on every region: most files have no region of its kind, and for those the
    # parse check, the fork point's lines and the structural rules are not needed
    regs = regions(case.segments)
    own: list[tuple[str, str] | Declined] = []
    for r in regs:
        try:
            own.append(rule(r))
        except Declined as d:
            own.append(d)
    declined = [x for x in own if isinstance(x, Declined)]
    if len(declined) == len(own):  # no region of its kind: the structural resolver's file, if anyone's
        return None, str(declined[0])
    why = unparsed(case)
    if why is not None:
        return None, why
    lang = language_of(case.path)
    origins = origin_regions(case) if declined else [None] * len(regs)
    files = Files.of(case)
    texts: list[str] = []
    notes: list[str] = []
    for r, origin, hit in zip(regs, origins, own):
        if isinstance(hit, Declined):
            try:
                hit = merge_region(r, lang, files, origin)
            except Declined:
                return None, str(hit)
        texts.append(hit[0])
        notes.append(hit[1])
    content, why = merged_file(case, texts, files)
    return (None, why) if content is None else (Proposal(content, "; ".join(dict.fromkeys(notes))), "")
