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

SHAPE_VERSION = 4  # 3: prose files use no names; 4: a commit read in-process mentions what it removes too
MAX_TEXT_LINES = 20_000  # a generated file rewritten wholesale: its names are not read


def _header_path(rest: bytes) -> str:
    """P of `diff --git a/P b/P` (no renames: both halves name the same path)."""
    if rest.startswith(b'"'):  # C-quoted: take the first quoted name
        end = rest.index(b'"', 1)
        while rest[end - 1:end] == b"\\":
            end = rest.index(b'"', end + 1)
        inner = rest[1:end].decode("unicode_escape").encode("latin-1")
        return inner[2:].decode("utf-8", "surrogateescape")
    return rest[2:2 + (len(rest) - 5) // 2].decode("utf-8", "surrogateescape")


# each starts with its line's newline: a literal prefix, which `re` looks for fast (a ^ in MULTILINE
# mode is tried at every position)
_FILE_LINE = re.compile(rb"\ndiff --git ([^\n]*)")
_HUNK_LINE = re.compile(rb"\n@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ADDED = re.compile(rb"\n\+([^\n]*)")
_REMOVED = re.compile(rb"\n-([^\n]*)")
_COMMIT_LINE = re.compile(rb"\n([0-9a-f]{40})(?=\n|\Z)")  # but the first line, which no newline precedes


class _Names:
    """The names a commit's files define, use and mention (see `CommitShape`)."""

    def __init__(self) -> None:
        self.defines: set[str] = set()
        self.uses: set[str] = set()
        self.mentions: set[str] = set()

    def read(self, path: str, raw: bytes, body: int, end: int) -> None:
        """The names of one file's patch lines, `raw[body:end]`, unless the file is rewritten wholesale."""
        plus, minus = _ADDED.findall(raw, body, end), _REMOVED.findall(raw, body, end)
        if len(plus) + len(minus) <= MAX_TEXT_LINES:
            self.add(path, plus, minus)

    def add(self, path: str, plus: list[bytes], minus: list[bytes]) -> None:
        """One file's added and removed lines (without their + and -)."""
        text_plus = b"\n".join(plus).decode("utf-8", "replace")
        text_minus = b"\n".join(minus).decode("utf-8", "replace")
        defined = definitions_in(path, text_plus)
        # what the removed lines define counts only where it names what the added lines do
        if defined and any(name in text_minus for name in defined):
            defined -= definitions_in(path, text_minus)
        self.defines |= defined
        added = identifiers_in(text_plus) if plus else set()
        removed = identifiers_in(text_minus) if minus else set()
        if not is_prose(path):
            self.uses |= added - removed
        self.mentions |= added | removed


def _hunks(raw: bytes, body: int, end: int) -> tuple[Hunk, ...]:
    """The hunk headers of one file's patch, `raw[body:end]`."""
    return tuple(Hunk(int(os_), int(ol) if ol else 1, int(ns), int(nl) if nl else 1)  # findall: b"" for no group
                 for os_, ol, ns, nl in _HUNK_LINE.findall(raw, body, end))


def _commit_shape(sha: Sha, raw: bytes, start: int, end: int, names: bool) -> CommitShape:
    """The shape of one commit's patch, `raw[start:end]` (its id line aside): file by file, each
    file's hunk headers and lines read by regular expressions over the file's text at once."""
    files: list[FileChange] = []
    found = _Names() if names else None
    heads = list(_FILE_LINE.finditer(raw, start, end))
    for i, head in enumerate(heads):
        file_end = heads[i + 1].start() if i + 1 < len(heads) else end
        path = _header_path(head.group(1))
        body = raw.find(b"\n@@ ", head.end(), file_end)
        body = file_end if body < 0 else body
        header = raw[head.end():body]
        hunks: tuple[Hunk, ...] | None = None
        if b"\nBinary files" not in header and b"\nGIT binary patch" not in header:
            hunks = _hunks(raw, body, file_end)
        files.append(FileChange(path, hunks, b"\nnew file mode" in header, b"\ndeleted file mode" in header))
        if found is not None and hunks:
            found.read(path, raw, body, file_end)
    if found is None:
        return CommitShape(sha, tuple(files))
    return CommitShape(sha, tuple(files), frozenset(found.defines), frozenset(found.uses - found.defines),
                       frozenset(found.mentions))


def parse_diff_tree(raw: bytes, wanted: frozenset[str], names: bool = True) -> dict[Sha, CommitShape]:
    """Shapes from `git diff-tree --stdin -p -U0` output (each commit's id line, then its patch);
    with `names=False` only the hunks (the names of the fork's whole diff are never used)."""
    out: dict[Sha, CommitShape] = {}
    ids = _id_lines(raw, wanted)
    for i, (sha, _, end) in enumerate(ids):
        out[sha] = _commit_shape(sha, raw, end, ids[i + 1][1] - 1 if i + 1 < len(ids) else len(raw), names)
    return out


def _id_lines(raw: bytes | bytearray, wanted: frozenset[str], pos: int = 0) -> list[tuple[Sha, int, int]]:
    """(sha, start, end) of each line of `raw` from `pos` on that is the id of a wanted commit."""
    out = []
    if pos == 0 and len(raw) >= 40 and raw[40:41] in (b"", b"\n") and (first := raw[:40].decode("ascii", "replace")) \
            in wanted:
        out.append((Sha(first), 0, 40))
    for m in _COMMIT_LINE.finditer(raw, pos):
        sha = m.group(1).decode()
        if sha in wanted:
            out.append((Sha(sha), m.start(1), m.end(1)))
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


def _parse_stream(chunks: Iterable[bytes], wanted: frozenset[str]) -> dict[Sha, CommitShape]:
    """`parse_diff_tree` of a stream, commit by commit as git writes them (each commit's patch is
    whole before it is parsed: the text is cut at the id line of a later one)."""
    out: dict[Sha, CommitShape] = {}
    buf = bytearray()
    for chunk in chunks:
        start = max(0, len(buf) - 41)  # only the new text (and an id line begun in the last chunk)
        buf += chunk
        ids = _id_lines(buf, wanted, max(start, 1))  # not the one at 0, where the last cut left it
        cut = ids[-1][1] if ids else 0
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
        files, names, missing = self.changes(patches)
        return CommitShape(Sha(sha), files, frozenset(names.defines), frozenset(names.uses - names.defines),
                           frozenset(names.mentions), tuple(missing))

    def changes_between(self, old: Sha, new: Sha) -> tuple[FileChange, ...]:
        """The file changes of commit `old` -> commit `new` (none when either is not here)."""
        patches = self.diffs.patches_between(old, new)
        return () if patches is None else self.changes(patches)[0]

    def changes(self, patches: Iterable[FilePatch]) -> tuple[tuple[FileChange, ...], _Names, list[str]]:
        """(file changes, the names they define, use and mention, missing blobs) of a diff's files,
        each file's text read as `_commit_shape` reads `git diff-tree`'s."""
        files: list[FileChange] = []
        names = _Names()
        missing: list[str] = []
        for p in patches:
            path, added_file, deleted = p.path, p.added, p.deleted
            missing += p.missing
            if p.data is None:
                files.append(FileChange(path, None, added_file, deleted))
                continue
            data = b"\n" + p.data  # the patterns begin at a newline
            body = data.find(b"\n@@ ")
            body = len(data) if body < 0 else body
            hunks = _hunks(data, body, len(data))
            if b"\0" in p.data[:8000] and not hunks:
                files.append(FileChange(path, None, added_file, deleted))
                continue
            files.append(FileChange(path, hunks, added_file, deleted))
            if hunks:
                names.read(path, data, body, len(data))
        return tuple(files), names, missing


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
