"""`forkflow.toml`: load it into a frozen Config, or say which key on which line is wrong."""
from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forkflow.errors import UserError

CONFIG_NAME = "forkflow.toml"
# forkflow's own state (store, logs, runs, caches) lives in this folder of the repository's git
# common directory, where no checkout, pick or work-tree update writes (see forkflow/state.py)
STATE_DIR = "forkflow"

# Other tools' pick markers.  Each regex has one group: the upstream sha (7 to 40 hex digits).
DEFAULT_MARKERS: tuple[str, ...] = (
    r"\(cherry picked from commit ([0-9a-f]{7,40})\)",
    r"Reactor Cherry-pick Revision:\s*([0-9a-f]{7,40})",
    r"Reactor Backport Revision:\s*([0-9a-f]{7,40})",
    r"Original Commit:\s*([0-9a-f]{7,40})",
    r"Upstream commit:\s*([0-9a-f]{7,40})",
)


# Every section and key forkflow.toml may have, each read by its subsystem.  All are checked here,
# at load, so that a misspelt key or section is an error with its line, never a silent default
# (issue 12).  A subsystem that reads a new key adds it to this table in the same change.
SECTION_KEYS: dict[str, tuple[str, ...]] = {
    "upstream": ("remote", "branch", "first_parent"),
    "fork": ("branch", "name", "intake"),
    "store": ("url",),
    "ledger": ("infer_threshold", "markers", "opt_out"),
    "trust": ("min_precision", "min_cases"),  # conflicts/trust.py: when a resolver rule lands alone
    "ingest": ("l1_command", "l1_timeout", "max_bundle", "resolvers", "split_failed_bundles",
               "split_max_gate_runs", "pin_files", "push_remote", "chain", "agent", "land",
               "untested_paths", "review", "max_batch", "runners", "landing"),
    "ingest.chain": ("name", "owner", "paths", "symbols"),
    "ingest.agent": ("command", "url", "model", "api_key_env", "timeout", "max_bytes", "autoland"),
    "ingest.review": ("sink", "github_repo", "github_api", "github_token_env", "gitlab_project", "gitlab_api",
                      "gitlab_token_env", "remote", "branch_prefix", "approvers", "teams", "min_approvals"),
    "suite": (),
    "validation": ("runner", "ray_address", "retired", "shrink_tolerance", "jobs", "selection_budget"),
    "bisect": ("command",),
    "l3": ("identity", "api", "token_env"),  # tiers/l3.py: whose account signs off
    "owners": (),  # path glob -> people; its keys are globs, checked by owners_table
    "triage": ("reruns", "min_clean_reruns", "history_runs", "close_after", "sink", "markdown_dir",
               "github_repo", "github_api", "github_token_env", "gitlab_project", "gitlab_api",
               "gitlab_token_env", "agent_command", "agent_endpoint", "agent_model", "agent_key_env"),
}
SECTIONS = tuple(k for k in SECTION_KEYS if "." not in k)
# `[[suite]]` keys are checked (with their suite's name) by tiers.load_suites
_CHECKED_ELSEWHERE = ("suite", "owners")


@dataclass(frozen=True, slots=True)
class LedgerConfig:
    infer_threshold: float = 0.95
    markers: tuple[str, ...] = DEFAULT_MARKERS
    # regexes searched in upstream commit messages: a match opts the commit out (SKIPPED)
    opt_out: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Config:
    """What `forkflow.toml` says.  Sections of later subsystems stay in `raw`."""

    path: Path | None
    upstream_remote: str = "upstream"
    upstream_branch: str = "main"
    fork_branch: str = "main"
    store_url: str = ""
    ledger: LedgerConfig = LedgerConfig()
    raw: dict[str, Any] = field(default_factory=dict)
    text: str = ""  # the TOML it was parsed from: every section's errors name lines in it

    @property
    def root(self) -> Path:
        return self.path.parent if self.path else Path.cwd()

    @property
    def upstream_ref(self) -> str:
        return f"refs/remotes/{self.upstream_remote}/{self.upstream_branch}"

    @property
    def fork_ref(self) -> str:
        return f"refs/heads/{self.fork_branch}"

    def resolved_store_url(self, state: Path) -> str:
        """`FORKFLOW_STORE` wins over the file; the default is SQLite in `state`, the fork's state
        folder (`forkflow.state.state_dir`: `<git-common-dir>/forkflow/`)."""
        url = os.environ.get("FORKFLOW_STORE") or self.store_url
        if url:
            return url
        return f"sqlite:///{state / 'forkflow.db'}"

    def section(self, name: str) -> dict[str, Any]:
        value = self.raw.get(name, {})
        return value if isinstance(value, dict) else {}


def key_line(text: str, key: str) -> int | None:
    """The 1-based line where `key = ...` is written, for error messages."""
    leaf = key.split(".")[-1]
    for no, line in enumerate(text.splitlines(), 1):
        if re.match(rf"\s*{re.escape(leaf)}\s*=", line):
            return no
    return None


def config_error(path: Path | None, text: str, key: str, problem: str) -> UserError:
    """A UserError naming the key and its line in forkflow.toml."""
    where = f"{path}" if path else CONFIG_NAME
    line = key_line(text, key)
    at = f":{line}" if line else ""
    return UserError(f"{where}{at}: key '{key}' {problem}; fix it and retry")


def _expect(value: Any, kind: type | tuple[type, ...], path: Path | None, text: str, key: str) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise config_error(path, text, key, f"must be a {names}, not {type(value).__name__} {value!r}")
    return value


def parse_config(text: str, path: Path | None = None) -> Config:
    """Parse forkflow.toml text; raise UserError naming the key and line on any mistake."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path or CONFIG_NAME}: malformed TOML ({e}); fix it and retry") from e
    _check_names(raw, path, text)
    up = raw.get("upstream", {})
    fork = raw.get("fork", {})
    store = raw.get("store", {})
    ledger = raw.get("ledger", {})
    for name, sect in (("upstream", up), ("fork", fork), ("store", store), ("ledger", ledger)):
        _expect(sect, dict, path, text, name)
    threshold = _expect(ledger.get("infer_threshold", 0.95), (int, float), path, text,
                        "ledger.infer_threshold")
    if not 0 < threshold <= 1:
        raise config_error(path, text, "ledger.infer_threshold", f"must be in (0, 1], not {threshold}")
    markers = _expect(ledger.get("markers", list(DEFAULT_MARKERS)), list, path, text, "ledger.markers")
    for m in markers:
        _expect(m, str, path, text, "ledger.markers")
        try:
            compiled = re.compile(m)
        except re.error as e:
            raise config_error(path, text, "ledger.markers", f"has an invalid regex {m!r} ({e})") from e
        if compiled.groups < 1:
            raise config_error(path, text, "ledger.markers",
                               f"regex {m!r} needs one (group) that captures the upstream sha")
    opt_out = _expect(ledger.get("opt_out", []), list, path, text, "ledger.opt_out")
    for m in opt_out:
        _expect(m, str, path, text, "ledger.opt_out")
        try:
            re.compile(m)
        except re.error as e:
            raise config_error(path, text, "ledger.opt_out", f"has an invalid regex {m!r} ({e})") from e
    owners_table(raw, path, text)
    return Config(
        path=path,
        upstream_remote=_expect(up.get("remote", "upstream"), str, path, text, "upstream.remote"),
        upstream_branch=_expect(up.get("branch", "main"), str, path, text, "upstream.branch"),
        fork_branch=_expect(fork.get("branch", "main"), str, path, text, "fork.branch"),
        store_url=_expect(store.get("url", ""), str, path, text, "store.url"),
        ledger=LedgerConfig(infer_threshold=float(threshold), markers=tuple(markers), opt_out=tuple(opt_out)),
        raw=raw,
        text=text,
    )


def owners_table(raw: dict[str, Any], path: Path | None = None, text: str = "") -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`[owners]`: path glob -> a person or a list of people (conflicts/owners.py), in file order."""
    table = _expect(raw.get("owners", {}), dict, path, text, "owners")
    out = []
    for glob, who in table.items():
        people = [who] if isinstance(who, str) else _expect(who, list, path, text, f"owners.{glob}")
        out.append((glob, tuple(_expect(p, str, path, text, f"owners.{glob}") for p in people)))
    return tuple(out)


def section_line(text: str, name: str) -> int | None:
    """The line of `[name]` or `[[name]]`, for error messages."""
    for no, ln in enumerate(text.splitlines(), 1):
        if re.match(rf"\s*\[+\s*{re.escape(name)}\s*\]", ln):
            return no
    return None


def table_key_line(text: str, table: str, key: str) -> int | None:
    """The line of `key = ...` inside `[table]` (first of its kind), else anywhere."""
    start = section_line(text, table) if table else None
    lines = text.splitlines()
    if start is not None:
        for no in range(start, len(lines)):
            ln = lines[no]
            if re.match(r"\s*\[", ln):
                break
            if re.match(rf"\s*{re.escape(key)}\s*=", ln) or re.match(rf"\s*{re.escape(key)}\.", ln):
                return no + 1
    return key_line(text, key)


def _check_names(raw: dict[str, Any], path: Path | None, text: str) -> None:
    where = f"{path}" if path else CONFIG_NAME
    for name in raw:
        if name not in SECTIONS:
            line = section_line(text, name) or key_line(text, name)
            at = f":{line}" if line else ""
            raise UserError(f"{where}{at}: unknown section or key '{name}' (known sections: "
                            f"{', '.join(SECTIONS)}); fix the spelling and retry")
    for name, keys in SECTION_KEYS.items():
        if name in _CHECKED_ELSEWHERE:
            continue
        for table in _tables(raw, name):
            for key in table:
                if key not in keys:
                    line = table_key_line(text, name, key)
                    at = f":{line}" if line else ""
                    raise UserError(f"{where}{at}: key '{name}.{key}' is not a [{name}] setting (known: "
                                    f"{', '.join(keys)}); fix the spelling and retry")


def _tables(raw: dict[str, Any], dotted: str) -> list[dict[str, Any]]:
    """The table(s) at a dotted name; an array of tables gives each of its tables."""
    found: list[Any] = [raw]
    for part in dotted.split("."):
        nxt: list[Any] = []
        for t in found:
            v = t.get(part) if isinstance(t, dict) else None
            nxt += v if isinstance(v, list) else [v]
        found = nxt
    return [t for t in found if isinstance(t, dict)]


def find_config(start: Path) -> Path | None:
    for d in [start, *start.parents]:
        candidate = d / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return None


def load_config(path: Path) -> Config:
    """Read forkflow.toml at `path`."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text ({e}); save it as UTF-8 and retry") from e
    return parse_config(text, path.resolve())


CONFIG_TEMPLATE = '''\
# forkflow.toml: how forkflow keeps this fork close to its upstream.
# Every key is optional; the values below are the defaults unless `forkflow init` filled them in.

[upstream]
# The remote (name) that follows upstream; `forkflow init --upstream URL` adds it when given a URL.
remote = "{remote}"
# The upstream branch whose commits the fork ingests.
branch = "{upstream_branch}"
# Count only upstream's first-parent line (merge commits as units) instead of every commit.
# first_parent = false

[fork]
# The fork's own branch: forkflow lands picks here, by compare-and-swap only.
branch = "{fork_branch}"
# The fork's name in the store: its history, decisions and open conflicts are kept under it, so a
# moved or renamed checkout keeps them.  Written by `forkflow init`; a team sharing one store gives
# each fork its own name.
name = "{fork_name}"

[store]
# Where forkflow keeps its ledger, runs and metrics.  Empty: SQLite at .git/forkflow/forkflow.db
# (in the git common directory, out of the work tree).
# A team shares one PostgreSQL store: url = "postgresql+psycopg://user@host/forkflow"
# The environment variable FORKFLOW_STORE overrides this.
url = "{store_url}"

[ledger]
# For a fork that never ran forkflow, the ingestion point is inferred: the newest upstream commit
# such that at least this fraction of the upstream commits up to it are handled.
infer_threshold = 0.95
# Other tools' pick markers, as regexes whose first group captures the upstream sha.
# Markers in quoted lines ("> ..." or indented) never count.
# markers = ['\\(cherry picked from commit ([0-9a-f]{{7,40}})\\)', 'Original Commit:\\s*([0-9a-f]{{7,40}})']
# Upstream commits whose message matches one of these regexes are SKIPPED (opted out), unless picked.
# opt_out = ['\\[no-downstream\\]']

# Landing upstream commits (`forkflow ingest --land`) needs an L1 gate: a command, or L1 suites.
# [ingest]
# l1_command = "python -m pytest -x -q test/unit"   # exit 0 = the landing unit may land
#
# [[suite]]                       # see docs/validation.md; `forkflow workloads add NAME` adds ready ones
# name = "unit"
# tier = "L1"
# command = "python -m pytest -q -o junit_family=xunit1 --junitxml={{report}} {{tests}}"  # xunit1: test ids are file paths
# report = "junit"
# paths = ["python/**"]

# A conflict resolver's rule lands its answer without a person only when its backtest on this
# fork's own past hand-resolved picks is at least this precise over at least this many cases;
# otherwise its answer is a proposal (`forkflow conflicts rules` prints each rule's record).
# [trust]
# min_precision = 0.95
# min_cases = 10
'''


def render_config(remote: str, upstream_branch: str, fork_branch: str, store_url: str = "",
                  fork_name: str = "") -> str:
    name = fork_name.replace("\\", "\\\\").replace('"', '\\"')
    text = CONFIG_TEMPLATE.format(remote=remote, upstream_branch=upstream_branch,
                                  fork_branch=fork_branch, store_url=store_url, fork_name=name)
    return text if fork_name else text.replace(f'name = "{name}"', '# name = "triton:main"', 1)
