"""Commit messages of landed units: `Upstream-Commit:` trailers, bundle titles listing PRs.  [pure]"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from forkflow.models import Sha

TRAILER_KEY = "Upstream-Commit"
# An upstream message may itself carry lines that read as pick evidence; quoting them ("> ")
# keeps the ledger from reading them as this commit's (quoted lines never count as evidence).
_EVIDENCE_LINE = re.compile(rb"^(upstream-commit:|.*\(cherry picked from commit )", re.I)


@dataclass(frozen=True, slots=True)
class Member:
    sha: Sha
    subject: str
    pr: int | None


def single_message(sha: Sha, raw: bytes) -> bytes:
    """The upstream message, its evidence-like lines quoted, with our trailer appended."""
    lines = raw.rstrip(b"\n").split(b"\n")
    lines = [b"> " + line if _EVIDENCE_LINE.match(line) else line for line in lines]
    return b"\n".join(lines) + f"\n\n{TRAILER_KEY}: {sha}\n".encode()


def bundle_message(members: Sequence[Member]) -> str:
    """`Cherry-pick N upstream (#a #b ...)`, one line per upstream commit, one trailer each."""
    prs = " ".join(f"#{m.pr}" for m in members if m.pr is not None)
    title = f"Cherry-pick {len(members)} upstream" + (f" ({prs})" if prs else " commits")
    body = "\n".join(f"- {m.sha[:12]} {_one_line(m.subject)}" for m in members)
    trailers = "\n".join(f"{TRAILER_KEY}: {m.sha}" for m in members)
    return f"{title}\n\n{body}\n\n{trailers}\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200]
