"""Pure classification of upstream commits from fork history, in the order of evidence strength.

`LedgerBuilder` takes plain data (commits, recorded decisions, patch-ids) and returns
`LedgerEntry` values; `build.py` feeds it from git and the store.
"""
from __future__ import annotations

import bisect
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from forkflow.ledger import evidence as ev
from forkflow.models import Commit, Disposition, Evidence, EvidenceKind, LedgerEntry, Sha


@dataclass(frozen=True, slots=True)
class RecordedDecision:
    """A decision forkflow stored for an upstream commit (it wins over PENDING only)."""

    sha: Sha
    disposition: Disposition
    reason: str
    fork_shas: tuple[Sha, ...] = ()


class ShaIndex:
    """Resolve full or abbreviated SHAs against a fixed set of commits."""

    def __init__(self, shas: Iterable[str]) -> None:
        self._sorted = sorted(shas)
        self._set = set(self._sorted)

    def resolve(self, token: str) -> Sha | None:
        token = token.lower()
        if token in self._set:
            return Sha(token)
        if len(token) < 7 or len(token) >= 40:
            return None
        i = bisect.bisect_left(self._sorted, token)
        hits: list[str] = []
        while i < len(self._sorted) and self._sorted[i].startswith(token) and len(hits) < 2:
            hits.append(self._sorted[i])
            i += 1
        return Sha(hits[0]) if len(hits) == 1 else None


class LedgerBuilder:
    """Collect pick and revert events from fork commits, then decide each disposition."""

    def __init__(self, upstream: Sequence[Commit], markers: Sequence[str]) -> None:
        self.upstream = list(upstream)
        self.by_sha = {c.sha: c for c in self.upstream}
        self.index = ShaIndex(self.by_sha)
        self.patterns = [re.compile(m) for m in markers]
        self.prs: dict[Sha, int | None] = {c.sha: ev.pr_number(c.subject) for c in self.upstream}
        by_pr: dict[int, list[Sha]] = defaultdict(list)
        for sha, pr in self.prs.items():
            if pr is not None:
                by_pr[pr].append(sha)
        self.by_pr = dict(by_pr)
        self.evidence: dict[Sha, list[Evidence]] = defaultdict(list)
        self.picked_by: dict[Sha, list[Sha]] = defaultdict(list)
        self.reverted: dict[Sha, Sha] = {}  # upstream sha -> fork revert sha (while reverted)
        self.fork_picks: dict[Sha, list[Sha]] = {}  # fork sha -> upstream shas it picked
        self.unmatched: list[Commit] = []  # fork commits with no message evidence

    def unique_pr(self, pr: int) -> Sha | None:
        hits = self.by_pr.get(pr, [])
        return hits[0] if len(hits) == 1 else None

    # -- phase 1: messages -------------------------------------------------
    def add_fork_commits(self, fork_commits: Iterable[Commit]) -> None:
        """Read every fork commit's message, oldest first."""
        fork_index: dict[Sha, Commit] = {}
        for c in fork_commits:
            fork_index[c.sha] = c
            message = c.message
            target = ev.revert_target(message)
            if target is not None and self._apply_fork_revert(c, target, fork_index):
                continue
            found = self._message_picks(c, message)
            if found:
                kind, shas, detail = found
                for u in shas:
                    self._pick(u, c.sha, Evidence(kind, c.sha, detail))
            else:
                self.unmatched.append(c)

    def _message_picks(self, c: Commit, message: str) -> tuple[EvidenceKind, list[Sha], str] | None:
        resolved = [s for s in (self.index.resolve(t) for t in ev.trailers(message)) if s]
        if resolved:
            return EvidenceKind.TRAILER, resolved, "Upstream-Commit trailer"
        resolved = [s for s in (self.index.resolve(t) for t in ev.markers(message, self.patterns)) if s]
        if resolved:
            return EvidenceKind.MARKER, resolved, "pick marker in the message"
        refs = ev.bundle_refs(c.subject, message)
        if refs is not None:
            shas = [s for s in (self.index.resolve(t) for t in refs.shas) if s]
            shas += [s for s in (self.unique_pr(p) for p in refs.prs) if s]
            shas = list(dict.fromkeys(shas))
            if shas:
                what = f"squashed pick listing {len(refs.prs)} PRs and {len(refs.shas)} SHAs"
                return EvidenceKind.BUNDLE, shas, what
        return None

    def _apply_fork_revert(self, c: Commit, target: str, fork_index: dict[Sha, Commit]) -> bool:
        full = next((s for s in fork_index if s.startswith(target)), None)
        if full is None or full not in self.fork_picks:
            return False
        for u in self.fork_picks[full]:
            self.reverted[u] = c.sha
            self.evidence[u].append(Evidence(EvidenceKind.FORK_REVERT, c.sha, f"reverts fork commit {full[:12]}"))
        return True

    def _pick(self, upstream_sha: Sha, fork_sha: Sha, evidence: Evidence) -> None:
        if fork_sha not in self.picked_by[upstream_sha]:
            self.picked_by[upstream_sha].append(fork_sha)
        self.fork_picks.setdefault(fork_sha, []).append(upstream_sha)
        self.evidence[upstream_sha].append(evidence)
        self.reverted.pop(upstream_sha, None)  # a re-pick after a revert counts again

    # -- phase 2: patch-ids and titles ------------------------------------
    def unpicked_upstream(self) -> list[Sha]:
        return [c.sha for c in self.upstream if c.sha not in self.picked_by]

    def add_patch_id_matches(self, fork_ids: dict[Sha, str], upstream_ids: dict[Sha, str]) -> None:
        """Match unmatched fork commits to unpicked upstream commits by equal patch-id."""
        by_pid: dict[str, list[Sha]] = defaultdict(list)
        for u in self.unpicked_upstream():
            pid = upstream_ids.get(u)
            if pid:
                by_pid[pid].append(u)
        still: list[Commit] = []
        for c in self.unmatched:
            hits = by_pid.get(fork_ids.get(c.sha, ""), [])
            if hits:
                u = hits.pop(0)  # identical patches upstream: the oldest first
                self._pick(u, c.sha, Evidence(EvidenceKind.PATCH_ID, c.sha, "same git patch-id --stable"))
            else:
                still.append(c)
        self.unmatched = still

    def add_title_matches(self) -> None:
        """The weakest signal: same title and a PR number that names one upstream commit."""
        for c in self.unmatched:
            pr = ev.pr_number(c.subject)
            u = self.unique_pr(pr) if pr is not None else None
            if u is None or u in self.picked_by:
                continue
            if ev.normalized_title(self.by_sha[u].subject) == ev.normalized_title(c.subject):
                self._pick(u, c.sha, Evidence(EvidenceKind.TITLE_PR, c.sha, f"same title and PR #{pr}"))

    # -- phase 3: decide ---------------------------------------------------
    def entries(self, recorded: Iterable[RecordedDecision] = ()) -> list[LedgerEntry]:
        """Every upstream commit with its disposition, in upstream order."""
        recorded_by = {r.sha: r for r in recorded}
        cancelled = self._cancelled_upstream()
        out: list[LedgerEntry] = []
        for c in self.upstream:
            evid = tuple(sorted(self.evidence.get(c.sha, []), key=lambda e: -e.kind.strength))
            picks = tuple(self.picked_by.get(c.sha, []))
            pr = self.prs[c.sha]
            if c.sha in self.reverted:
                out.append(LedgerEntry(c, pr, Disposition.REVERTED, picks, evid, "reverted in the fork"))
            elif picks:
                out.append(LedgerEntry(c, pr, Disposition.PICKED, picks, evid))
            elif c.sha in cancelled:
                other = cancelled[c.sha]
                e = Evidence(EvidenceKind.UPSTREAM_REVERT, None, f"paired with {other[:12]}")
                out.append(LedgerEntry(c, pr, Disposition.SKIPPED, (), (e,), "reverted upstream"))
            elif c.sha in recorded_by:
                r = recorded_by[c.sha]
                e = Evidence(EvidenceKind.RECORDED, None, r.reason or r.disposition.value.lower())
                out.append(LedgerEntry(c, pr, r.disposition, r.fork_shas, (e,), r.reason))
            else:
                out.append(LedgerEntry(c, pr, Disposition.PENDING))
        return out

    def _cancelled_upstream(self) -> dict[Sha, Sha]:
        """Upstream commits cancelled by an upstream revert, neither side picked -> partner."""
        reverts: dict[Sha, Sha] = {}  # reverting commit -> reverted commit
        for c in self.upstream:
            target = ev.revert_target(c.message)
            full = self.index.resolve(target) if target else None
            if full is not None and full != c.sha:
                reverts[c.sha] = full
        live_reverts: set[Sha] = set()
        reverted_by: dict[Sha, Sha] = {}
        # newest first: a revert that is itself reverted (a reland) cancels nothing
        for c in reversed(self.upstream):
            if c.sha in reverts and c.sha not in reverted_by:
                live_reverts.add(c.sha)
                reverted_by.setdefault(reverts[c.sha], c.sha)
        out: dict[Sha, Sha] = {}
        for r in live_reverts:
            t = reverts[r]
            if t in self.picked_by or r in self.picked_by or reverted_by.get(t) != r:
                continue
            out[t] = r
            out[r] = t
        return out
