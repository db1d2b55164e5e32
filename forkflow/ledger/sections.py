"""Pure reading of a pick commit's message by section: what it picked, deferred or will not port.

A fork that takes upstream in bundles writes what it did in the message, in sections:
"Picked (62): #1 ...", "Applied (94): 9720 9725 ...", "Deferred (6, backlog):", "Won't-port (3)",
"Skipped (14)", "Pin-advance only: #9653". Only a picked list is a pick; the other lists are the
fork's decisions, and a PR named in prose (a resolution note) is neither. See issue 12: reading
every `#N` of such a message as a pick made 17 deferred or skipped PRs look PICKED.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

from forkflow.ledger import trailers as tr

PR_REF = re.compile(r"(?<![\w/&])#(\d{1,7})\b(?!\.\.)", re.A)
PR_URL = re.compile(r"github\.com/[\w.-]+/[\w.-]+/pull/(\d+)", re.A)
HEX = re.compile(r"(?<![0-9A-Za-z])([0-9a-f]{7,40})(?![0-9A-Za-z])", re.A)
PR_SUFFIX_ANY = re.compile(r"\(#(\d+)\)", re.A)
QUOTED = re.compile(r"(?:^|\s)'(.+)'(?=\s|$)", re.A)
TAIL_PR = re.compile(r"\(#(\d+)\)\s*$", re.A)
BACKPORT_OF = re.compile(r"(?:backport|cherry-pick) of (?:an upstream PR:\s*)?\S*github\.com/[\w.-]+/[\w.-]+"
                         r"/pull/(\d+)", re.I | re.A)
# fork-side reverts: `git revert`, Phabricator's "Revert D123: ...", "Back out \"...\""
FORK_REVERT = re.compile(r'^(?:Revert D\d+:\s*|Back out "|Revert ")', re.A)
DIFF_REVISION = re.compile(r"^Differential Revision:\s*(?:\S*/)?(D\d+)\s*$", re.M | re.A)
REVERTED_DIFF = re.compile(r"^Revert (D\d+):", re.M | re.A)
# Phabricator's export: each commit's own id, and the id of the commit a revert backs out
SOURCE_ID = re.compile(r"^fbshipit-source-id:\s*([0-9a-f]{12,40})\s*$", re.M | re.A)
REVERTED_CHANGESET = re.compile(r"^Original commit changeset:\s*([0-9a-f]{12,40})\s*$", re.M | re.A)
# other tools' decision markers: the sha was looked at and deferred / declined, not picked
DECISION_MARKERS = (
    ("deferred", re.compile(r"^\s*Reactor Defer Revision:\s*([0-9a-f]{7,40})\b", re.M | re.A)),
    ("skipped", re.compile(r"^\s*Reactor WontPort Revision:\s*([0-9a-f]{7,40})\b", re.M | re.A)),
)

_HEADER = re.compile(
    r"^\W*(picked|applied|cherry-picked|reactor-bundle|bundle cherry-pick of|deferred|still deferred"
    r"|won'?t[- ]?port|wontport|skipped|inapplicable|pin-advance only|not ported|declined"
    r"|key resolutions|earlier resolutions|notable|two-pin|conflict resolutions?|raw conflicts"
    r"|unresolved conflicts|reviewed by|differential revision|test plan|validation|summary"
    r"|upstream commit message)\b", re.I | re.A)
_MD_HEADER = re.compile(r"^\s*(#{1,6}\s|==\s|\*\*[A-Z][^*#]*\*\*:?\s*$)", re.A)
_LIST_ITEM = re.compile(r"^\s*([-*\u2022]|\*\*#\d|#\d|\d+[.)]\s)", re.A)
_ITEM_LEAD = re.compile(r"^[\s*`_\-\u2022]*(?:\[\d+\]\s*)?(?:\d+[.)]\s*)?(?:(?P<sha>[0-9a-f]{7,40})\s+)?(?:PR\s+)?"
                        r"(?:[\w.-]+/[\w.-]+(?=#))?", re.A)
_LEAD_RUN = re.compile(r"^((?:\**#\d{1,7}\b\**[\s,+/*`]*(?:and\s+)?)+)", re.A)
_COUNTED_NUMBERS = re.compile(r"^\W*(?:applied|picked)\s*\(\d+\)\s*:\s*\d", re.I | re.A)


class Section(str, enum.Enum):
    PICKED = "picked"
    DEFERRED = "deferred"
    SKIPPED = "skipped"


@dataclass(slots=True)
class MessageRefs:
    """What a pick commit's message says, by section."""

    picked_prs: list[int] = field(default_factory=list)
    picked_shas: list[str] = field(default_factory=list)  # hex tokens heading picked list items
    deferred_prs: list[int] = field(default_factory=list)
    skipped_prs: list[int] = field(default_factory=list)
    deferred_shas: list[str] = field(default_factory=list)  # decision markers
    skipped_shas: list[str] = field(default_factory=list)
    has_picked_section: bool = False


def header_kind(text: str) -> Section | None:
    """Which list a header line opens; None for any other header (it ends the list above)."""
    t = tr.fold(text)
    if re.search(r"defer|backlog \(", t) and not re.search(r"picked|applied", t.split("defer")[0]):
        return Section.DEFERRED
    if re.search(r"won'?t[- ]?port|wontport|skipped|inapplicable|pin-advance|already satisfied"
                 r"|frontier advance only|not ported|declined", t):
        return Section.SKIPPED
    if re.search(r"picked|applied|cherry-pick|keystone|group \d|bundle cherry-pick|reactor-bundle|included", t, re.A):
        return Section.PICKED
    return None


def item_refs(text: str) -> tuple[list[int], list[str]]:
    """PRs (and a leading sha) that head list items; '#N' later in an item's prose are not read."""
    prs: list[int] = []
    shas: list[str] = []
    for seg in text.split(";"):
        lead = _ITEM_LEAD.match(seg)
        rest = seg[lead.end():] if lead else seg
        if lead and lead.group("sha") and not lead.group("sha").isdigit():
            shas.append(lead.group("sha"))
        url = PR_URL.match(rest.lstrip("<"))
        if url:
            prs.append(int(url.group(1)))
            continue
        run = _LEAD_RUN.match(rest)
        if run:
            prs += [int(x) for x in re.findall(r"#(\d{1,7})", run.group(1), re.A)]
    return prs, shas


def read_sections(body: str) -> MessageRefs:
    """Split a message body (no subject) into picked / deferred / skipped lists."""
    out = MessageRefs()
    sec: Section | None = None
    for line in tr.lines(body):
        if line.startswith(">") or ("github.com/" in line and not _LIST_ITEM.match(line)):
            continue
        keyword = _HEADER.match(line)
        if keyword or _MD_HEADER.match(line):
            sec = header_kind(line.split(":", 1)[0] if keyword else line)
            tail = line.split(":", 1)[1] if ":" in line else ""
            if sec is Section.PICKED:
                if _COUNTED_NUMBERS.match(line):
                    out.picked_prs += [int(x) for x in re.findall(r"\b(\d{3,7})\b", tail, re.A)]
                else:
                    prs, shas = item_refs(tail)
                    out.picked_prs += prs
                    out.picked_shas += shas
            elif sec is not None:
                _decided(out, sec).extend(int(x) for x in PR_REF.findall(line))
            continue
        if sec is None:
            continue
        if sec is Section.PICKED:
            if _LIST_ITEM.match(line):
                prs, shas = item_refs(line)
                out.picked_prs += prs
                out.picked_shas += shas
            elif PR_REF.search(line):
                sec = None  # prose that names PRs (a resolution note): the list has ended
        else:
            lead = _ITEM_LEAD.match(line) if _LIST_ITEM.match(line) else None
            if lead and lead.group("sha") and not lead.group("sha").isdigit():
                # forkflow's own "- <sha> subject: reason" items: the sha is the decision; the
                # subject after it is upstream's text, and a '#N' in it decides nothing
                (out.deferred_shas if sec is Section.DEFERRED else out.skipped_shas).append(lead.group("sha"))
                continue
            _decided(out, sec).extend(int(x) for x in PR_REF.findall(line))
    # a picked header whose list could not be read is no list: the subject's PRs are used instead
    out.has_picked_section = bool(out.picked_prs or out.picked_shas)
    for kind, pattern in DECISION_MARKERS:
        target = out.deferred_shas if kind == "deferred" else out.skipped_shas
        target += [m.lower() for m in pattern.findall(body)]
    return out


def _decided(out: MessageRefs, sec: Section) -> list[int]:
    return out.deferred_prs if sec is Section.DEFERRED else out.skipped_prs


def subject_prs(subject: str) -> list[int]:
    """Upstream PRs a pick's subject names, without the fork's own PR number at the end.

    "[Cherry-pick] 'Fix x (#8121)' (#735)" -> [8121]; "Fix x (#8121) (#735)" -> [8121];
    "[BUNDLE] #9336 #9342 (#1698)" -> [9336, 9342]; "Fix x (#8121)" -> [8121].
    """
    core = FORK_REVERT.sub("", subject)
    quoted = QUOTED.search(core)
    if quoted:
        tail = TAIL_PR.search(quoted.group(1))
        return [int(tail.group(1))] if tail else []
    nums = [int(x) for x in PR_REF.findall(core)]
    tail = TAIL_PR.search(core)
    if tail and len(nums) > 1:
        nums.pop()  # the fork's own review number, appended by its merge tooling
    return list(dict.fromkeys(nums))


def mentioned(body: str, refs: MessageRefs) -> tuple[list[int], list[str]]:
    """Every PR and sha a message names outside its deferred and skipped lists (the fallback)."""
    excluded = set(refs.deferred_prs) | set(refs.skipped_prs)
    prs = [int(x) for x in PR_REF.findall(body)] + [int(x) for x in PR_URL.findall(body)]
    shas = [h.lower() for h in HEX.findall(body) if not h.isdigit()]
    shas = [h for h in shas if h not in set(refs.deferred_shas) | set(refs.skipped_shas)]
    return [p for p in dict.fromkeys(prs) if p not in excluded], list(dict.fromkeys(shas))


def is_fork_revert(subject: str) -> bool:
    return FORK_REVERT.match(subject) is not None
