"""Values of planning: what a commit touches, chain declarations, landing units, the plan.  [pure]"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from forkflow.models import Sha
from forkflow.planning.lines import Dependency

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
    deps: tuple[Dependency, ...] = ()  # the earlier pending commits it depends on, with evidence
    fork_overlap: str | None = None  # where its hunks meet lines the fork changed ("path:10-14")


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

    def link(self, sha: Sha) -> str:
        """The name of the link of this chain that lands `sha`: `chain#<sha10>`, or the chain's own
        name when the chain is named after that commit (`resolve-<sha10>`, `fork-<sha10>`).  Made
        of the chain and the commit alone, so a link keeps its name from plan to landing to retry
        (a position, `ops#2`, became `ops#1` once the link before it landed)."""
        return link_name(self.name, sha)

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind.value, "name": self.name, "commits": list(self.commits),
                "reasons": dict(self.reasons), "owner": self.owner,
                "needs_resolution": self.needs_resolution}


def link_name(chain: str, sha: Sha) -> str:
    """See `Unit.link`.  [pure]"""
    return chain if chain.endswith(f"-{sha[:10]}") else f"{chain}#{sha[:10]}"


def chain_of_link(name: str) -> str:
    """The chain a link's name belongs to (`ops#0123456789` -> `ops`).  [pure]"""
    return name.rsplit("#", 1)[0]


@dataclass(frozen=True, slots=True)
class HeldBack:
    """A commit the plan expects to wait: it conflicts or lacks a blob itself, or depends on one that does."""

    sha: Sha
    why: str  # one line: "conflict in a.py", "blob 1234 (bin/x) is not in this clone", "waits for ..."
    waits_for: Sha | None = None  # the held commit it depends on (None: it is held itself)
    evidence: Dependency | None = None

    def to_json(self) -> dict[str, object]:
        return {"sha": self.sha, "why": self.why, "waits_for": self.waits_for,
                "evidence": self.evidence.to_json() if self.evidence is not None else None}


@dataclass(frozen=True, slots=True)
class Plan:
    units: tuple[Unit, ...]
    base: Sha  # the fork tip the plan was probed on
    dependencies: dict[Sha, tuple[Dependency, ...]] = field(default_factory=dict)
    held_back: tuple[HeldBack, ...] = ()

    @property
    def commit_count(self) -> int:
        return sum(len(u.commits) for u in self.units)

    def depends_on(self) -> dict[Sha, tuple[Sha, ...]]:
        return {sha: tuple(d.on for d in ds) for sha, ds in self.dependencies.items()}

    def to_json(self) -> dict[str, object]:
        return {"base": self.base, "units": [u.to_json() for u in self.units],
                "dependencies": {sha: [d.to_json() for d in ds] for sha, ds in self.dependencies.items()},
                "held_back": [h.to_json() for h in self.held_back]}
