"""From a conflicted pick to resolver input, and the resolvers forkflow.toml asks for."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from forkflow.conflicts.bare import bare_case
from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.classify import ConflictKind
from forkflow.conflicts.engine import CaseResolution, extra_factories
from forkflow.config import Config
from forkflow.conflicts.learn import fork_book, fork_history
from forkflow.conflicts.resolvers import Resolver
from forkflow.conflicts.resolvers.agent import (
    AgentResolver, AgentSettings, Attempt, Backend, CommandBackend, HttpBackend,
)
from forkflow.conflicts.resolvers.recorded import RecordedResolver
from forkflow.conflicts.resolvers.trivial import TrivialResolver
from forkflow.conflicts.rulebook import agent_proposal_waits, save_book
from forkflow.conflicts.trust import RuleBook, TrustGate, trust_settings
from forkflow.git.repo import Repo
from forkflow.git.pick import MemoryPicker, PathConflict
from forkflow.models import Sha


@dataclass
class Settlement:
    """The conflicted paths of one pick or merge, sorted by the answers the trust gate let through:
    each resolved path's content, the case, regions and resolver that made it, and the cases left
    for a person with what was tried."""
    contents: dict[str, bytes | None] = field(default_factory=dict)
    used: list[tuple[ConflictCase, tuple[str, ...], str]] = field(default_factory=list)
    unresolved: list[tuple[ConflictCase, tuple[str, ...]]] = field(default_factory=list)

    def add(self, case: ConflictCase, outcome: CaseResolution) -> None:
        if outcome.resolved:
            self.contents[case.path] = outcome.content
            self.used.append((case, outcome.regions, outcome.resolver))
        else:
            self.unresolved.append((case, outcome.tried))


def build_case(repo: Repo, picker: MemoryPicker, sha: Sha, conflict: PathConflict,
               with_history: bool = True, fork_point: Sha | None = None) -> ConflictCase:
    """The conflict as resolver input (`conflicts/bare.py`) with, for text, the fork's own earlier
    resolutions of the same regions (and file) as examples, and for a delete/modify how the fork
    settled the path before (see fork_history)."""
    case = bare_case(repo, picker, sha, conflict, fork_point)
    if with_history and case.segments:
        case = replace(case, examples=fork_history(repo).matching(case))
    elif with_history and case.kind is ConflictKind.DELETE_MODIFY:
        case = replace(case, settled_path=fork_history(repo).settled_path(case.path, case.deleted_by))
    return case


def agent_backend(settings: AgentSettings, env: dict[str, str]) -> Backend | None:
    if settings.command:
        return CommandBackend(settings.command, settings.timeout)
    if settings.url:
        return HttpBackend(settings.url, settings.model, env.get(settings.api_key_env), settings.timeout)
    return None


def build_resolvers(order: tuple[str, ...], lookup: Callable[[str], tuple[list[str], str] | None],
                    agent: AgentSettings, log: Callable[[Attempt], None], env: dict[str, str],
                    with_agent: bool = True) -> list[Resolver]:
    """Resolvers in the configured order; the agent only when one is configured (and wanted)."""
    factories: dict[str, Callable[[], Resolver | None]] = {
        "recorded": lambda: RecordedResolver(lookup),
        "trivial": TrivialResolver,
        "agent": lambda: _agent(agent, log, env) if with_agent else None,
        **extra_factories(),
    }
    out = []
    for name in order:
        r = factories[name]()
        if r is not None:
            out.append(r)
    return out


def _agent(settings: AgentSettings, log: Callable[[Attempt], None], env: dict[str, str]) -> Resolver | None:
    backend = agent_backend(settings, env)
    return AgentResolver(backend, log, settings.max_bytes, settings.autoland) if backend is not None else None


def trust_gate(repo: Repo, config: Config, reader: object, writes: bool = True) -> TrustGate:
    """The landing's trust gate (conflicts/trust.py): each rule's backtest on this fork, learnt with
    the fork's history at the first conflict and kept in the store for `forkflow conflicts rules`
    and the dashboard.  `reader` logs proposals (`log_attempt`) and names the store and fork
    (`store`, `fork_id`); a dry run (`writes` False) logs and keeps nothing."""
    found = getattr(reader, "log_attempt", None) if writes else None
    log: Callable[[Attempt], None] = found if callable(found) else (lambda a: None)
    store = getattr(reader, "store", None) if writes else None
    fid = getattr(reader, "fork_id", None)
    kept: list[RuleBook] = []

    def book() -> RuleBook:
        if not kept:
            kept.append(fork_book(repo))
            if store is not None and isinstance(fid, int):
                with store.session_scope() as s:
                    save_book(s, fid, kept[0])
        return kept[0]

    def agent_waits(case: ConflictCase) -> bool:
        if store is None or not isinstance(fid, int):
            return False
        with store.session_scope() as s:
            return agent_proposal_waits(s, fid, case.upstream_sha, case.path)

    return TrustGate(trust_settings(config), book, log, agent_waits)
