"""Who settled each conflicted file of a landed commit, as the commit's own trailers say it.

Every file a resolver or a person settled in a pick gets a `Resolved-By:` line in the landed
commit's message: the resolver's name (`structural`, `syntax`, `trivial`, ...) or, for a recorded
resolution, the person who wrote it (`forkflow conflicts resolve`, the dashboard) as
`Name <email>`; an agent's or a rule's proposal a person approved adds `Approved-By:` with who
approved.  `forkflow status --commits` and the commit page read them back
(`ledger/trailers.provenance`), and `git log` shows them with no forkflow at hand.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

from sqlalchemy import Table, select, update

from forkflow.ledger import trailers as tr
from forkflow.store.schema_ingest import ResolutionRow
from forkflow.store.session import Writer, connection_of

_RESOLUTIONS = cast(Table, ResolutionRow.__table__)
RECORDED = "recorded"  # the resolver that replays a resolution stored by its conflict's key
APPROVED_SOURCES = {"agent-approved": "agent", "rule-approved": "rule"}  # conflicts/approval.py


@dataclass(frozen=True, slots=True)
class Settled:
    """One conflicted file of a pick and what settled it."""

    path: str
    resolver: str  # the resolver whose answer landed
    key: str = ""  # the conflict's recorded-resolution key (conflicts/case.py)


@dataclass(frozen=True, slots=True)
class People:
    """A recorded resolution's origin: its source, who wrote it, who approved it."""

    source: str
    decided_by: str = ""
    approved_by: str = ""


def note_people(s: Writer, key: str, decided_by: str = "", approved_by: str = "") -> None:
    """Say who wrote (or approved) the resolution just recorded under `key`."""
    values = {k: v[:200] for k, v in (("decided_by", decided_by), ("approved_by", approved_by)) if v}
    if values:
        connection_of(s).execute(update(_RESOLUTIONS).where(_RESOLUTIONS.c.key == key).values(**values))


def people(s: Writer, keys: Iterable[str]) -> dict[str, People]:
    """The origin of each recorded resolution among `keys` (absent keys are left out)."""
    wanted = sorted({k for k in keys if k})
    if not wanted:
        return {}
    rows = connection_of(s).execute(select(_RESOLUTIONS.c.key, _RESOLUTIONS.c.source, _RESOLUTIONS.c.decided_by,
                                           _RESOLUTIONS.c.approved_by).where(_RESOLUTIONS.c.key.in_(wanted)))
    return {r.key: People(r.source or "", r.decided_by or "", r.approved_by or "") for r in rows}


def trailer_lines(settled: Sequence[Settled], origin: dict[str, People], where: str = "") -> list[str]:
    """`Resolved-By:` (and `Approved-By:`) lines for the files of one pick; `where` names the
    upstream commit in a bundle's message (several commits may settle the same path).  [pure]"""
    out: list[str] = []
    for x in settled:
        path = f"{x.path} (in {where})" if where else x.path
        who, approver = x.resolver, ""
        found = origin.get(x.key) if x.resolver == RECORDED else None
        if found is not None:
            if found.source == "person":
                who = found.decided_by or "a person"
            elif found.source in APPROVED_SOURCES:
                who, approver = APPROVED_SOURCES[found.source], found.approved_by or "a person"
            else:
                who = f"{found.source} (recorded)"
        out.append(tr.provenance_line("Resolved-By", who, path))
        if approver:
            out.append(tr.provenance_line("Approved-By", approver, path))
    return out
