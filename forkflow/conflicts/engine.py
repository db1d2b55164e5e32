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
from forkflow.conflicts.resolvers.syntax import SyntaxResolver
from forkflow.conflicts.resolvers.trivial import TrivialResolver
from forkflow.conflicts.resolvers.version import VersionResolver


@dataclass(frozen=True, slots=True)
class CaseResolution:
    resolved: bool
    content: bytes | None = None
    resolver: str = ""
    regions: tuple[str, ...] = ()
    tried: tuple[str, ...] = ()  # "resolver: what happened", for the record kept for people
    note: str = ""  # the winning proposal's note: the rules that made it (conflicts/trust.py)


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
        return CaseResolution(True, proposal.content, r.name, verdict.regions, tuple(tried), proposal.note)
    return CaseResolution(False, tried=tuple(tried))


def _tokens() -> Resolver:
    return StructuralResolver(by_tokens=True)


def deterministic_resolvers(history: History | None = None) -> list[Resolver]:
    """The resolvers that need no endpoint, in the order they are tried: the fork's own past
    resolutions, trivial merges, structural merges, a side that already has the other's change
    word for word (`lag`), the other side's change in lines one side only re-laid out (`layout`),
    then the two that reach further and are right less often, whose answers the trust gate keeps
    as proposals until they earn their record on the fork (conflicts/trust.py): edits of the same
    lines merged word by word (`tokens`), the syntax-tree merge (`syntax`), and the fork's lines
    where they already hold most of upstream's change (`version`)."""
    chain: list[Resolver] = [HistoryResolver(history)] if history is not None else []
    return chain + [TrivialResolver(), StructuralResolver(), LagResolver(), LayoutResolver(), _tokens(),
                    SyntaxResolver(), VersionResolver()]


def extra_factories() -> dict[str, Callable[[], Resolver | None]]:
    """Resolvers beyond recorded/trivial/agent that `forkflow ingest` builds by name."""
    return {"structural": StructuralResolver, "lag": LagResolver, "layout": LayoutResolver, "tokens": _tokens,
            "syntax": SyntaxResolver, "version": VersionResolver}
