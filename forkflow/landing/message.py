"""Commit messages of landed units: `Upstream-Commit:` trailers, bundle titles listing PRs.  [pure]"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from forkflow.ledger import trailers as tr
from forkflow.models import Sha

TRAILER_KEY = tr.TRAILER_KEY


@dataclass(frozen=True, slots=True)
class Member:
    sha: Sha
    subject: str
    pr: int | None


def single_message(sha: Sha, raw: bytes, provenance: Sequence[str] = ()) -> bytes:
    """The upstream message quoted, under its own subject, with our trailer appended.

    Lines are split by the ledger's one rule (ledger/trailers.py: every Unicode line break), and
    every line after the subject is quoted ('> '), so no line upstream wrote, whatever its line
    breaks or case, reads as this commit's evidence: a trailer, a marker, a revert, a section.
    Bytes that are not UTF-8 pass through unchanged (surrogateescape).  `provenance`: the
    `Resolved-By:` / `Approved-By:` lines of the files a resolver or a person settled
    (conflicts/provenance.py), after the trailer."""
    subject, quoted = tr.quote_upstream(raw.decode("utf-8", "surrogateescape"))
    subject, quoted = defuse_closing(subject), [defuse_closing(line) for line in quoted]
    tail = "".join(f"{line}\n" for line in provenance)
    text = subject + ("\n\n" + "\n".join(quoted) if quoted else "") + f"\n\n{tr.trailer(sha)}\n{tail}"
    return text.encode("utf-8", "surrogateescape")


# A forge closes the fork's issue N when a commit whose message says "Fixes #N" (or "closes
# owner/repo#N", "resolved: https://.../issues/N") reaches the default branch: upstream's words
# would close the fork's issues.  A word joiner after the keyword keeps the text readable and the
# forge's keyword grammar unmatched.
_CLOSING = re.compile(r"(?i)\b(clos(?:e|es|ed)|fix(?:|es|ed)|resolv(?:e|es|ed))(?=:?[ \t]+(?:[\w.-]+/[\w.-]+)?#\d"
                      r"|:?[ \t]+https?://|:?[ \t]+(?i:GH)-\d)")
WORD_JOINER = "\u2060"


def defuse_closing(line: str) -> str:
    """`line` with every closing keyword that names an issue broken by a word joiner."""
    return _CLOSING.sub(lambda m: m.group(1) + WORD_JOINER, line)


@dataclass(frozen=True, slots=True)
class Decided:
    """An upstream commit inside a bundle's range that a decision kept out of it."""

    sha: Sha
    subject: str
    deferred: bool
    reason: str


SUBJECT_MAX = 72  # issue 12: bundle subjects ran to 330 characters


def bundle_title(members: Sequence[Member]) -> str:
    """`Cherry-pick N upstream (#a #b ...)`, cut to SUBJECT_MAX with '+K more' (the body lists all)."""
    prs = [f"#{m.pr}" for m in members if m.pr is not None]
    head = f"Cherry-pick {len(members)} upstream"
    if not prs:
        return head + " commits"
    for n in range(len(prs), 0, -1):
        more = f" +{len(prs) - n} more" if n < len(prs) else ""
        title = f"{head} ({' '.join(prs[:n])}{more})"
        if len(title) <= SUBJECT_MAX:
            return title
    return head + " commits"


def bundle_message(members: Sequence[Member], decided: Sequence[Decided] = (), provenance: Sequence[str] = ()) -> str:
    """The title, one line per upstream commit, the decisions in its range by section, one trailer each."""
    body = "\n".join(f"- {m.sha[:12]} {defuse_closing(_one_line(m.subject))}" for m in members)
    for deferred, header in ((True, "Deferred"), (False, "Skipped")):
        rows = [d for d in decided if d.deferred is deferred]
        if rows:  # the ledger reads these lists back as decisions, never as picks
            body += f"\n\n{header} ({len(rows)}):\n" + "\n".join(
                f"- {d.sha[:12]} {defuse_closing(_one_line(d.subject)[:80])}: {_one_line(d.reason)[:160]}"
                for d in rows)
    trailers = "\n".join([tr.trailer(m.sha) for m in members] + list(provenance))
    return f"{bundle_title(members)}\n\n{body}\n\n{trailers}\n"


def decided_between(applied: Sequence[Sha], order: Sequence[Sha], decided: dict[Sha, Decided]) -> list[Decided]:
    """The decisions on upstream commits between a bundle's first and last member, in upstream order."""
    where = {sha: i for i, sha in enumerate(order)}
    spots = [where[s] for s in applied if s in where]
    if not spots:
        return []
    return [decided[s] for s in order[min(spots):max(spots) + 1] if s in decided and s not in applied]


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200]
