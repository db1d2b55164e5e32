"""Where tracking issues go: the `IssueSink` protocol, drafts, refs, and the dedup marker."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from forkflow.errors import UserError

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
