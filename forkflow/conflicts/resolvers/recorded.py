"""Recorded resolutions: the same conflict, resolved before, is resolved the same way (git rerere),
whether forkflow recorded it or the fork's engineers settled it in an earlier pick."""
from __future__ import annotations

from collections.abc import Callable

from forkflow.conflicts.case import ConflictCase, encode
from forkflow.conflicts.classify import ConflictKind, Region, fill_regions, regions
from forkflow.conflicts.history import History, folder, region_key
from forkflow.conflicts.resolvers import Proposal


class RecordedResolver:
    """Resolutions forkflow recorded (a person's or a resolver's, by conflict key), then those the
    fork's engineers landed in its past picks (`case.examples`, learnt by conflicts.casework)."""

    name = "recorded"

    def __init__(self, lookup: Callable[[str], tuple[list[str], str] | None]) -> None:
        self._lookup = lookup  # key -> (region texts, source)
        self.last_reason = ""

    def propose(self, case: ConflictCase) -> Proposal | None:
        self.last_reason = ""
        if not case.kind.is_text or not case.key:
            self.last_reason = f"a {case.kind.value} conflict has no regions"
            return None
        found = self._lookup(case.key)
        if found is not None and len(found[0]) == case.region_count:
            texts, source = found
            return Proposal(encode(fill_regions(case.segments, texts)), f"recorded resolution (by {source})")
        return self._from_examples(case)

    def _from_examples(self, case: ConflictCase) -> Proposal | None:
        """Every region settled as the fork's engineers settled the same region (same two sides,
        whitespace aside) in an earlier pick."""
        known = {region_key(Region(e.base, e.ours, e.theirs)): e for e in case.examples}
        texts: list[str] = []
        sources: list[str] = []
        for r in regions(case.segments):
            e = known.get(region_key(r))
            if e is None:
                self.last_reason = "no recorded resolution, and a region the fork never settled before"
                return None
            texts.append(e.resolved)
            sources.append(e.fork_sha)
        return Proposal(encode(fill_regions(case.segments, texts)),
                        f"settled as the fork did before ({', '.join(dict.fromkeys(sources))})")


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
            # the fork's newest delete/modify in the same folder, by the same side, was deleted
            # again: so is this one (CI workflows the fork does not run); keeping is not carried over
            near = self.history.folders.get((folder(case.path), deleted_by))
            if near is not None and near[0] == "delete":
                return Proposal(None, f"deleted, as the fork did last with {deleted_by}'s deletion of a "
                                      f"file in the same folder ({near[1]})")
            self.last_reason = f"the fork never settled {deleted_by}'s deletion of this path before"
            return None
        kept, where = found
        content = None if kept == "delete" else case.ours if kept == "fork" else case.theirs
        return Proposal(content, f"{'deleted' if content is None else 'kept ' + kept + chr(39) + 's file'}, "
                                 f"as the fork did before ({where})")
