"""Values of planning: what a commit touches, chain declarations, landing units, the plan.  [pure]"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from forkflow.models import Sha

TOP_LEVEL = "<top-level>"  # the symbol of changed lines outside every definition


@dataclass(frozen=True, slots=True)
class Touch:
    """What one commit changes: files, and symbols (`path::Qualified.name`) where known.

    `parsed` holds the files whose symbols were found (by a parser, a top-level scanner or
    hunk headers); for the other files only the file itself is known to be touched.
    """

    files: frozenset[str]
    symbols: frozenset[str] = frozenset()
    parsed: frozenset[str] = frozenset()

    def symbols_in(self, path: str) -> frozenset[str]:
        prefix = path + "::"
        return frozenset(s for s in self.symbols if s.startswith(prefix))

    def overlap(self, other: Touch) -> str | None:
        """The first shared file or symbol (in sorted order), or None when they are apart."""
        for path in sorted(self.files & other.files):
            if path in self.parsed and path in other.parsed:
                shared = self.symbols_in(path) & other.symbols_in(path)
                if shared:
                    return f"symbol {min(shared)}"
                continue
            return f"file {path}"
        return None

    def union(self, other: Touch) -> Touch:
        # a file is `parsed` in the union only when both sides know its symbols
        both = (self.parsed | other.parsed) - (self.files - self.parsed) - (other.files - other.parsed)
        return Touch(self.files | other.files, self.symbols | other.symbols, both)


EMPTY_TOUCH = Touch(frozenset())


@dataclass(frozen=True, slots=True)
class PendingCommit:
    """An upstream commit to plan, in upstream order."""

    sha: Sha
    subject: str
    touch: Touch
    pr: int | None = None
    reverts: Sha | None = None  # the upstream commit this one reverts (or relands, via a revert of a revert)
    deferred_chain: str | None = None  # the chain an earlier run deferred it into


@dataclass(frozen=True, slots=True)
class ChainSpec:
    """A risk chain declared in forkflow.toml ([[ingest.chain]])."""

    name: str
    paths: tuple[str, ...] = ()  # globs; `**` crosses folders
    symbols: tuple[str, ...] = ()  # globs over `path::Qualified.name` or bare names
    owner: str = ""


class UnitKind(str, enum.Enum):
    BUNDLE = "bundle"
    CHAIN = "chain"


@dataclass(frozen=True, slots=True)
class Unit:
    """A landing unit as planned: a bundle, or a chain whose links land one by one."""

    kind: UnitKind
    name: str
    commits: tuple[Sha, ...]
    reasons: dict[Sha, str] = field(default_factory=dict)
    owner: str = ""
    needs_resolution: bool = False

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind.value, "name": self.name, "commits": list(self.commits),
                "reasons": dict(self.reasons), "owner": self.owner,
                "needs_resolution": self.needs_resolution}


@dataclass(frozen=True, slots=True)
class Plan:
    units: tuple[Unit, ...]
    base: Sha  # the fork tip the plan was probed on

    @property
    def commit_count(self) -> int:
        return sum(len(u.commits) for u in self.units)

    def to_json(self) -> dict[str, object]:
        return {"base": self.base, "units": [u.to_json() for u in self.units]}
