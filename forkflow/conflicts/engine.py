"""Try resolvers in order; a proposal is used only when the guardrails accept it."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from forkflow.conflicts import guardrails
from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.history import History
from forkflow.conflicts.resolvers import Resolver
from forkflow.conflicts.resolvers.lag import LagResolver
from forkflow.conflicts.resolvers.layout import LayoutResolver
from forkflow.conflicts.resolvers.recorded import HistoryResolver
from forkflow.conflicts.resolvers.structural import StructuralResolver
from forkflow.conflicts.resolvers.trivial import TrivialResolver


@dataclass(frozen=True, slots=True)
class CaseResolution:
    resolved: bool
    content: bytes | None = None
    resolver: str = ""
    regions: tuple[str, ...] = ()
    tried: tuple[str, ...] = ()  # "resolver: what happened", for the record kept for people


def resolve_case(case: ConflictCase, resolvers: Sequence[Resolver]) -> CaseResolution:
    """The first guardrail-approved proposal, or what every resolver said."""
    tried: list[str] = []
    for r in resolvers:
        proposal = r.propose(case)
        if proposal is None:
            tried.append(f"{r.name}: no proposal")
            continue
        verdict = guardrails.check(case, proposal.content)
        if not verdict.ok:
            tried.append(f"{r.name}: rejected ({verdict.reason})")
            continue
        tried.append(f"{r.name}: {proposal.note}")
        return CaseResolution(True, proposal.content, r.name, verdict.regions, tuple(tried))
    return CaseResolution(False, tried=tuple(tried))



def deterministic_resolvers(history: History | None = None) -> list[Resolver]:
    """The resolvers that need no endpoint, in the order they are tried: the fork's own past
    resolutions, trivial merges, structural merges, a side that already has the other's change
    word for word (`lag`), then the other side's change in lines one side only re-laid out
    (`layout`)."""
    chain: list[Resolver] = [HistoryResolver(history)] if history is not None else []
    return chain + [TrivialResolver(), StructuralResolver(), LagResolver(), LayoutResolver()]


def extra_factories() -> dict[str, Callable[[], Resolver | None]]:
    """Resolvers beyond recorded/trivial/agent that `forkflow ingest` builds by name."""
    return {"structural": StructuralResolver, "lag": LagResolver, "layout": LayoutResolver}
