"""Who is most likely to settle a conflict: the fork's people, never upstream's.

A fork inherits upstream's CODEOWNERS; naming its owners for a conflict sends the fork's work to
upstream maintainers (on fbtriton, 63 of 76 open conflicts went to one of them).  The owners of a
conflicted path, first that answers:

1. `[owners]` in forkflow.toml (path glob -> people; the last matching glob wins, as in
   CODEOWNERS), or the `owner` of the `[ingest.chain]` the conflict is in;
2. the fork's own CODEOWNERS entries: the rules of the fork's file (its checkout's, else the fork
   branch's) that upstream's file has neither at the fork point nor at its tip; an inherited rule
   names nobody here;
3. the authors of the fork's lines in the conflicted regions (`git blame` of the fork side,
   counting only commits upstream does not have and that are not picks of upstream commits);
4. the authors of the fork's own commits to the path since the fork point (a delete/modify has no
   regions; a region whose fork lines all came from upstream).

Each answer says where it came from.
"""
from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from forkflow.conflicts.classify import Region, parse_marked, regions
from forkflow.config import Config, owners_table
from forkflow.conflicts.records import ConflictInfo
from forkflow.git.repo import Repo
from forkflow.models import Ledger
from forkflow.tiers.selection import matches

TABLE, CHAIN, CODEOWNERS, BLAME, COMMITS = "forkflow.toml [owners]", "its chain's owner", "fork CODEOWNERS", \
    "git blame of the fork's lines", "the fork's commits to the file"
FROM_FORK = (TABLE, CHAIN, CODEOWNERS, BLAME, COMMITS)
CODEOWNERS_PATHS = ("CODEOWNERS", ".github/CODEOWNERS", "docs/CODEOWNERS", ".gitlab/CODEOWNERS")
MAX_PEOPLE = 3
MAX_CACHED = 5000  # conflicts whose blame answer the cache keeps
_SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True, slots=True)
class Owners:
    people: tuple[str, ...] = ()
    source: str = ""  # one of FROM_FORK, "" when nobody was found

    def describe(self) -> str:
        return f"{', '.join(self.people)} ({self.source})" if self.people else "-"

    def names(self, who: str) -> bool:
        """Whether `who` (a login, a name or a part of one, any case, `@` optional) is among them."""
        want = who.strip().lstrip("@").casefold()
        return bool(want) and any(want in p.lstrip("@").casefold() for p in self.people)


Rules = tuple[tuple[str, tuple[str, ...]], ...]  # (CODEOWNERS pattern, owners), in file order


def parse_codeowners(text: str) -> Rules:
    """The rules of a CODEOWNERS file, comments and blank lines dropped.  [pure]"""
    out = []
    for line in text.splitlines():
        parts = line.split("#", 1)[0].split()
        if len(parts) >= 2:
            out.append((parts[0], tuple(parts[1:])))
    return tuple(out)


def codeowners_globs(pattern: str) -> tuple[str, ...]:
    """A CODEOWNERS pattern as forkflow globs: '/a' anchors, 'x.py' matches anywhere, 'dir/' is a folder."""
    g = pattern.lstrip("/")
    if not (pattern.startswith("/") or "/" in pattern.strip("/")):
        g = "**/" + g
    if g.endswith("/"):
        return (g + "**",)
    return (g, g + "/**")


def fork_rules(fork: Rules, upstream: Iterable[Rules]) -> Rules:
    """The fork's rules with the inherited ones (a rule upstream's file has, same pattern and
    owners, at any of the given revisions) marked by an empty owner list.  Order is kept: an
    inherited rule after a fork rule still wins for its paths, and names nobody.  [pure]"""
    known = {r for rules in upstream for r in rules}
    return tuple((p, () if (p, o) in known else o) for p, o in fork)


def _table_owner(table: Sequence[tuple[str, tuple[str, ...]]], path: str) -> tuple[str, ...]:
    found: tuple[str, ...] = ()
    for glob, people in table:
        if matches(path, (glob,)):
            found = people
    return found


def _rule_owner(rules: Rules, path: str) -> tuple[str, ...]:
    for pattern, people in reversed(rules):
        if matches(path, codeowners_globs(pattern)):
            return people
    return ()


@dataclass
class OwnerFinder:
    """The owners of each conflict of one fork; git answers are cached per (revision, path)."""

    repo: Repo
    table: Sequence[tuple[str, tuple[str, ...]]] = ()  # [owners]
    chains: Mapping[str, str] = field(default_factory=dict)  # chain name -> owner
    rules: Rules = ()  # fork_rules(...)
    upstream_tip: str = ""  # what is not the fork's: commits reachable from here
    fork_tip: str = ""  # the fork's commits to a path are read up to here
    picks: frozenset[str] = frozenset()  # fork commits that pick upstream commits
    cache_file: Path | None = None  # blame answers kept between commands
    cache: dict[str, list[tuple[str, str, int]]] = field(default_factory=dict)
    dirty: bool = False
    _log: dict[str, dict[str, Counter[str]]] = field(default_factory=dict)

    def conflict(self, x: ConflictInfo) -> Owners:
        people = _table_owner(self.table, x.path)
        if people:
            return Owners(people, TABLE)
        if x.chain in self.chains:
            return Owners((self.chains[x.chain],), CHAIN)
        people = _rule_owner(self.rules, x.path)
        if people:
            return Owners(people, CODEOWNERS)
        if not _SHA.match(x.base_sha):
            return Owners()
        blamed = self._region_authors(x)
        if blamed:
            return Owners(_top(blamed), BLAME)
        logged = self._path_authors(self.fork_tip if _SHA.match(self.fork_tip) else x.base_sha, x.path)
        return Owners(_top(logged), COMMITS) if logged else Owners()

    def paths(self, chain: str, paths: Sequence[str]) -> Owners:
        """The owners of files with no stored conflict to blame (a merge's next conflict, a
        summary): `[owners]`, the chain's owner, the fork's own CODEOWNERS, else the authors of
        the fork's own commits to them."""
        table: Counter[str] = Counter(q for p in paths for q in _table_owner(self.table, p))
        if table:
            return Owners(_top(table), TABLE)
        if chain in self.chains:
            return Owners((self.chains[chain],), CHAIN)
        rules: Counter[str] = Counter(q for p in paths for q in _rule_owner(self.rules, p))
        if rules:
            return Owners(_top(rules), CODEOWNERS)
        if not _SHA.match(self.fork_tip):
            return Owners()
        logged: Counter[str] = Counter()
        for p in paths:
            logged.update(self._path_authors(self.fork_tip, p))
        return Owners(_top(logged), COMMITS) if logged else Owners()

    def commit(self, group: Sequence[ConflictInfo]) -> Owners:
        """The owners of an upstream commit that waits on these conflicts: each file's, the most
        named first; the source of the first file's answer."""
        found = [self.conflict(x) for x in group]
        counts: Counter[str] = Counter(p for o in found for p in o.people)
        named = [o for o in found if o.people]
        return Owners(_top(counts), named[0].source) if named else Owners()

    # -- git ------------------------------------------------------------------------------
    def _not_upstream(self) -> list[str]:
        return [f"^{self.upstream_tip}"] if _SHA.match(self.upstream_tip) else []

    def _region_authors(self, x: ConflictInfo) -> Counter[str]:
        key = f"{x.base_sha}:{x.key}:{x.path}"
        if key not in self.cache:
            self.cache[key] = self._blame_regions(x)
            self.dirty = True
        counts: Counter[str] = Counter()
        for commit, author, n in self.cache[key]:
            if commit not in self.picks:
                counts[author] += n
        return counts

    def _blame_regions(self, x: ConflictInfo) -> list[tuple[str, str, int]]:
        """(commit, author, lines) of the fork's own lines in the regions of `x`."""
        segments = parse_marked(x.marked) if x.marked else None
        found = regions(segments) if segments else []
        if not found:
            return []
        fork_lines = self.repo.git("show", f"{x.base_sha}:{x.path}", check=False).splitlines()
        where = [r for r in (_locate(reg, fork_lines) for reg in found) if r]
        if not where:
            return []
        ranges = [a for r in where for a in ("-L", f"{r.start + 1},{r.stop}")]
        out = self.repo.git("blame", "--porcelain", *ranges, x.base_sha, *self._not_upstream(), "--", x.path,
                            check=False)
        lines = Counter(line for line in _parse_blame(out) if line[0])
        return [(c, a, n) for (c, a), n in sorted(lines.items())]

    def _path_authors(self, rev: str, path: str) -> Counter[str]:
        """The authors of the fork's own commits (not picks) that touched `path`, by count; one
        `git log` of the fork's commits per fork revision."""
        if rev not in self._log:
            out = self.repo.git("log", "--format=%x01%H%x00%an", "--name-only", rev, *self._not_upstream(),
                                check=False)
            by_path: dict[str, Counter[str]] = {}
            for entry in out.split("\x01")[1:]:
                head, _, names = entry.partition("\n")
                sha, _, author = head.partition("\0")
                if sha in self.picks or not author:
                    continue
                for name in names.splitlines():
                    if name:
                        by_path.setdefault(name, Counter())[author] += 1
            self._log[rev] = by_path
        return self._log[rev].get(path, Counter())

    def save(self) -> None:
        """Keep what blame said for the next command (a file in the fork's state folder)."""
        if self.cache_file is None or not self.dirty:
            return
        keep = dict(list(self.cache.items())[-MAX_CACHED:])
        self.cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.cache_file.with_name(self.cache_file.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(keep), encoding="utf-8")
        os.replace(tmp, self.cache_file)
        self.dirty = False


def _top(counts: Counter[str]) -> tuple[str, ...]:
    return tuple(p for p, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_PEOPLE])


def _parse_blame(porcelain: str) -> list[tuple[str, str]]:
    """`git blame --porcelain` as one (commit, author) per line; boundary commits (upstream's) as ("", "")."""
    authors: dict[str, str] = {}
    boundary: set[str] = set()
    out: list[tuple[str, str]] = []
    current = ""
    for line in porcelain.splitlines():
        if line.startswith("\t"):
            out.append(("", "") if current in boundary else (current, authors.get(current, "")))
            continue
        head = line.split(" ", 1)
        if len(head[0]) == 40 and all(c in "0123456789abcdef" for c in head[0]):
            current = head[0]
        elif head[0] == "author" and len(head) > 1:
            authors.setdefault(current, head[1])
        elif head[0] == "boundary":
            boundary.add(current)
    return out


def _locate(r: Region, fork_lines: list[str]) -> range:
    """The 0-based lines of the fork's file that hold the region's fork side (its first
    occurrence); an empty fork side (the fork deleted the lines) gives no lines."""
    want = r.ours.splitlines()
    if not want:
        return range(0)
    n = len(want)
    for i in range(len(fork_lines) - n + 1):
        if fork_lines[i] == want[0] and fork_lines[i:i + n] == want:
            return range(i, i + n)
    return range(0)


def read_rules(repo: Repo, fork_rev: str, upstream_revs: Sequence[str], checkout: Path | None) -> Rules:
    """fork_rules() of the fork's CODEOWNERS (the checkout's file when it has one, else the one
    at `fork_rev`) against upstream's at each of `upstream_revs`."""
    text = None
    for where in CODEOWNERS_PATHS:
        f = checkout / where if checkout is not None else None
        if f is not None and f.is_file():
            text = f.read_text(encoding="utf-8", errors="replace")
        elif _SHA.match(fork_rev):
            text = _blob(repo, fork_rev, where)
        if text is not None:
            break
    if text is None:
        return ()
    theirs = [parse_codeowners(t) for rev in upstream_revs if _SHA.match(rev)
              for where in CODEOWNERS_PATHS if (t := _blob(repo, rev, where)) is not None]
    return fork_rules(parse_codeowners(text), theirs)


def _blob(repo: Repo, rev: str, path: str) -> str | None:
    kind = repo.git("cat-file", "-t", f"{rev}:{path}", check=False).strip()
    return repo.git("show", f"{rev}:{path}", check=False) if kind == "blob" else None


def commit_dates(repo: Repo, shas: Iterable[str]) -> dict[str, int]:
    """Each commit's committer date (unix seconds); unknown commits are left out."""
    wanted = sorted({s for s in shas if _SHA.match(s)})
    out: dict[str, int] = {}
    for i in range(0, len(wanted), 500):
        text = repo.git("show", "-s", "--format=%H %ct", *wanted[i:i + 500], check=False)
        for line in text.splitlines():
            sha, _, when = line.partition(" ")
            if _SHA.match(sha) and when.isdigit():
                out[sha] = int(when)
    if len(out) < len(wanted):  # `git show` stops at the first unknown one: ask the rest one by one
        for sha in wanted:
            if sha not in out:
                when = repo.git("show", "-s", "--format=%ct", sha, check=False).strip()
                if when.isdigit():
                    out[sha] = int(when)
    return out


def age_days(when: int | None, now: float | None = None) -> int | None:
    return None if when is None else max(0, int(((now or time.time()) - when) // 86400))


def upstream_now(repo: Repo, config: Config) -> int | None:
    """The commit date of upstream's tip: a conflict's age is counted to it, as `status` counts
    days behind and the oldest open commit's age (a mirror fetched last month does not make every
    conflict a month older).  None when the ref is not there (ages are then counted to now)."""
    when = repo.git("show", "-s", "--format=%ct", config.upstream_ref, "--", check=False).strip()
    return int(when) if when.isdigit() else None


def owner_finder(repo: Repo, config: Config, ledger: Ledger | None, chains: Mapping[str, str],
                 cache_file: Path | None = None) -> OwnerFinder:
    """The fork's OwnerFinder: `[owners]`, the chains' owners, the fork's own CODEOWNERS rules
    (against upstream's at the fork point and at its tip), and the ledger's picks (a pick's
    lines are upstream's work, not the fork's)."""
    fork_tip = ledger.fork_tip if ledger is not None else (repo.resolve(config.fork_ref) or "")
    up_tip = ledger.upstream_tip.sha if ledger is not None else (repo.resolve(config.upstream_ref) or "")
    fork_point = ledger.fork_point if ledger is not None else ""
    picks = frozenset(s for e in ledger.entries for s in e.fork_shas) if ledger is not None else frozenset()
    rules = read_rules(repo, fork_tip, [r for r in (fork_point, up_tip) if r], config.root)
    return OwnerFinder(repo, owners_table(config.raw), dict(chains), rules, up_tip, fork_tip, picks, cache_file,
                       _load_cache(cache_file))


def _load_cache(path: Path | None) -> dict[str, list[tuple[str, str, int]]]:
    """The blame cache; an unreadable or malformed one is ignored (it is only a cache)."""
    if path is None:
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict):
        return {}
    out: dict[str, list[tuple[str, str, int]]] = {}
    for k, rows in doc.items():
        if isinstance(k, str) and isinstance(rows, list) and all(
                isinstance(r, list) and len(r) == 3 and isinstance(r[0], str) and isinstance(r[1], str)
                and isinstance(r[2], int) for r in rows):
            out[k] = [(r[0], r[1], r[2]) for r in rows]
    return out
