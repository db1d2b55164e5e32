"""The `[ingest]` section of forkflow.toml, checked key by key."""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from forkflow.config import Config, config_error
from forkflow.conflicts.resolvers import DEFAULT_ORDER
from forkflow.conflicts.resolvers.agent import AgentSettings
from forkflow.landing.queue import DEFAULT_MAX_BATCH
from forkflow.planning.model import ChainSpec
from forkflow.planning.route import DEFAULT_MAX_BUNDLE
from forkflow.tiers.tiers import Tier, load_suites, suites_of


@dataclass(frozen=True, slots=True)
class IngestSettings:
    l1_command: str | None = None
    l1_timeout: float = 3600.0
    max_bundle: int = DEFAULT_MAX_BUNDLE
    chains: tuple[ChainSpec, ...] = ()
    pin_files: tuple[str, ...] = ()
    push_remote: str = "origin"
    resolvers: tuple[str, ...] = DEFAULT_ORDER
    agent: AgentSettings = AgentSettings()
    has_l1_suites: bool = False
    split_failed_bundles: bool = True  # bisect a bundle that fails L1 within the run
    split_max_gate_runs: int = 16  # L1 runs one failed bundle's bisection may take
    max_batch: int = DEFAULT_MAX_BATCH  # weighted commits one gate run of the landing queue validates
    runners: int = 1  # gate runs at once (speculative stacks: batch 1, batch 1+2, ...)
    landing: str = "bundle"  # a bundle lands as one commit; "per-commit": one fork commit per upstream commit


def _get(sect: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any, config: Config,
         full: str) -> Any:
    value = sect.get(key, default)
    if value is default:
        return value
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise config_error(config.path, config.text, full,
                           f"must be a {names}, not {type(value).__name__} {value!r}")
    return value


def _strings(sect: dict[str, Any], key: str, config: Config, full: str) -> tuple[str, ...]:
    values = _get(sect, key, list, [], config, full)
    for v in values:
        if not isinstance(v, str) or not v:
            raise config_error(config.path, config.text, full, f"must list non-empty strings, not {v!r}")
    return tuple(values)


def _chains(sect: dict[str, Any], config: Config) -> tuple[ChainSpec, ...]:
    raw = _get(sect, "chain", list, [], config, "ingest.chain")
    out: list[ChainSpec] = []
    for item in raw:
        if not isinstance(item, dict):
            raise config_error(config.path, config.text, "ingest.chain",
                               "must be [[ingest.chain]] tables with name, paths, symbols, owner")
        name = _get(item, "name", str, "", config, "ingest.chain.name")
        if not name or any(c.isspace() for c in name):
            raise config_error(config.path, config.text, "ingest.chain.name",
                               f"must be a non-empty name without spaces, not {name!r}")
        paths = _strings(item, "paths", config, "ingest.chain.paths")
        symbols = _strings(item, "symbols", config, "ingest.chain.symbols")
        if not paths and not symbols:
            raise config_error(config.path, config.text, "ingest.chain.name",
                               f"chain {name!r} needs paths or symbols")
        owner = _get(item, "owner", str, "", config, "ingest.chain.owner")
        out.append(ChainSpec(name, paths, symbols, owner))
    return tuple(out)


def _agent(sect: dict[str, Any], config: Config) -> AgentSettings:
    a = _get(sect, "agent", dict, {}, config, "ingest.agent")
    command = _get(a, "command", (str, list), "", config, "ingest.agent.command")
    argv = tuple(shlex.split(command)) if isinstance(command, str) else tuple(str(x) for x in command)
    timeout = _get(a, "timeout", (int, float), 120.0, config, "ingest.agent.timeout")
    if not timeout > 0:  # NaN too
        raise config_error(config.path, config.text, "ingest.agent.timeout", f"must be a number > 0, not {timeout}")
    url = _get(a, "url", str, "", config, "ingest.agent.url")
    if url and not url.startswith(("http://", "https://")):
        raise config_error(config.path, config.text, "ingest.agent.url",
                           f"must be an http(s):// URL, not {url!r}")
    model = _get(a, "model", str, "", config, "ingest.agent.model")
    if url and not model:
        raise config_error(config.path, config.text, "ingest.agent.url", "needs ingest.agent.model too")
    return AgentSettings(argv, url, model, _get(a, "api_key_env", str, "OPENAI_API_KEY", config,
                                                "ingest.agent.api_key_env"),
                         float(timeout), int(_get(a, "max_bytes", int, 200_000, config, "ingest.agent.max_bytes")),
                         _get(a, "autoland", bool, False, config, "ingest.agent.autoland"))


def ingest_settings(config: Config) -> IngestSettings:
    """Read and check `[ingest]`; a wrong key raises a UserError naming it and its line."""
    sect = config.section("ingest")
    if "ingest" in config.raw and not isinstance(config.raw["ingest"], dict):
        raise config_error(config.path, config.text, "ingest", "must be a table: [ingest]")
    l1 = _get(sect, "l1_command", str, None, config, "ingest.l1_command")
    timeout = _get(sect, "l1_timeout", (int, float), 3600.0, config, "ingest.l1_timeout")
    if not timeout > 0 or timeout == float("inf"):  # NaN used to pass and exit 3 later
        raise config_error(config.path, config.text, "ingest.l1_timeout", f"must be a number > 0, not {timeout}")
    max_bundle = _get(sect, "max_bundle", int, DEFAULT_MAX_BUNDLE, config, "ingest.max_bundle")
    if max_bundle < 1:
        raise config_error(config.path, config.text, "ingest.max_bundle", f"must be >= 1, not {max_bundle}")
    resolvers = _strings(sect, "resolvers", config, "ingest.resolvers") or DEFAULT_ORDER
    unknown = [r for r in resolvers if r not in DEFAULT_ORDER]
    if unknown:
        raise config_error(config.path, config.text, "ingest.resolvers",
                           f"names unknown resolver {unknown[0]!r} (known: {', '.join(DEFAULT_ORDER)})")
    split = _get(sect, "split_failed_bundles", bool, True, config, "ingest.split_failed_bundles")
    split_runs = _get(sect, "split_max_gate_runs", int, 16, config, "ingest.split_max_gate_runs")
    if split_runs < 1:
        raise config_error(config.path, config.text, "ingest.split_max_gate_runs",
                           f"must be >= 1, not {split_runs} (set split_failed_bundles = false to never split)")
    max_batch = _get(sect, "max_batch", int, DEFAULT_MAX_BATCH, config, "ingest.max_batch")
    if max_batch < 1:
        raise config_error(config.path, config.text, "ingest.max_batch", f"must be >= 1, not {max_batch}")
    runners = _get(sect, "runners", int, 1, config, "ingest.runners")
    if not 1 <= runners <= 64:
        raise config_error(config.path, config.text, "ingest.runners", f"must be from 1 to 64, not {runners}")
    landing = _get(sect, "landing", str, "bundle", config, "ingest.landing")
    if landing not in ("bundle", "per-commit"):
        raise config_error(config.path, config.text, "ingest.landing",
                           f'must be "bundle" or "per-commit", not {landing!r}')
    has_l1 = bool(suites_of(load_suites(config), Tier.L1))  # as `validate` reads them: no tier = L1
    return IngestSettings(
        l1_command=l1 or None, l1_timeout=float(timeout), max_bundle=max_bundle, chains=_chains(sect, config),
        pin_files=_strings(sect, "pin_files", config, "ingest.pin_files"),
        push_remote=_get(sect, "push_remote", str, "origin", config, "ingest.push_remote"),
        resolvers=resolvers, agent=_agent(sect, config), has_l1_suites=has_l1, split_failed_bundles=split,
        split_max_gate_runs=split_runs, max_batch=max_batch, runners=runners, landing=landing)
