"""Conflict resolvers, tried in order: recorded resolutions, trivial merges, structural merges, a
side that already has the other's change (`lag`), the other side's change in lines one side only
re-laid out (`layout`), an agent, then edits of the same lines word by word (`tokens`), the
syntax-tree merge (`syntax`) and the fork's lines where they hold most of upstream's change
(`version`).  What a rule answers lands alone only where the fork's history trusts
it (conflicts/trust.py).

Each resolver proposes; `forkflow.conflicts.engine` checks every proposal with the guardrails.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from forkflow.conflicts.case import ConflictCase


@dataclass(frozen=True, slots=True)
class Proposal:
    content: bytes | None  # None deletes the path
    note: str


class Resolver(Protocol):
    name: str

    def propose(self, case: ConflictCase) -> Proposal | None:
        """A resolution of the whole conflicted file, or None when this resolver has none."""
        ...


# the agent before the rules that are right only about half the time: where it is configured, its
# proposal is the one a person reads (the trust gate logs no rule's proposal over it)
DEFAULT_ORDER = ("recorded", "trivial", "structural", "lag", "layout", "agent", "tokens", "syntax", "version")
