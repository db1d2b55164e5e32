"""What each commit changes (zero-context hunks, names defined and used), read in-process.

A blob this clone lacks (a partial clone, or objects cut out of a snapshot) never raises: the
file is compared as a whole by blob id and the blob is named in `CommitShape.missing`.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from forkflow.git.diffs import DiffReader, FilePatch
from forkflow.git.run import GitStream, run_git_bytes
from forkflow.models import Sha
from forkflow.planning.lines import CommitShape, FileChange, Hunk
from forkflow.planning.names import definitions_in, identifiers_in, is_prose

SHAPE_VERSION = 3  # 3: prose files use no names
MAX_TEXT_LINES = 20_000  # a generated file rewritten wholesale: its names are not read
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.M)


def parse_patch(data: bytes) -> tuple[tuple[Hunk, ...], list[str], list[str]]:
    """Hunks, added lines and removed lines of one file's zero-context patch text."""
    hunks: list[Hunk] = []
    added: list[str] = []
    removed: list[str] = []
    for m in _HUNK.finditer(data):
        os_, ol, ns, nl = m.groups()
        hunks.append(Hunk(int(os_), 1 if ol is None else int(ol), int(ns), 1 if nl is None else int(nl)))
    if len(data) < 4_000_000:
        for line in data.split(b"\n"):
            if line.startswith(b"+") and not line.startswith(b"+++ "):
                added.append(line[1:].decode("utf-8", "replace"))
            elif line.startswith(b"-") and not line.startswith(b"--- "):
                removed.append(line[1:].decode("utf-8", "replace"))
    return tuple(hunks), added, removed


_HEX = frozenset(b"0123456789abcdef")


def _header_path(rest: bytes) -> str:
    """P of `diff --git a/P b/P` (no renames: both halves name the same path)."""
    if rest.startswith(b'"'):  # C-quoted: take the first quoted name
        end = rest.index(b'"', 1)
        while rest[end - 1:end] == b"\\":
            end = rest.index(b'"', end + 1)
        inner = rest[1:end].decode("unicode_escape").encode("latin-1")
        return inner[2:].decode("utf-8", "surrogateescape")
    return rest[2:2 + (len(rest) - 5) // 2].decode("utf-8", "surrogateescape")


class _Builder:
    def __init__(self, sha: Sha, names: bool = True) -> None:
        self.sha = sha
        self.names = names  # read the names each file defines and uses
        self.files: list[FileChange] = []
        self.defines: set[str] = set()
        self.uses: set[str] = set()
        self.mentions: set[str] = set()
        self.path = ""
        self.flags = 0  # 1 added, 2 deleted, 4 binary
        self.hunks: list[Hunk] = []
        self.plus: list[bytes] = []
        self.minus: list[bytes] = []
        self.open = False

    def close_file(self) -> None:
        if not self.open:
            return
        self.open = False
        hunks = None if self.flags & 4 else tuple(self.hunks)
        self.files.append(FileChange(self.path, hunks, bool(self.flags & 1), bool(self.flags & 2)))
        if self.names and hunks and len(self.plus) + len(self.minus) <= MAX_TEXT_LINES:
            plus = b"\n".join(self.plus).decode("utf-8", "replace")
            minus = b"\n".join(self.minus).decode("utf-8", "replace")
            self.defines |= definitions_in(self.path, plus) - definitions_in(self.path, minus)
            added, removed = identifiers_in(plus), identifiers_in(minus)
            if not is_prose(self.path):
                self.uses |= added - removed
            self.mentions |= added | removed

    def start_file(self, path: str) -> None:
        self.close_file()
        self.open, self.path, self.flags = True, path, 0
        self.hunks, self.plus, self.minus = [], [], []

    def shape(self) -> CommitShape:
        self.close_file()
        return CommitShape(self.sha, tuple(self.files), frozenset(self.defines),
                           frozenset(self.uses - self.defines), frozenset(self.mentions))


def parse_diff_tree(raw: bytes, wanted: frozenset[str], names: bool = True) -> dict[Sha, CommitShape]:
    """Shapes from `git diff-tree --stdin -p -U0` output (each commit's id line, then its patch);
    with `names=False` only the hunks (the names of the fork's whole diff are never used)."""
    out: dict[Sha, CommitShape] = {}
    b: _Builder | None = None
    in_hunk = False
    for line in raw.split(b"\n"):
        first = line[:1]
        if in_hunk and first in (b"+", b"-"):
            assert b is not None
            (b.plus if first == b"+" else b.minus).append(line[1:])
            continue
        if first == b"\\":
            continue
        if len(line) == 40 and _HEX.issuperset(line) and line.decode() in wanted:
            if b is not None:
                out[b.sha] = b.shape()
            b, in_hunk = _Builder(Sha(line.decode()), names), False
        elif b is None:
            continue
        elif line.startswith(b"diff --git "):
            b.start_file(_header_path(line[11:]))
            in_hunk = False
        elif line.startswith(b"@@ "):
            m = _HUNK.match(line)
            if m is not None:
                os_, ol, ns, nl = m.groups()
                b.hunks.append(Hunk(int(os_), 1 if ol is None else int(ol), int(ns), 1 if nl is None else int(nl)))
                in_hunk = True
        elif not in_hunk:
            if line.startswith(b"new file mode"):
                b.flags |= 1
            elif line.startswith(b"deleted file mode"):
                b.flags |= 2
            elif line.startswith(b"Binary files") or line.startswith(b"GIT binary patch"):
                b.flags |= 4
        else:
            in_hunk = False
    if b is not None:
        out[b.sha] = b.shape()
    return out


def read_shapes(path: Path | str, shas: Sequence[Sha]) -> dict[Sha, CommitShape]:
    """Shapes of `shas`, read by one `git diff-tree` (which fetches blobs a partial clone lacks from
    its promisor remote); where git cannot read them, commit by commit in-process, naming the
    blobs that are missing."""
    out: dict[Sha, CommitShape] = {}
    wanted = frozenset(shas)
    for i in range(0, len(shas), 2000):
        batch = shas[i:i + 2000]
        git = GitStream("-c", "core.quotePath=false", "diff-tree", "--stdin", "-p", "-U0", "--no-renames", "-m",
                        "--first-parent", "--root", "--no-color", "--no-ext-diff", "--no-textconv",
                        "--ignore-submodules=none", cwd=path, input=("\n".join(batch) + "\n").encode())
        try:
            read = _parse_stream(git, wanted)
        finally:
            git.close()  # reaps git when parsing stopped early
        if git.rc == 0:
            out.update(read)
            continue
        reader = ShapeReader(path)
        out.update({sha: reader.shape(sha) for sha in batch})
    for sha in shas:
        out.setdefault(sha, CommitShape(sha, ()))  # an empty commit: git prints nothing for it
    return out


_COMMIT_LINE = re.compile(rb"^[0-9a-f]{40}$", re.M)


def _parse_stream(chunks: Iterable[bytes], wanted: frozenset[str]) -> dict[Sha, CommitShape]:
    """`parse_diff_tree` of a stream, commit by commit as git writes them (each commit's patch is
    whole before it is parsed: the text is cut at the id line of a later one)."""
    out: dict[Sha, CommitShape] = {}
    buf = bytearray()
    for chunk in chunks:
        start = max(1, len(buf) - 41)  # only the new text (and an id line begun in the last chunk)
        buf += chunk
        cut = 0
        for m in _COMMIT_LINE.finditer(buf, start):
            if m.group().decode() in wanted:
                cut = m.start()
        if cut:
            out.update(parse_diff_tree(bytes(buf[:cut]), wanted))
            del buf[:cut]
    out.update(parse_diff_tree(bytes(buf), wanted))
    return out


class ShapeReader:
    """Computes `CommitShape`s of commits from one repository's object database."""

    def __init__(self, path: Path | str) -> None:
        self.diffs = DiffReader(path)

    def has(self, oid: str) -> bool:
        return self.diffs.has_blob(oid)

    def shape(self, sha: str) -> CommitShape:
        """The commit's change against its first parent."""
        patches = self.diffs.commit_patches(sha)
        if patches is None:
            return CommitShape(Sha(sha), ())
        files, defines, uses, missing = self.changes(patches)
        return CommitShape(Sha(sha), files, frozenset(defines), frozenset(uses - defines), frozenset(uses),
                           tuple(missing))

    def changes_between(self, old: Sha, new: Sha) -> tuple[FileChange, ...]:
        """The file changes of commit `old` -> commit `new` (none when either is not here)."""
        patches = self.diffs.patches_between(old, new)
        return () if patches is None else self.changes(patches)[0]

    def changes(self, patches: Iterable[FilePatch]) -> tuple[
            tuple[FileChange, ...], set[str], set[str], list[str]]:
        """(file changes, names defined, identifiers used, missing blobs) of a diff's files."""
        files: list[FileChange] = []
        defines: set[str] = set()
        uses: set[str] = set()
        missing: list[str] = []
        for p in patches:
            path, added_file, deleted = p.path, p.added, p.deleted
            missing += p.missing
            if p.data is None:
                files.append(FileChange(path, None, added_file, deleted))
                continue
            hunks, plus, minus = parse_patch(p.data)
            if b"\0" in p.data[:8000] and not hunks:
                files.append(FileChange(path, None, added_file, deleted))
                continue
            files.append(FileChange(path, hunks, added_file, deleted))
            if len(plus) + len(minus) <= MAX_TEXT_LINES:
                text_plus, text_minus = "\n".join(plus), "\n".join(minus)
                defines |= definitions_in(path, text_plus) - definitions_in(path, text_minus)
                if not is_prose(path):
                    uses |= identifiers_in(text_plus) - identifiers_in(text_minus)
        return tuple(files), defines, uses, missing


def shape_to_json(s: CommitShape) -> str:
    files = [[f.path, (1 if f.added else 0) | (2 if f.deleted else 0),
              None if f.hunks is None else [[h.old_start, h.old_lines, h.new_start, h.new_lines] for h in f.hunks]]
             for f in s.files]
    return json.dumps({"f": files, "d": sorted(s.defines), "u": sorted(s.uses),
                       "n": sorted(s.mentions - s.uses), "m": list(s.missing)}, separators=(",", ":"))


def shape_from_json(sha: Sha, text: str) -> CommitShape:
    d = json.loads(text)
    files = tuple(FileChange(p, None if hs is None else tuple(Hunk(*h) for h in hs), bool(flags & 1), bool(flags & 2))
                  for p, flags, hs in d["f"])
    uses = frozenset(d["u"])
    return CommitShape(sha, files, frozenset(d["d"]), uses, uses | frozenset(d["n"]), tuple(d["m"]))
