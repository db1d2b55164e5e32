"""A unit's candidate: its fork commit(s) written on a base, with messages that name each upstream
commit and who settled each conflicted file (landing/message.py, conflicts/provenance.py)."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from forkflow.conflicts.provenance import RECORDED, People, Settled, trailer_lines
from forkflow.git.pick import MemoryPicker, Signature, UnitPick
from forkflow.landing.message import Decided, Member, bundle_message, decided_between, single_message
from forkflow.models import Sha


class CandidateWriter:
    def __init__(self, picker: MemoryPicker, per_commit: bool, settled: Callable[[Sha], list[Settled]],
                 people: Callable[[Sequence[str]], dict[str, People]]) -> None:
        self.picker, self.per_commit, self._settled, self._people = picker, per_commit, settled, people
        self.order: list[Sha] = []  # upstream order, for the decisions inside a bundle's range
        self.subjects: dict[Sha, tuple[str, int | None]] = {}
        self.person_decided: dict[Sha, Decided] = {}

    def write(self, pick: UnitPick, base: Sha, shas: Sequence[Sha], trees: Sequence[str]) -> Sha:
        """The unit's candidate on `base`: one commit, or with `[ingest] landing = "per-commit"` one
        fork commit per upstream commit (validated together: the gate runs the last one).  Written
        to disk, with the trees they reach, before git needs them."""
        if not self.per_commit or len(pick.applied) < 2:
            message, author, encoding = self.message(pick.applied)
            candidate = self.picker.write_commit(pick.tree, base, message, author, encoding)
            self.picker.flush([candidate])
            return candidate
        index = {sha: i for i, sha in enumerate(shas)}
        made: list[str] = []
        parent = base
        for sha in pick.applied:
            after = index[sha] + 1  # the tree the next commit came onto is this one's result
            tree = trees[after] if after < len(trees) else pick.tree
            message, author, encoding = self.message((sha,))
            parent = self.picker.write_commit(tree, parent, message, author, encoding)
            made.append(parent)
        self.picker.flush(made)
        return Sha(parent)

    def message(self, applied: Sequence[Sha]) -> tuple[bytes, Signature | None, str | None]:
        settled = {sha: self._settled(sha) for sha in applied}
        keys = [x.key for xs in settled.values() for x in xs if x.resolver == RECORDED]
        origin = self._people(keys) if keys else {}
        if len(applied) == 1:
            raw, encoding = self.picker.raw_message(applied[0])
            lines = trailer_lines(settled[applied[0]], origin)
            return single_message(applied[0], raw, lines), self.picker.author(applied[0]), encoding
        members = [Member(sha, *self.subjects.get(sha, ("", None))) for sha in applied]
        lines = [line for sha in applied for line in trailer_lines(settled[sha], origin, sha[:12])]
        return bundle_message(members, decided_between(applied, self.order, self.person_decided),
                              lines).encode("utf-8"), None, None
