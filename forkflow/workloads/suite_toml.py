"""Append a `[[suite]]` table to forkflow.toml: checked by the suite loader first, written atomically."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from forkflow.config import CONFIG_NAME, find_config, parse_config
from forkflow.errors import UserError
from forkflow.workloads.junit import write_atomic


def toml_value(value: Any) -> str:
    """A TOML literal for the str/int/float/bool/list/dict values a suite uses."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def render_suite(entry: dict[str, Any]) -> str:
    return "[[suite]]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in entry.items())


def add_suite(repo: Path, entry: dict[str, Any]) -> Path:
    """Append `entry` as a [[suite]] to the forkflow.toml found from `repo`; return its path.

    The new file is parsed and its suites validated before anything is written; a suite name
    already in use is refused.
    """
    path = find_config(Path(repo).resolve())
    if path is None:
        raise UserError(f"no {CONFIG_NAME} in {repo} or above; run: forkflow init --upstream URL")
    text = path.read_text(encoding="utf-8")
    config = parse_config(text, path)
    names = [s.get("name") for s in config.raw.get("suite", []) if isinstance(s, dict)]
    if entry["name"] in names:
        line = next((no for no, ln in enumerate(text.splitlines(), 1)
                     if re.match(rf"\s*name\s*=\s*[\"']{re.escape(str(entry['name']))}[\"']", ln)), None)
        at = f":{line}" if line else ""
        raise UserError(f"{path}{at}: a suite named '{entry['name']}' already exists; "
                        "pick another with --suite NAME or remove it first")
    sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
    new_text = text + sep + render_suite(entry)
    from forkflow.tiers.tiers import load_suites

    load_suites(parse_config(new_text, path))  # the same checks `forkflow validate` makes
    write_atomic(path, new_text.encode("utf-8"))
    return path
