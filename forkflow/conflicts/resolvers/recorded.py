"""Recorded resolutions: the same conflict, resolved before, is resolved the same way (git rerere),
whether forkflow recorded it or the fork's engineers settled it in an earlier pick."""
from __future__ import annotations

from collections.abc import Callable

from forkflow.conflicts.case import ConflictCase, encode
from forkflow.conflicts.classify import ConflictKind, fill_regions, regions
from forkflow.conflicts.history import History
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


class HistoryResolver:
    """The fork's own past: regions its engineers already settled in earlier picks (learnt by
    `forkflow.conflicts.history.learn` from pick commits), reused when every region is known."""

    name = "history"

    def __init__(self, history: History) -> None:
        self.history = history
        self.last_reason = ""

    def propose(self, case: ConflictCase) -> Proposal | None:
        self.last_reason = ""
        if case.kind is ConflictKind.DELETE_MODIFY:
            return self._path(case)
        if not case.kind.is_text or not case.segments:
            self.last_reason = f"a {case.kind.value} conflict has no regions"
            return None
        texts: list[str] = []
        sources: list[str] = []
        for r in regions(case.segments):
            found = self.history.lookup(r)
            if found is None:
                self.last_reason = "a region the fork never settled before"
                return None
            texts.append(found[0])
            sources.append(found[1])
        return Proposal(encode(fill_regions(case.segments, texts)),
                        f"settled as the fork did before ({', '.join(dict.fromkeys(sources))})")

    def _path(self, case: ConflictCase) -> Proposal | None:
        deleted_by = "fork" if case.ours is None else "upstream"
        found = self.history.paths.get((case.path, deleted_by))
        if found is None:
            self.last_reason = f"the fork never settled {deleted_by}'s deletion of this path before"
            return None
        kept, where = found
        content = None if kept == "delete" else case.ours if kept == "fork" else case.theirs
        return Proposal(content, f"{'deleted' if content is None else 'kept ' + kept + chr(39) + 's file'}, "
                                 f"as the fork did before ({where})")
