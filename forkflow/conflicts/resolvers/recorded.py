"""Recorded resolutions: the same conflict, resolved before, is resolved the same way (git rerere)."""
from __future__ import annotations

from collections.abc import Callable

from forkflow.conflicts.case import ConflictCase, encode
from forkflow.conflicts.classify import fill_regions
from forkflow.conflicts.resolvers import Proposal


class RecordedResolver:
    name = "recorded"

    def __init__(self, lookup: Callable[[str], tuple[list[str], str] | None]) -> None:
        self._lookup = lookup  # key -> (region texts, source)

    def propose(self, case: ConflictCase) -> Proposal | None:
        if not case.kind.is_text or not case.key:
            return None
        found = self._lookup(case.key)
        if found is None:
            return None
        texts, source = found
        if len(texts) != case.region_count:
            return None
        return Proposal(encode(fill_regions(case.segments, texts)), f"recorded resolution (by {source})")
