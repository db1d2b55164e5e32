"""Options and output helpers shared by every command module."""
from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.segment import Segment

from forkflow.render import short as short  # one sha shortener for the CLI, the demo and the dashboard

# Characters that drive a terminal rather than show: C0 controls but newline and tab, DEL, C1
# controls, and the bidi overrides that reorder what is shown (Trojan Source).  Upstream commit
# messages, file contents, CI logs and test names reach the terminal; an OSC 52 in one of them
# writes the clipboard, ESC[2J clears the screen (issue 13, item 3).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def clean_text(text: str) -> str:
    """`text` with every terminal control character shown as an escape (`\\x1b`), so untrusted
    text prints as what it is and never acts on the terminal."""
    return _UNSAFE.sub(_visible, text)


class SafeConsole(Console):
    """A Rich console that cleans the text of everything it prints with `clean_text`; the styles
    forkflow itself asks for are still rendered.  Every CLI command prints through one of these."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            Segment(clean_text(text), style, control) if control is None else Segment(text, style, control)
            for text, style, control in buffer)


console = SafeConsole(highlight=False)
err_console = SafeConsole(stderr=True, highlight=False)

RepoOpt = Annotated[Path, typer.Option("--repo", help="The fork's checkout (default: current folder).")]
StoreOpt = Annotated[str | None, typer.Option(
    "--store", help="Store URL (sqlite:///path or postgresql+psycopg://...); default from "
    "FORKFLOW_STORE or forkflow.toml, else .git/forkflow/forkflow.db.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
MAX_ID = 2**63 - 1  # ids are the store's 64-bit row ids: a larger number is a usage error, not a crash


def print_json(doc: Any) -> None:
    # json.dumps escapes C0 controls; DEL, C1 and bidi overrides it leaves raw, so escape them too
    text = _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(doc, indent=2, default=str,
                                                                       ensure_ascii=False))
    sys.stdout.write(text + "\n")
    sys.stdout.flush()

