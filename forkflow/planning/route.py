"""Route pending upstream commits into risk chains and low-risk bundles, each with its reason.  [pure]"""
from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from forkflow.models import Sha
from forkflow.planning.model import EMPTY_TOUCH, ChainSpec, PendingCommit, Touch, Unit, UnitKind

DEFAULT_MAX_BUNDLE = 50
LOW_RISK = "low risk: touches no chain, pin file or fork change"


@dataclass(frozen=True, slots=True)
class RoutingRules:
    chains: tuple[ChainSpec, ...] = ()
    footprint: Touch = EMPTY_TOUCH  # what the fork changed: its own patches
    pin_files: tuple[str, ...] = ()
    max_bundle: int = DEFAULT_MAX_BUNDLE


@dataclass
class _Chain:
    name: str
    owner: str = ""
    commits: list[Sha] = field(default_factory=list)
    reasons: dict[Sha, str] = field(default_factory=dict)
    touch: Touch = EMPTY_TOUCH
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


def _chain_for(c: PendingCommit, rules: RoutingRules, chains: dict[str, _Chain],
               member: dict[Sha, str], conflicting: Mapping[Sha, str]) -> tuple[str, str, str] | None:
    """(chain name, owner, reason) when the commit is risky, else None."""
    if c.deferred_chain:
        return c.deferred_chain, "", f"deferred earlier in chain {c.deferred_chain}"
    if c.sha in conflicting:
        return f"resolve-{c.sha[:10]}", "", f"conflicts when picked: {conflicting[c.sha]}"
    if c.reverts is not None and c.reverts in member:
        name = member[c.reverts]
        return name, "", f"reverts or relands {c.reverts[:12]}, which is in chain {name}"
    declared = _declared(c, rules.chains)
    if declared is not None:
        return declared[0].name, declared[0].owner, declared[1]
    for chain in chains.values():
        shared = c.touch.overlap(chain.touch)
        if shared is not None:
            return chain.name, "", f"depends on chain {chain.name}: both touch {shared}"
    pin = next((p for p in sorted(c.touch.files) if any(path_matches(p, g) for g in rules.pin_files)), None)
    if pin is not None:
        return f"pin:{pin}", "", f"updates pin file {pin}"
    shared = c.touch.overlap(rules.footprint)
    if shared is not None:
        where = shared.split(" ", 1)[1].split("::", 1)[0]
        return f"fork:{where}", "", f"touches the fork's own change: {shared}"
    return None


def route(commits: Sequence[PendingCommit], rules: RoutingRules,
          conflicting: Mapping[Sha, str] | None = None) -> tuple[Unit, ...]:
    """Units in upstream order of their first commit; every commit gets exactly one unit and a reason.

    Args:
        commits: pending upstream commits, oldest first.
        rules: declared chains, the fork's footprint, pin files and the bundle size.
        conflicting: commits the in-memory probe found conflicting, with what conflicted.
    """
    conflicting = conflicting or {}
    chains: dict[str, _Chain] = {}
    member: dict[Sha, str] = {}  # sha -> chain name
    bundles: list[_Chain] = []
    created: list[tuple[UnitKind, _Chain]] = []  # units in the order of their first commit
    for c in commits:
        hit = _chain_for(c, rules, chains, member, conflicting)
        if hit is not None:
            name, owner, reason = hit
            if name not in chains:
                chains[name] = _Chain(name, owner)
                created.append((UnitKind.CHAIN, chains[name]))
            chain = chains[name]
            chain.commits.append(c.sha)
            chain.reasons[c.sha] = reason
            chain.touch = chain.touch.union(c.touch)
            chain.needs_resolution = chain.needs_resolution or c.sha in conflicting
            member[c.sha] = name
            continue
        if not bundles or len(bundles[-1].commits) >= max(1, rules.max_bundle):
            bundles.append(_Chain(f"bundle-{c.sha[:10]}"))
            created.append((UnitKind.BUNDLE, bundles[-1]))
        bundles[-1].commits.append(c.sha)
        bundles[-1].reasons[c.sha] = LOW_RISK
    return tuple(Unit(UnitKind.CHAIN, u.name, tuple(u.commits), u.reasons, u.owner, u.needs_resolution)
                 if kind is UnitKind.CHAIN else Unit(UnitKind.BUNDLE, u.name, tuple(u.commits), u.reasons)
                 for kind, u in created)
