"""One side only re-laid the lines out: the other side's change, in that layout.  [pure]

fbtriton runs another Python formatter than upstream: the fork's side of many regions holds the
same words as the base, wrapped otherwise (one argument a line, a trailing comma), while upstream
changed words there.  The answer its engineers gave is upstream's change in the layout where the
change leaves it whole, and upstream's lines where the change rewrote what the fork had re-laid.

A region is settled when one side (the re-laying side) has the base's words, whitespace aside (for
Python also trailing commas and parentheses, which formatters add and drop), and the other side
changed words.  The line-level changes of the two sides are grouped where they overlap:

- a group with one side's changes only is applied as it is;
- where both changed the same lines and each of the other side's word edits lies within one line
  of the re-laid text, the edits are applied word by word into the re-laid lines
  (`tokens.merge_tokens`);
- where an edit of the other side spans lines the re-laying side broke apart (it rewrote a
  signature the fork wrapped one argument a line), the other side's lines are taken for the group.

It declines where the re-laying side changed the indentation of a Python statement (that is not
layout), where the other side re-indented lines it kept (a word merge would lose that), where a
word merge clashes, and regions of more than 5,000 words.  Regions of other kinds are left to the
structural rules (`regionwise.settle`).
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.classify import Region
from forkflow.conflicts.resolvers import Proposal
from forkflow.conflicts.resolvers.regionwise import MAX_REGION_WORDS, settle
from forkflow.conflicts.resolvers.structural import Change, Declined, changes
from forkflow.conflicts.resolvers.tokens import Clash, Text, align, merge_tokens
from forkflow.planning.symbols import Lang, language_of

_CLOSE = frozenset(")]}")


def _words(text: str, python: bool) -> list[str]:
    """The words that carry meaning: for Python, trailing commas and parentheses are layout."""
    words = Text.of(text).words
    if not python:
        return list(words)
    out = []
    for i, w in enumerate(words):
        if w in "()":
            continue
        if w == "," and (i + 1 == len(words) or words[i + 1] in _CLOSE):
            continue
        out.append(w)
    return out


_LEXEME = re.compile(r'\\.|"""|\'\'\'|["\'#()\[\]{}\n]', re.S)


def line_depths(text: str, depth: int = 0) -> list[int]:
    """How many brackets are open at the start of each line of Python text (strings, triple-quoted
    ones too, and comments aside), `depth` being how many are open where it starts.  Linear."""
    out = [depth]
    quote = ""
    comment = False
    for m in _LEXEME.finditer(text):
        x = m.group(0)
        if x == "\n":
            out.append(depth)
            comment = False
            if len(quote) == 1:
                quote = ""  # an unterminated one-line string ends with its line
        elif x.startswith("\\"):
            if x.endswith("\n"):  # a line continued with a backslash: the line count goes on
                out.append(depth)
                comment = False
        elif comment:
            continue
        elif quote:
            if x == quote:
                quote = ""
        elif x in ('"', "'", '"""', "'''"):
            quote = x
        elif x == "#":
            comment = True
        else:
            depth += 1 if x in "([{" else -1
    return out


def _statements(text: str, depth: int) -> list[tuple[str, str]]:
    """(indentation, first word) of each line of `text` that starts outside brackets, `depth` being
    how many are open where the text starts: the lines whose indentation means something in Python."""
    out = []
    for line, d in zip(text.splitlines(), line_depths(text, depth)):
        stripped = line.strip()
        if stripped and d <= 0 and not stripped.startswith("#"):
            out.append((line[: len(line) - len(line.lstrip())], Text.of(stripped).words[0]))
    return out


def _start_depths(case: ConflictCase) -> dict[int, int]:
    """How many brackets are open where each region starts (by the region's id), from the base."""
    parts: list[str] = []
    lines = 0
    at: dict[int, int] = {}
    for seg in case.segments:
        text = seg if isinstance(seg, str) else seg.base
        if not isinstance(seg, str):
            at[id(seg)] = lines
        parts.append(text)
        lines += text.count("\n")
    depths = line_depths("".join(parts))
    return {k: depths[min(n, len(depths) - 1)] for k, n in at.items()}


def _apply(base: list[str], hunks: list[Change], start: int, end: int) -> list[str]:
    out: list[str] = []
    pos = start
    for c in hunks:
        out += base[pos:c.start]
        out += c.lines
        pos = c.end
    return out + base[pos:end]


@dataclass(slots=True)
class _Group:
    start: int
    end: int
    ours: list[Change]
    theirs: list[Change]


def _groups(co: list[Change], ct: list[Change]) -> list[_Group]:
    """Overlapping changes of the two sides, grouped.  Changes that only touch stay apart; two
    insertions at one place form a group."""
    items = sorted([(c.start, c.end, 0, c) for c in co] + [(c.start, c.end, 1, c) for c in ct],
                   key=lambda x: (x[0], x[1]))
    groups: list[_Group] = []
    for start, end, side, c in items:
        g = groups[-1] if groups else None
        if g is None or not (start < g.end or start == end == g.start == g.end):
            g = _Group(start, end, [], [])
            groups.append(g)
        g.end = max(g.end, end)
        (g.ours if side == 0 else g.theirs).append(c)
    return groups


def _within_lines(base: str, relaid: str, other: str) -> bool:
    """Whether each word edit of `other` inserts words, or replaces words that sit on one line of
    `relaid` (an insertion may go anywhere; a removal takes what was re-laid apart)."""
    b, r = Text.of(base), Text.of(relaid)
    edits, _ = align(b.words, Text.of(other).words)
    _, kept = align(b.words, r.words)
    for i1, i2, j1, j2 in edits:
        if j1 == j2:
            return False  # words removed: the re-laid lines kept them, and their layout no longer fits
        at = [kept[i] for i in range(i1, i2) if i in kept]
        if at and any("\n" in r.spaces[j] for j in range(min(at) + 1, max(at) + 1)):
            return False
    return True


def _drops_lines(base: str, other: str) -> bool:
    """Whether `other` removed every word of some base line (and put nothing in their place)."""
    b = Text.of(base)
    edits, _ = align(b.words, Text.of(other).words)
    line_of = []
    line = 0
    for space in b.spaces:
        line += space.count("\n")
        line_of.append(line)
    per_line = Counter(line_of)
    for i1, i2, j1, j2 in edits:
        if j1 == j2 and i2 > i1:
            removed = Counter(line_of[i1:i2])
            if any(per_line[n] == k for n, k in removed.items()):
                return True
    return False


def _keeps_indentation(base: str, other: str, depth: int) -> bool:
    """Whether `other` left the indentation of every base statement line it kept as it was (lines
    inside brackets, `depth` being how many are open where the text starts, may move freely)."""
    b, o = Text.of(base), Text.of(other)
    _, kept = align(b.words, o.words)
    depths = line_depths(base, depth)
    line = 0
    for i in range(len(b.words)):
        line += b.spaces[i].count("\n")
        j = kept.get(i)
        if j is None or not (i == 0 or "\n" in b.spaces[i]) or "\n" not in o.spaces[j]:
            continue
        if depths[min(line, len(depths) - 1)] <= 0 and o.spaces[j].rsplit("\n", 1)[1] != b.spaces[i].rsplit("\n", 1)[-1]:
            return False
    return True


def settle_region(r: Region, lang: Lang | None, start_depth: Callable[[Region], int] = lambda r: 0
                  ) -> tuple[str, str]:
    """(the other side's change in the re-laid lines, note), or raises Declined."""
    if max(len(Text.of(x).words) for x in (r.base, r.ours, r.theirs)) > MAX_REGION_WORDS:
        raise Declined(f"a region of more than {MAX_REGION_WORDS} words")
    python = lang is Lang.PYTHON
    words = _words(r.base, python)
    ours_relaid, theirs_relaid = _words(r.ours, python) == words, _words(r.theirs, python) == words
    if ours_relaid == theirs_relaid:
        raise Declined("both sides changed words" if not ours_relaid else "neither side changed words")
    relaid, who = (r.ours, "the fork") if ours_relaid else (r.theirs, "upstream")
    # brackets open where the region starts: from the text before it (whose clean lines may hold
    # either side's changes), and at least as many as the base's lines close
    depth = max(start_depth(r), -min(line_depths(r.base)), 0) if python else 0
    if python and _statements(relaid, depth) != _statements(r.base, depth):
        raise Declined(f"{who} re-indented Python statements, which is not layout")
    base, ours, theirs = (x.splitlines(keepends=True) for x in (r.base, r.ours, r.theirs))
    out: list[str] = []
    pos = 0
    took_other = False
    for g in _groups(changes(base, ours), changes(base, theirs)):
        start, end, co, ct = g.start, g.end, g.ours, g.theirs
        out += base[pos:start]
        pos = end
        if not co or not ct:
            lines = _apply(base, co or ct, start, end)
            if (ct if ours_relaid else co) and _drops_lines("".join(base[start:end]), "".join(lines)):
                raise Declined(f"the side that changed words removed whole lines next to those {who} re-laid: "
                               "whether they go takes judgement")
            out += lines
            continue
        group_base = "".join(base[start:end])
        mine, other = ("".join(_apply(base, co, start, end)), "".join(_apply(base, ct, start, end)))
        if not ours_relaid:
            mine, other = other, mine
        if not _within_lines(group_base, mine, other):
            out.append(other)  # the other side rewrote what was re-laid: its lines
            took_other = True
            continue
        if python and not _keeps_indentation(group_base, other, line_depths(r.base, depth)[start]):
            raise Declined("the side that changed words also re-indented lines it kept")
        try:
            merged = merge_tokens(group_base, mine, other)  # the first side's spacing leads
        except Clash as c:
            raise Declined(f"the word edits clash ({c})") from None
        out.append(merged if merged.endswith("\n") or not other.endswith("\n") else merged + "\n")
    out += base[pos:]
    note = (f"{who} only re-laid the lines out: the other side's change"
            + (", its lines where it rewrote what was re-laid" if took_other else ", in that layout"))
    return "".join(out), note


class LayoutResolver:
    """The other side's change in the lines one side only re-laid out."""

    name = "layout"

    def __init__(self) -> None:
        self.last_reason = ""

    def propose(self, case: ConflictCase) -> Proposal | None:
        lang = language_of(case.path)
        starts: dict[int, int] = {}

        def start_depth(r: Region) -> int:  # brackets open where the region starts (the base, once)
            if not starts:
                starts.update(_start_depths(case))
            return starts.get(id(r), 0)
        proposal, self.last_reason = settle(case, lambda r: settle_region(r, lang, start_depth))
        return proposal
