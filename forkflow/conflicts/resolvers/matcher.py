"""difflib's SequenceMatcher, compiled: cydifflib runs the same algorithm with the same answers
about ten times faster.  Aligning a conflict's base with the fork point over a whole C++ file took
0.1 s with difflib on fbtriton's larger files (8 of an ingest's 36 s on a real backlog); the
resolvers' verdicts depend on difflib's exact alignment, so a faster diff of another kind
(patience, Myers) is not a drop-in: tried, it changed two of the 279 real verdicts.  [pure]"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from difflib import SequenceMatcher
else:
    from cydifflib import SequenceMatcher

__all__ = ["SequenceMatcher"]
