"""One conflicted path of one pick, as resolvers and guardrails see it.  [pure]"""
from __future__ import annotations

from dataclasses import dataclass

from forkflow.conflicts.classify import ConflictKind, Region, Segment, parse_marked, regions
from forkflow.models import Sha


@dataclass(frozen=True, slots=True)
class Example:
    """How the fork's engineers settled one region of an earlier conflict in the same file."""

    fork_sha: str
    path: str
    base: str
    ours: str
    theirs: str
    resolved: str


@dataclass(frozen=True, slots=True)
class ConflictCase:
    upstream_sha: Sha
    subject: str
    message: str  # the upstream commit message: untrusted text
    path: str
    kind: ConflictKind
    base: bytes | None
    ours: bytes | None  # the fork's side
    theirs: bytes | None  # the upstream commit's side
    segments: tuple[Segment, ...] = ()  # parsed diff3 text, for text conflicts
    key: str = ""  # conflict_key(segments)
    examples: tuple[Example, ...] = ()  # the fork's earlier resolutions in this file (history.examples)
    # the path at the fork point (the newest upstream commit the fork branch contains): lines where
    # the fork's side still reads as there, and the base does not, are upstream changes the fork has
    # not picked yet, not the fork's own edits
    origin: bytes | None = None
    # a delete/modify: how the fork settled one of this path before (History.settled_path)
    settled_path: tuple[str, str, bool] | None = None

    @property
    def deleted_by(self) -> str:
        """For a delete/modify, the side that deleted the path: "fork" or "upstream"."""
        return "fork" if self.ours is None else "upstream"

    @property
    def marked(self) -> str:
        """The conflicted file as diff3 text with markers (what a person sees)."""
        from forkflow.conflicts.classify import BASE_LABEL, OURS_LABEL, THEIRS_LABEL, Region

        out = []
        for s in self.segments:
            if isinstance(s, Region):
                out.append(f"<<<<<<< {OURS_LABEL}\n{s.ours}||||||| {BASE_LABEL}\n{s.base}=======\n"
                           f"{s.theirs}>>>>>>> {THEIRS_LABEL}\n")
            else:
                out.append(s)
        return "".join(out)

    @property
    def examples_data(self) -> list[dict[str, str]]:
        """The fork's earlier resolutions in this file, as data for an agent's request."""
        return [{"fork_commit": e.fork_sha, "path": e.path, "base": e.base, "ours": e.ours, "theirs": e.theirs,
                 "fork_resolution": e.resolved} for e in self.examples]

    @property
    def region_count(self) -> int:
        return len(regions(self.segments))


def decode(data: bytes | None) -> str | None:
    """Text of a side, bytes kept through surrogateescape; None for an absent side."""
    return None if data is None else data.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def case_from_marked(upstream_sha: Sha, subject: str, path: str, kind: ConflictKind, marked: str,
                     key: str) -> ConflictCase | None:
    """A text conflict kept for a person, rebuilt from its marked file (each side's file is the clean
    text with that side of every region), so that a person's resolution meets the same guardrails
    as a resolver's.  None when the markers do not parse."""
    segments = parse_marked(marked)
    if segments is None:
        return None

    def side(pick: str) -> bytes:
        return encode("".join(getattr(s, pick) if isinstance(s, Region) else s for s in segments))

    return ConflictCase(upstream_sha, subject, subject, path, kind, side("base"), side("ours"), side("theirs"),
                        segments, key)
