"""From a conflicted pick to resolver input, and the resolvers forkflow.toml asks for."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

import pygit2

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
from forkflow.conflicts.history import History
from forkflow.config import DEFAULT_MARKERS
from forkflow.ledger.evidence import markers, trailers
from forkflow.conflicts.resolvers import Resolver
from forkflow.conflicts.resolvers.agent import AgentResolver, Attempt, Backend, CommandBackend, HttpBackend
from forkflow.conflicts.resolvers.recorded import RecordedResolver
from forkflow.conflicts.resolvers.trivial import TrivialResolver
from forkflow.errors import GitError, UserError
from forkflow.git.repo import Repo
from forkflow.landing.pick import MemoryPicker, PathConflict, Side
from forkflow.landing.settings import AgentSettings
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
        case = replace(case, origin=_blob_at(picker, point, conflict.path) if point else None)
    if with_history and segments:
        case = replace(case, examples=fork_history(repo).matching(case))
    return case


def _blob_at(picker: MemoryPicker, commit: Sha, path: str) -> bytes | None:
    try:
        obj = picker.repo[commit].peel(pygit2.Commit).tree[path]
    except (KeyError, ValueError, pygit2.GitError):
        return None
    return obj.data if isinstance(obj, pygit2.Blob) else None


_HISTORIES: dict[str, History] = {}
MAX_PAST_PICKS = 400  # the newest picks replayed, once per run on its first conflict: 14 s on fbtriton


def fork_history(repo: Repo) -> History:
    """What the fork's engineers made of the conflicts of its past picks: the newest commits of the
    checked-out fork branch that name the upstream commit they pick (`(cherry picked from commit
    X)`, `Upstream-Commit: X`, the other markers of DEFAULT_MARKERS), replayed in memory once per
    process and repository (conflicts.learn); the branch moving as units land does not relearn."""
    from forkflow.conflicts.learn import learn_from_picks  # it builds cases itself, without history

    tip = repo.resolve("HEAD")
    if tip is None:
        return History()
    cache = str(repo.path)  # once per run: what the run lands itself, forkflow records
    if cache not in _HISTORIES:
        _HISTORIES.clear()
        try:
            _HISTORIES[cache] = learn_from_picks(repo.path, reversed(past_picks(repo, tip)))[0]
        except (GitError, UserError):  # no history to learn from is no reason to stop a pick
            _HISTORIES[cache] = History()
    return _HISTORIES[cache]


def past_picks(repo: Repo, tip: Sha) -> list[tuple[Sha, Sha]]:
    """(upstream sha, fork sha) of the newest single-commit picks reachable from `tip`, newest first."""
    out = git_log_messages(repo, tip)
    patterns = [re.compile(p) for p in DEFAULT_MARKERS]
    picks: list[tuple[Sha, Sha]] = []
    for fork_sha, message in out:
        named = set(trailers(message)) | set(markers(message, patterns))
        if len(named) == 1:
            named_sha = named.pop()
            up = Sha(named_sha) if len(named_sha) == 40 else repo.resolve(named_sha)
            if up is not None:
                picks.append((up, fork_sha))
        if len(picks) == MAX_PAST_PICKS:
            break
    return picks


def git_log_messages(repo: Repo, tip: Sha) -> list[tuple[Sha, str]]:
    raw = repo.git("log", "--no-merges", "-E", "-i", "--grep=cherry picked from commit|Upstream-Commit:|"
                   "Revision:|Original Commit:|Upstream commit:", "--format=%H%x00%B%x1e", tip)
    out = []
    for rec in raw.split("\x1e"):
        if "\x00" in rec:
            sha, body = rec.strip("\n").split("\x00", 1)
            out.append((Sha(sha), body))
    return out


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
