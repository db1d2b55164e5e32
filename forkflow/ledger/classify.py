"""Pure classification of upstream commits from fork history, in the order of evidence strength.

`LedgerBuilder` takes plain data (commits, recorded decisions, patch-ids) and returns
`LedgerEntry` values; `build.py` feeds it from git and the store.
"""
from __future__ import annotations

import bisect
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence, Set

from forkflow.ledger import evidence as ev
from forkflow.ledger import sections
from forkflow.ledger import trailers as tr
from forkflow.models import Commit, Decider, Disposition, Evidence, EvidenceKind, LedgerEntry, RecordedDecision, Sha


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


# is_inverse(revert, target, whole): does the revert's diff undo the target's?  `whole`: exactly
# (an upstream revert); else mostly (a fork's back-out of its own pick).  build.py asks git.
InverseCheck = Callable[[Sha, Sha, bool], bool]


class LedgerBuilder:
    """Collect pick and revert events from fork commits, then decide each disposition.

    Evidence has an origin: only the fork's own commits (`add_fork_commits`: on the fork branch,
    not reachable from upstream's) say that they took, reverted, skipped or deferred something,
    and only by their own words (quoted upstream text is never read, see ledger/trailers.py). An
    upstream commit is evidence about itself only (its `[ledger] opt_out` match); an upstream
    revert cancels the commit it names only when `is_inverse` confirms that its diff undoes that
    commit's, and the same check stands behind every fork-side revert. Without `is_inverse`, no
    revert is believed.
    """

    def __init__(self, upstream: Sequence[Commit], markers: Sequence[str], opt_out: Sequence[str] = (),
                 is_inverse: InverseCheck | None = None) -> None:
        self.is_inverse: InverseCheck = is_inverse or (lambda revert, target, whole: False)
        self.upstream = list(upstream)
        self.opt_out = [re.compile(m) for m in opt_out]
        self.by_sha = {c.sha: c for c in self.upstream}
        self.index = ShaIndex(self.by_sha)
        self.patterns = [re.compile(m) for m in markers]
        self.prs: dict[Sha, int | None] = {c.sha: ev.pr_number(_subject(c)) for c in self.upstream}
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
        self.decided_in: dict[Sha, tuple[Disposition, Evidence]] = {}  # deferred/skipped lists
        self.by_diff: dict[str, Sha] = {}  # review number (D123) -> fork commit
        self.by_subject: dict[str, Sha] = {}
        self.fork_revert_of: dict[Sha, Sha] = {}  # fork revert -> the fork pick it reverted
        self.merged: set[Sha] = set()  # upstream commits the fork tip reaches (a merge fork's merges)
        self.patch_only: set[Sha] = set()  # fork-side commits whose words are upstream's (add_fork_commits)

    def unique_pr(self, pr: int) -> Sha | None:
        hits = self.by_pr.get(pr, [])
        return hits[0] if len(hits) == 1 else None

    # -- phase 0: merges ---------------------------------------------------
    def add_merged(self, shas: Iterable[Sha]) -> None:
        """Upstream commits the fork branch reaches: a merge fork's merges brought them in.  Git's
        own history says so, not a message; a fork pick of one of them counts once (it is one
        upstream commit), and no fork commit is matched to it by patch-id or title."""
        for u in shas:
            if u in self.by_sha:
                self.merged.add(u)
                self.evidence[u].append(Evidence(EvidenceKind.MERGE, None, "merged: the fork branch reaches it"))

    def taken(self, u: Sha) -> bool:
        return u in self.picked_by or u in self.merged

    # -- phase 1: messages -------------------------------------------------
    def add_fork_commits(self, fork_commits: Iterable[Commit], patch_only: Set[Sha] = frozenset()) -> None:
        """Read every fork commit's message, oldest first.  `patch_only`: commits on the fork side
        whose words are upstream's (a merge brought them in, upstream later rewrote its branch):
        matched by patch-id only, their messages never read."""
        fork_index: dict[Sha, Commit] = {}
        for c in fork_commits:
            if c.sha in self.by_sha:
                continue  # an upstream commit is never evidence about another one
            if c.sha in patch_only:
                self.unmatched.append(c)
                self.patch_only.add(c.sha)
                continue
            fork_index[c.sha] = c
            message = tr.normalized(c.message)  # one line rule for every pattern below
            subject = tr.split_message(message)[0]
            diff = sections.DIFF_REVISION.search(message)
            if diff and not sections.is_fork_revert(subject):  # a revert names the diff it reverts
                self.by_diff[diff.group(1)] = c.sha
            source_id = sections.SOURCE_ID.search(message)
            if source_id:
                self.by_diff[source_id.group(1)[:12]] = c.sha
            self.by_subject[subject] = c.sha
            target = self._fork_revert_target(c, subject, message, fork_index)
            if target is not None and not self.is_inverse(c.sha, target, False):
                target = None  # says it reverts a pick, but its diff does not undo that pick's
            if target is not None and target in self.fork_revert_of:  # a revert of a revert: reland
                original = self.fork_revert_of[target]
                for u in list(self.fork_picks.get(original, [])):
                    self._pick(u, c.sha, Evidence(EvidenceKind.MARKER, c.sha,
                                                  f"reverts the revert {target[:12]} of {original[:12]}"))
                continue
            if target is not None:
                self._apply_fork_revert(c, target)
                continue
            if sections.is_fork_revert(subject) and not ev.trailers(message):
                continue  # a revert of something that picked nothing: never a pick itself
            found = self._message_picks(c, subject, message)
            if found:
                kind, shas, detail = found
                for u in shas:
                    self._pick(u, c.sha, Evidence(kind, c.sha, detail))
            else:
                self.unmatched.append(c)

    def _resolve_all(self, tokens: Iterable[str]) -> list[Sha]:
        return list(dict.fromkeys(s for s in (self.index.resolve(t) for t in tokens) if s))

    def _message_picks(self, c: Commit, subject: str, message: str) -> tuple[EvidenceKind, list[Sha], str] | None:
        refs = self._read_decisions(c, subject, message)
        declined = set(self._resolve_all(refs.deferred_shas + refs.skipped_shas)) if refs else set()
        resolved = [s for s in self._resolve_all(ev.trailers(message)) if s not in declined]
        if resolved:
            return EvidenceKind.TRAILER, resolved, "Upstream-Commit trailer"
        marked = [s for s in self._resolve_all(ev.markers(message, self.patterns)) if s not in declined]
        listed = self._listed_picks(subject, message, refs) if refs is not None else []
        listed = [s for s in listed if s not in declined and s not in marked]
        if listed:
            # one revision marker never hides a bundle's member list (issue 12)
            what = f"pick commit listing {len(listed) + len(marked)} upstream commits"
            for s in marked:
                self._pick(s, c.sha, Evidence(EvidenceKind.MARKER, c.sha, "pick marker in the message"))
            return EvidenceKind.BUNDLE, listed, what
        if marked:
            return EvidenceKind.MARKER, marked, "pick marker in the message"
        return None

    def _read_decisions(self, c: Commit, subject: str, message: str) -> sections.MessageRefs | None:
        """Sections of a pick commit's message; its deferred and skipped lists become decisions."""
        if not ev.BUNDLE_TITLE.search(subject):
            return None
        body = tr.unquoted_body(message)
        refs = sections.read_sections(body)
        for disposition, shas, prs, what in (
                (Disposition.DEFERRED, refs.deferred_shas, refs.deferred_prs, "deferred"),
                (Disposition.SKIPPED, refs.skipped_shas, refs.skipped_prs, "skipped")):
            for u in self._resolve_all(shas) + [s for s in (self.unique_pr(p) for p in prs) if s]:
                self.decided_in[u] = (disposition, Evidence(
                    EvidenceKind.MESSAGE, c.sha, f"listed as {what} in fork commit {c.sha[:12]}"))
        return refs

    def _listed_picks(self, subject: str, message: str, refs: sections.MessageRefs) -> list[Sha]:
        """Upstream commits a pick commit's message lists as picked (see ledger/sections.py)."""
        body = tr.unquoted_body(message)
        shas = self._resolve_all(refs.picked_shas)
        prs = refs.picked_prs
        if not refs.has_picked_section:
            prs = sections.subject_prs(subject)
            truncated = "..." in subject or subject.rstrip().endswith("\u2026")
            if not prs or truncated:
                backport = [int(x) for x in sections.BACKPORT_OF.findall(body)]
                if backport and not prs:
                    prs = backport
                else:
                    more, hexes = sections.mentioned(body, refs)
                    prs = prs + more
                    shas += self._resolve_all(hexes)
        shas += [s for s in (self.unique_pr(p) for p in prs) if s]
        return list(dict.fromkeys(shas))

    def _fork_revert_target(self, c: Commit, subject: str, message: str,
                            fork_index: dict[Sha, Commit]) -> Sha | None:
        """The earlier fork pick this commit reverts: by sha, by review number, or by title."""
        target = ev.revert_target(message)
        if target is not None:
            full = next((s for s in fork_index if s.startswith(target)), None)
            if full is not None and (full in self.fork_picks or full in self.fork_revert_of):
                return full
        if not sections.is_fork_revert(subject):
            return None
        for m in (sections.REVERTED_CHANGESET.search(message), sections.REVERTED_DIFF.search(message)):
            full = self.by_diff.get(m.group(1)[:12]) if m else None
            if full is not None and (full in self.fork_picks or full in self.fork_revert_of):
                return full
        title = sections.FORK_REVERT.sub("", subject).rstrip('"').strip()
        for sha in (self.by_subject.get(title), next(
                (s for subj, s in self.by_subject.items() if subj.startswith(title) and len(title) > 30), None)):
            if sha is not None and sha != c.sha and (sha in self.fork_picks or sha in self.fork_revert_of):
                return sha
        return None

    def _apply_fork_revert(self, c: Commit, full: Sha) -> None:
        self.fork_revert_of[c.sha] = full
        for u in self.fork_picks[full]:
            self.reverted[u] = c.sha
            self.evidence[u].append(Evidence(EvidenceKind.FORK_REVERT, c.sha, f"reverts fork commit {full[:12]}"))

    def _pick(self, upstream_sha: Sha, fork_sha: Sha, evidence: Evidence) -> None:
        if fork_sha not in self.picked_by[upstream_sha]:
            self.picked_by[upstream_sha].append(fork_sha)
        self.fork_picks.setdefault(fork_sha, []).append(upstream_sha)
        self.evidence[upstream_sha].append(evidence)
        self.reverted.pop(upstream_sha, None)  # a re-pick after a revert counts again

    # -- phase 2: patch-ids and titles ------------------------------------
    def unpicked_upstream(self) -> list[Sha]:
        return [c.sha for c in self.upstream if not self.taken(c.sha)]

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
            subject = _subject(c)
            if sections.is_fork_revert(subject) or c.sha in self.patch_only:
                continue
            # "Fix x (#8121) (#735)": the fork's review number follows upstream's PR number
            for pr in sections.subject_prs(subject)[-1:] or [p for p in [ev.pr_number(subject)] if p]:
                u = self.unique_pr(pr)
                if u is None or self.taken(u):
                    continue
                if ev.normalized_title(_subject(self.by_sha[u])) == ev.normalized_title(subject):
                    self._pick(u, c.sha, Evidence(EvidenceKind.TITLE_PR, c.sha, f"same title and PR #{pr}"))

    # -- phase 3: decide ---------------------------------------------------
    def entries(self, recorded: Iterable[RecordedDecision] = (), today: str = "9999-12-31") -> list[LedgerEntry]:
        """Every upstream commit with its disposition, in upstream order."""
        recorded_by = {r.sha: r for r in recorded if r.is_active(today)}
        cancelled = self._cancelled_upstream()
        out: list[LedgerEntry] = []
        for c in self.upstream:
            evid = tuple(sorted(self.evidence.get(c.sha, []), key=lambda e: -e.kind.strength))
            picks = tuple(self.picked_by.get(c.sha, []))
            pr = self.prs[c.sha]
            if c.sha in self.reverted and c.sha not in self.merged:
                out.append(LedgerEntry(c, pr, Disposition.REVERTED, picks, evid, "reverted in the fork"))
            elif picks or c.sha in self.merged:
                out.append(LedgerEntry(c, pr, Disposition.PICKED, picks, evid))
            elif c.sha in cancelled:
                other = cancelled[c.sha]
                e = Evidence(EvidenceKind.UPSTREAM_REVERT, None, f"paired with {other[:12]}")
                out.append(LedgerEntry(c, pr, Disposition.SKIPPED, (), (e,), "reverted upstream"))
            elif c.sha in recorded_by:
                r = recorded_by[c.sha]
                kind = EvidenceKind.DECIDED if r.source is Decider.PERSON else EvidenceKind.RECORDED
                e = Evidence(kind, None, r.describe())
                out.append(LedgerEntry(c, pr, r.disposition, r.fork_shas, (e,), r.describe(), r.chain))
            elif c.sha in self.decided_in:
                disposition, e = self.decided_in[c.sha]
                out.append(LedgerEntry(c, pr, disposition, (), (e,), e.detail))
            elif (hit := next((p.pattern for p in self.opt_out if p.search(c.message)), None)) is not None:
                e = Evidence(EvidenceKind.OPT_OUT, None, f"upstream message matches [ledger] opt_out {hit!r}")
                out.append(LedgerEntry(c, pr, Disposition.SKIPPED, (), (e,), e.detail))
            else:
                out.append(LedgerEntry(c, pr, Disposition.PENDING))
        return out

    def _cancelled_upstream(self) -> dict[Sha, Sha]:
        """Upstream commits cancelled by an upstream revert, neither side picked -> partner."""
        reverts: dict[Sha, Sha] = {}  # reverting commit -> reverted commit
        for c in self.upstream:
            target = ev.revert_target(c.message)
            full = self.index.resolve(target) if target else None
            # an upstream message is evidence about itself only: its revert line counts when its
            # diff undoes the named commit's, else the named commit stays pending
            if full is not None and full != c.sha and self.is_inverse(c.sha, full, True):
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
            if self.taken(t) or self.taken(r) or reverted_by.get(t) != r:
                continue
            out[t] = r
            out[r] = t
        return out


def _subject(c: Commit) -> str:
    """A commit's subject by the one line rule (git's subject ends at '\\n' only)."""
    return tr.split_message(c.subject)[0]


def decider_of(entry: LedgerEntry) -> str | None:
    """Who decided a SKIPPED / DEFERRED entry: person, auto (forkflow), message (the fork's own
    commit message), opt-out (upstream's message) or upstream-revert; None for the others."""
    if entry.disposition not in (Disposition.SKIPPED, Disposition.DEFERRED) or not entry.evidence:
        return None
    kind = entry.evidence[0].kind
    return {EvidenceKind.DECIDED: "person", EvidenceKind.RECORDED: "auto", EvidenceKind.MESSAGE: "message",
            EvidenceKind.OPT_OUT: "opt-out", EvidenceKind.UPSTREAM_REVERT: "upstream-revert"}.get(kind)
