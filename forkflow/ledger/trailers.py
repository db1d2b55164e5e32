"""The one reader of commit messages: what a line is, which lines are quoted, what a trailer is.  [pure]

Everything that writes a fork commit's message (forkflow/landing/message.py) and everything that
reads one back as evidence (forkflow/ledger/) goes through this module, so that the writer's idea
of a line is the reader's:

* A line ends at any Unicode line break, exactly as Python's `str.splitlines` splits: `\\n`, `\\r`,
  `\\r\\n`, `\\x0b`, `\\x0c`, `\\x1c`-`\\x1e`, `\\x85`, U+2028, U+2029. A message is normalised to
  these lines joined by `\\n` before any pattern sees it.
* Keys are matched with ASCII-only case folding (`re.ASCII`): U+017F (long s) is not an `s` and the
  Kelvin sign is not a `k`, and `\\d` is an ASCII digit.
* A line that starts with `>`, four spaces or a tab is quoted: never evidence.
* The first line is the subject. Trailers are read from the lines after it, never from it.
"""
from __future__ import annotations

import json
import re

TRAILER_KEY = "Upstream-Commit"
QUOTE_PREFIXES = (">", "    ", "\t")
_TRAILER = re.compile(r"Upstream-Commit:[ \t]*([0-9a-fA-F]{7,40})[ \t]*", re.I | re.A)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def lines(text: str) -> list[str]:
    """The lines of a message: split at every Unicode line break (`str.splitlines`)."""
    return text.splitlines()


def normalized(text: str) -> str:
    """The message with every line break written as `\\n`, so `^`/`$` under re.M mean our lines."""
    return "\n".join(lines(text))


def fold(text: str) -> str:
    """ASCII-only lower case: the one case rule (str.lower folds the Kelvin sign to 'k')."""
    return text.translate(_ASCII_LOWER)


def split_message(text: str) -> tuple[str, list[str]]:
    """Subject (the first line) and the lines after it."""
    ls = lines(text)
    return (ls[0], ls[1:]) if ls else ("", [])


def is_quoted(line: str) -> bool:
    return line.startswith(QUOTE_PREFIXES)


def unquoted(text: str) -> str:
    """The message without quoted lines, joined by `\\n`."""
    return "\n".join(line for line in lines(text) if not is_quoted(line))


def unquoted_body(text: str) -> str:
    """The lines after the subject that are not quoted, joined by `\\n`."""
    return "\n".join(line for line in split_message(text)[1] if not is_quoted(line))


def trailer_value(line: str) -> str | None:
    """The sha of an `Upstream-Commit: <sha>` line (the whole line, ASCII key), else None."""
    m = _TRAILER.fullmatch(line)
    return m.group(1).lower() if m else None


def trailers(text: str) -> list[str]:
    """SHAs named by `Upstream-Commit:` trailers in the unquoted lines after the subject."""
    out: list[str] = []
    for line in unquoted_body(text).split("\n"):
        value = trailer_value(line)
        if value is not None:
            out.append(value)
    return out


PROVENANCE_KEYS = ("Resolved-By", "Approved-By", "L1-Run")  # who settled a file, who approved, the L1 run
_PROVENANCE = re.compile(r"(Resolved-By|Approved-By|L1-Run):[ \t]*(\S.*?)[ \t]*", re.I | re.A)


def provenance(text: str) -> list[tuple[str, str]]:
    """(key, value) of each `Resolved-By:`, `Approved-By:` and `L1-Run:` line in the unquoted lines
    after the subject, in order, the key as PROVENANCE_KEYS spells it."""
    keys = {fold(k): k for k in PROVENANCE_KEYS}
    out: list[tuple[str, str]] = []
    for line in unquoted_body(text).split("\n"):
        m = _PROVENANCE.fullmatch(line)
        if m:
            out.append((keys[fold(m.group(1))], m.group(2)))
    return out


def trailer(sha: str) -> str:
    return f"{TRAILER_KEY}: {sha}"


def _plain(text: str) -> bool:
    return text.isprintable() and text == text.strip() and '"' not in text and text != ""


def provenance_line(key: str, who: str, path: str = "") -> str:
    """`Key: who path`, one line whatever `who` and `path` hold: a name is folded to one line of
    printable text; a path that is not plain printable text (an upstream commit may name a file
    with line breaks, quotes or control characters) is written JSON-quoted, as git quotes paths."""
    assert key in PROVENANCE_KEYS
    name = "".join(c if c.isprintable() else " " for c in " ".join(who.split()))[:200] or "unknown"
    if not path:
        return f"{key}: {name}"
    shown = path if _plain(path) else json.dumps(path)
    return f"{key}: {name} {shown}"


def quote_upstream(text: str) -> tuple[str, list[str]]:
    """An upstream message as a fork commit carries it: its subject (one line by the rule above)
    and every other line quoted ('> '), so that nothing upstream wrote reads as the fork's words."""
    subject, rest = split_message(text.strip())
    while rest and not rest[0].strip():
        rest.pop(0)
    while rest and not rest[-1].strip():
        rest.pop()
    return subject, [("> " + line) if line.strip() else ">" for line in rest]
