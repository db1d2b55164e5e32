"""Route pending upstream commits into risk chains and low-risk bundles, each with its reason.  [pure]"""
from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from forkflow.models import Sha
from forkflow.planning.lines import Dependency
from forkflow.planning.model import ChainSpec, PendingCommit, Unit, UnitKind

DEFAULT_MAX_BUNDLE = 50
LOW_RISK = "low risk: touches no chain, pin file or fork change"  # meets no line the fork changed


@dataclass(frozen=True, slots=True)
class RoutingRules:
    chains: tuple[ChainSpec, ...] = ()
    pin_files: tuple[str, ...] = ()
    max_bundle: int = DEFAULT_MAX_BUNDLE


@dataclass
class _Chain:
    name: str
    owner: str = ""
    commits: list[Sha] = field(default_factory=list)
    reasons: dict[Sha, str] = field(default_factory=dict)
    needs_resolution: bool = False


def path_matches(path: str, pattern: str) -> bool:
    """Glob match where `dir/**` covers everything below dir."""
    if pattern.endswith("/**"):
        return path == pattern[:-3] or path.startswith(pattern[:-2])
    return fnmatch.fnmatchcase(path, pattern)


def _declared(c: PendingCommit, chains: Sequence[ChainSpec]) -> tuple[ChainSpec, str] | None:
    for spec in chains:
        for path in sorted(c.touch.files):
            hit = next((p for p in spec.paths if path_matches(path, p)), None)
            if hit is not None:
                return spec, f"touches {path}, declared in chain {spec.name} ({hit})"
        for sym in sorted(c.touch.symbols):
            bare = sym.split("::", 1)[-1]
            hit = next((p for p in spec.symbols
                        if fnmatch.fnmatchcase(sym, p) or fnmatch.fnmatchcase(bare, p)), None)
            if hit is not None:
                return spec, f"touches symbol {sym}, declared in chain {spec.name} ({hit})"
    return None


def _chain_for(c: PendingCommit, rules: RoutingRules, member: dict[Sha, str], conflicting: Mapping[Sha, str],
               missing: Mapping[Sha, str], waiting: Mapping[Sha, Dependency]) -> tuple[str, str, str] | None:
    """(chain name, owner, reason) when the commit lands link by link in a chain, else None."""
    if c.deferred_chain:
        return c.deferred_chain, "", f"deferred earlier in chain {c.deferred_chain}"
    if c.sha in conflicting:  # a commit meeting the fork's lines keeps its unit's name (landing/ingest.py)
        name = f"fork-{c.sha[:10]}" if c.fork_overlap is not None and not _declared(c, rules.chains) \
            else f"resolve-{c.sha[:10]}"
        return name, "", f"conflicts when picked: {conflicting[c.sha]}"
    if c.sha in missing:
        return f"held-{c.sha[:10]}", "", missing[c.sha]
    declared = _declared(c, rules.chains)
    if declared is not None:
        return declared[0].name, declared[0].owner, declared[1]
    d = waiting.get(c.sha)
    if d is not None and d.on in member:
        name = member[d.on]
        return name, "", f"waits for {d.describe()}, which is in chain {name}"
    pin = next((p for p in sorted(c.touch.files) if any(path_matches(p, g) for g in rules.pin_files)), None)
    if pin is not None:
        return f"pin:{pin}", "", f"updates pin file {pin}"
    return None


def route(commits: Sequence[PendingCommit], rules: RoutingRules,
          conflicting: Mapping[Sha, str] | None = None,
          missing: Mapping[Sha, str] | None = None,
          waiting: Mapping[Sha, Dependency] | None = None) -> tuple[Unit, ...]:
    """Units in upstream order of their first commit; every commit gets exactly one unit and a reason.

    A commit joins a chain only through a real dependency (or a declaration); a commit that meets
    the fork's own lines is a unit of its own; the rest fill bundles, a new one starting where a
    commit depends on a unit created after the open bundle.

    Args:
        commits: pending upstream commits, oldest first, with their dependencies.
        rules: declared chains, pin files and the bundle size.
        conflicting: commits the in-memory probe found conflicting, with what conflicted.
        missing: commits that cannot be picked here (a blob this clone lacks, a path git refuses),
            with a one-line reason.
        waiting: commits the probe found waiting for one of those (or for a chain), with the dependency.
    """
    conflicting = conflicting or {}
    missing = missing or {}
    waiting = waiting or {}
    chains: dict[str, int] = {}  # chain name -> index in `created`
    member: dict[Sha, str] = {}  # sha -> chain name
    unit_of: dict[Sha, int] = {}  # sha -> index in `created`
    created: list[tuple[UnitKind, _Chain]] = []  # units in the order of their first commit
    bundle: int | None = None
    for c in commits:
        hit = _chain_for(c, rules, member, conflicting, missing, waiting)
        if hit is not None:
            name, owner, reason = hit
            if name not in chains:
                chains[name] = len(created)
                created.append((UnitKind.CHAIN, _Chain(name, owner)))
            chain = created[chains[name]][1]
            chain.commits.append(c.sha)
            chain.reasons[c.sha] = reason
            chain.needs_resolution = chain.needs_resolution or c.sha in conflicting
            member[c.sha] = name
            unit_of[c.sha] = chains[name]
            continue
        if c.fork_overlap is not None:
            unit_of[c.sha] = len(created)
            created.append((UnitKind.BUNDLE, _Chain(f"fork-{c.sha[:10]}", commits=[c.sha], reasons={
                c.sha: f"meets the fork's own lines: {c.fork_overlap}"})))
            continue
        after = max((unit_of[d.on] for d in c.deps if d.on in unit_of), default=-1)
        if bundle is None or len(created[bundle][1].commits) >= max(1, rules.max_bundle) or after > bundle:
            bundle = len(created)
            created.append((UnitKind.BUNDLE, _Chain(f"bundle-{c.sha[:10]}")))
        created[bundle][1].commits.append(c.sha)
        created[bundle][1].reasons[c.sha] = LOW_RISK
        unit_of[c.sha] = bundle
    return tuple(Unit(UnitKind.CHAIN, u.name, tuple(u.commits), u.reasons, u.owner, u.needs_resolution)
                 if kind is UnitKind.CHAIN else Unit(UnitKind.BUNDLE, u.name, tuple(u.commits), u.reasons)
                 for kind, u in created)
