"""Where tracking issues go: the `IssueSink` protocol, drafts, refs, and the dedup marker."""
from __future__ import annotations

import re
import logging
from dataclasses import dataclass
from typing import Protocol

from forkflow.errors import UserError
from forkflow.markdown_safe import Construct, prose, untrusted_constructs

log = logging.getLogger("forkflow.triage.sinks")

MARKER = "<!-- forkflow:group={key} -->"
_MARKER_RX = re.compile(r"<!--\s*forkflow:group=([0-9a-f]{16})\s*-->")


def marker(key: str) -> str:
    """The hidden line in an issue body that ties it to one failure group (never two issues)."""
    return MARKER.format(key=key)


def key_in(body: str) -> str | None:
    """The group key of the first marker in `body`, if any."""
    m = _MARKER_RX.search(body or "")
    return m[1] if m else None


def defuse_markers(text: str) -> str:
    """Untrusted text (logs, agent output) must not carry a marker that hijacks deduplication."""
    return _MARKER_RX.sub("<!-- (marker removed) -->", text).replace("<!--", "&lt;!--")


@dataclass(frozen=True, slots=True)
class IssueDraft:
    key: str           # the failure group's signature key
    title: str
    body: str          # without the marker; the sink adds it
    labels: tuple[str, ...] = ("forkflow",)
    # what the body's template mentions or links itself (its owners); nothing else may render
    allowed: tuple[Construct, ...] = ()


def forge_body(draft: IssueDraft) -> str:
    """The body a sink sends: its marker, then the draft's body once a CommonMark parser finds
    in it no mention, link, image, HTML, heading or issue reference but the `allowed` ones;
    a body that has one is not sent (fail closed): a plain note says why."""
    found = untrusted_constructs(draft.body, draft.allowed)
    body = draft.body
    if found:
        log.warning("tracking issue %s: body withheld, it holds %s", draft.key, found[0])
        body = ("forkflow withheld this body: a value in it would have rendered as Markdown "
                f"({prose(found[0].kind)}); run `forkflow triage` to read the failure.")
    return f"{marker(draft.key)}\n{body}"


def forge_title(title: str) -> str:
    """A title as one line of plain Markdown text (a Markdown file's heading)."""
    return prose(title, 200, one_line=True)


@dataclass(frozen=True, slots=True)
class IssueRef:
    sink: str
    id: str            # issue number (GitHub), iid (GitLab), file name (Markdown)
    url: str
    open: bool = True


class SinkError(UserError):
    """The forge kept failing after retries; nothing was half-written (re-run to continue).  A
    known condition with its own advice, not a bug: exit 1 with the message, no crash log."""


class IssueSink(Protocol):
    name: str

    def find(self, key: str) -> IssueRef | None:
        """The issue of group `key`, open or closed, if it exists."""
        ...

    def create(self, draft: IssueDraft) -> IssueRef:
        """File a new issue; never a second one for the same key."""
        ...

    def update(self, ref: IssueRef, draft: IssueDraft, comment: str) -> IssueRef:
        """Replace the body, reopen if closed, and add `comment`."""
        ...

    def close(self, ref: IssueRef, comment: str) -> IssueRef:
        ...


def ensure(sink: IssueSink, draft: IssueDraft, comment: str) -> tuple[IssueRef, bool]:
    """Create the issue of `draft.key`, or update the one that exists; (ref, created)."""
    ref = sink.find(draft.key)
    if ref is None:
        return sink.create(draft), True
    return sink.update(ref, draft, comment), False
