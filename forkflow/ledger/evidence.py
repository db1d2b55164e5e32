"""Pure parsing of commit messages for pick evidence, PR numbers and reverts."""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from forkflow.ledger import trailers as tr

# one case rule (ASCII-only folding, ASCII digits) and one line rule (ledger/trailers.py) for all
REVERT = re.compile(r"This reverts commit ([0-9a-f]{7,40})", re.I | re.A)
PR_SUFFIX = re.compile(r"\(#(\d+)\)\s*$", re.A)
PR_MERGE = re.compile(r"^Merge pull request #(\d+)\b", re.A)
PR_ANY = re.compile(r"(?<![\w/])#(\d{1,7})\b", re.A)
HEX_TOKEN = re.compile(r"(?<![0-9A-Za-z])([0-9a-f]{7,40})(?![0-9A-Za-z])")
# a title that says the commit picks: "upstream" alone does not ("Align x with upstream #10358")
BUNDLE_TITLE = re.compile(r"cherry[- ]?pick|\[pick\]|backport|bundle|reactor|ingest", re.I | re.A)
QUOTED_TITLE = re.compile(r"(?:^|\s)'(.+)'(?=\s|$)", re.A)
_TITLE_PREFIX = re.compile(r"^\s*(\[?(cherry[- ]?pick(ed)?|backport|upstream|pick)\]?\s*[:\-]?\s*)+", re.I | re.A)
unquoted = tr.unquoted


def pr_number(subject: str) -> int | None:
    """The PR number a subject names: 'Fix foo (#1234)' or 'Merge pull request #1234 ...'."""
    m = PR_SUFFIX.search(subject) or PR_MERGE.match(subject)
    return int(m.group(1)) if m else None


def trailers(message: str) -> list[str]:
    """SHAs named by forkflow's own `Upstream-Commit:` trailers (after the subject, unquoted)."""
    return tr.trailers(message)


def markers(message: str, patterns: Sequence[re.Pattern[str]]) -> list[str]:
    """SHAs named by other tools' markers, in the unquoted lines after the subject only."""
    text = tr.unquoted_body(message)
    found: list[str] = []
    for pattern in patterns:
        found.extend(m.group(1).lower() for m in pattern.finditer(text))
    return found


def revert_target(message: str) -> str | None:
    """The sha a `git revert` message names, if this commit is a revert."""
    m = REVERT.search(tr.unquoted_body(message))
    return m.group(1).lower() if m else None


@dataclass(frozen=True, slots=True)
class BundleRefs:
    shas: tuple[str, ...]
    prs: tuple[int, ...]


def bundle_refs(subject: str, message: str) -> BundleRefs | None:
    """SHAs and PR numbers listed by a squashed pick ("Cherry-pick 15 upstream (#10702 #10689 ...)").

    Only commits whose title says they pick from upstream count, so that a fork's own
    commit that mentions an issue number is never read as a pick.
    """
    if not BUNDLE_TITLE.search(subject):
        return None
    text = tr.unquoted_body(message)
    prs = tuple(dict.fromkeys(int(p) for p in PR_ANY.findall(text)))
    shas = tuple(dict.fromkeys(h.lower() for h in HEX_TOKEN.findall(text) if not h.isdigit()))
    if not prs and not shas:
        return None
    return BundleRefs(shas=shas, prs=prs)


def normalized_title(subject: str) -> str:
    """A subject without pick prefixes, quotes and its PR suffixes, for the title+PR match."""
    quoted = QUOTED_TITLE.search(subject)
    s = quoted.group(1) if quoted else _TITLE_PREFIX.sub("", subject)
    while PR_SUFFIX.search(s):
        s = PR_SUFFIX.sub("", s)
    return " ".join(s.split()).lower()
