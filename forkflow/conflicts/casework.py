"""From a conflicted pick to resolver input, and the resolvers forkflow.toml asks for."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from forkflow.conflicts.case import ConflictCase
from forkflow.conflicts.classify import (
    BASE_LABEL,
    OURS_LABEL,
    Segment,
    THEIRS_LABEL,
    classify,
    conflict_key,
    parse_marked,
)
from forkflow.conflicts.engine import extra_factories
from forkflow.conflicts.resolvers import Resolver
from forkflow.conflicts.resolvers.agent import (
    AgentResolver, AgentSettings, Attempt, Backend, CommandBackend, HttpBackend,
)
from forkflow.conflicts.resolvers.recorded import RecordedResolver
from forkflow.conflicts.resolvers.trivial import TrivialResolver
from forkflow.git.commits import file_at
from forkflow.git.repo import Repo
from forkflow.git.pick import MemoryPicker, PathConflict, Side
from forkflow.models import Sha


def _content(picker: MemoryPicker, side: Side | None) -> bytes | None:
    if side is None or side.is_submodule:
        return None
    return picker.blob(side.oid)


def build_case(repo: Repo, picker: MemoryPicker, sha: Sha, conflict: PathConflict,
               with_history: bool = True, fork_point: Sha | None = None) -> ConflictCase:
    """Contents of each side, the kind of conflict and, for text, git's diff3 regions and the path
    at the fork point (`fork_point`, else where the checked-out fork branch and the upstream commit
    meet); with the fork's own earlier resolutions of the same regions (and file) as examples (see
    fork_history)."""
    base, ours, theirs = (_content(picker, s) for s in (conflict.base, conflict.ours, conflict.theirs))
    binary = any(x is not None and b"\0" in x[:8000] for x in (base, ours, theirs))
    b, o, t = ((s.mode, s.path) if s else None for s in (conflict.base, conflict.ours, conflict.theirs))
    kind = classify(b, o, t, is_binary=binary)
    raw, _ = picker.raw_message(sha)
    message = raw.decode("utf-8", "replace")
    segments: tuple[Segment, ...] = ()
    key = ""
    if kind.is_text:
        _, merged = repo.merge_file(ours or b"", base or b"", theirs or b"",
                                    (OURS_LABEL, BASE_LABEL, THEIRS_LABEL))
        parsed = parse_marked(merged.decode("utf-8", "surrogateescape"))
        if parsed is not None:
            segments = parsed
            key = conflict_key(parsed)
    case = ConflictCase(sha, message.split("\n", 1)[0], message, conflict.path, kind, base, ours, theirs,
                        segments, key)
    if segments:
        point = fork_point or repo.merge_base("HEAD", sha)
        case = replace(case, origin=file_at(picker, point, conflict.path) if point else None)
    if with_history and segments:
        from forkflow.conflicts.learn import fork_history  # it builds cases itself, without history

        case = replace(case, examples=fork_history(repo).matching(case))
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
