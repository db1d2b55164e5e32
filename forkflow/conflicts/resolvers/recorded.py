"""Recorded resolutions: the same conflict, resolved before, is resolved the same way (git rerere),
whether forkflow recorded it or the fork's engineers settled it in an earlier pick."""
from __future__ import annotations

from collections.abc import Callable

from forkflow.conflicts.case import ConflictCase, encode
from forkflow.conflicts.classify import ConflictKind, Region, fill_regions, regions
from forkflow.conflicts.history import History, region_key
from forkflow.conflicts.resolvers import Proposal


class RecordedResolver:
    """Resolutions forkflow recorded (a person's or a resolver's, by conflict key), then those the
    fork's engineers landed in its past picks (`case.examples`, learnt by conflicts.casework), and
    a delete/modify settled as the fork settled that path before (`case.settled_path`)."""

    name = "recorded"

    def __init__(self, lookup: Callable[[str], tuple[list[str], str] | None]) -> None:
        self._lookup = lookup  # key -> (region texts, source)
        self.last_reason = ""

    def propose(self, case: ConflictCase) -> Proposal | None:
        self.last_reason = ""
        if case.kind is ConflictKind.DELETE_MODIFY:
            proposal = path_proposal(case, case.settled_path)
            if proposal is None:
                self.last_reason = "the fork never settled a delete/modify of this path (or folder) before"
            return proposal
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
        proposal = path_proposal(case, self.history.settled_path(case.path, case.deleted_by))
        if proposal is None:
            self.last_reason = f"the fork never settled {case.deleted_by}'s deletion of this path before"
        return proposal


def path_proposal(case: ConflictCase, settled: tuple[str, str, bool] | None) -> Proposal | None:
    """A delete/modify settled as the fork settled the same path (or, for a deletion, the newest one
    in the same folder) before; None when it never did."""
    if settled is None:
        return None
    kept, where, by_folder = settled
    if by_folder:
        return Proposal(None, f"deleted, as the fork did last with {case.deleted_by}'s deletion of a "
                              f"file in the same folder ({where})")
    content = None if kept == "delete" else case.ours if kept == "fork" else case.theirs
    return Proposal(content, f"{'deleted' if content is None else 'kept ' + kept + chr(39) + 's file'}, "
                             f"as the fork did before ({where})")
