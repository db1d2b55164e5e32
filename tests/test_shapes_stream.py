"""Commit shapes read from `git diff-tree` while git still writes (landing/shapes.py, git/run.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from forkflow.errors import GitError
from forkflow.git.run import GitStream, run_git_bytes
from forkflow.landing.shapes import parse_diff_tree, read_shapes
from forkflow.models import Sha
from forkflow.testing.gitrepo import ForkBuilder

ARGS = ("-c", "core.quotePath=false", "diff-tree", "--stdin", "-p", "-U0", "--no-renames", "-m",
        "--first-parent", "--root", "--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=none")


def _history(builder: ForkBuilder) -> list[Sha]:
    shas = [builder.upstream_commit({"a.py": "def f():\n    return 1\n"}, "Add f (#1)")]
    shas.append(builder.upstream_commit({"b.cpp": "int g() { return 2; }\n", "bin.dat": b"\0\1\2" * 50},
                                        "Add g and data (#2)"))
    big = "".join(f"line_{i} = {i}\n" for i in range(3000))  # one patch over many chunks
    shas.append(builder.upstream_commit({"big.py": big, "a.py": "def f():\n    return 3\n"}, "Big (#3)"))
    shas.append(builder.upstream_commit({"b.cpp": None, "weird name [x].py": "h = 1\n"}, "Remove g (#4)"))
    shas.append(builder.upstream_commit({}, "Empty (#5)"))
    return shas


@pytest.mark.parametrize("chunk", [1, 7, 41, 1 << 16])
def test_shapes_streamed_in_any_chunks_equal_the_whole_output(builder: ForkBuilder, chunk: int,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    shas = _history(builder)
    path = builder.upstream.path
    _, raw, _ = run_git_bytes(*ARGS, cwd=path, input=("\n".join(shas) + "\n").encode())
    whole = parse_diff_tree(raw, frozenset(shas))
    monkeypatch.setattr(GitStream, "CHUNK", chunk)  # an id line cut in two, a patch over many chunks
    streamed = read_shapes(path, shas)
    assert {s: streamed[s] for s in whole} == whole
    assert len(whole) == 4 and streamed[shas[4]].files == ()  # git prints nothing for an empty commit
    assert [f.path for f in streamed[shas[2]].files] == ["a.py", "big.py"]
    hunks = streamed[shas[2]].files[1].hunks
    assert hunks is not None and hunks[0].new_lines == 3000
    assert streamed[shas[1]].files[1].hunks is None  # binary: compared as a whole


def test_shapes_stream_reports_git_failing(builder: ForkBuilder, tmp_path: Path) -> None:
    shas = _history(builder)
    git = GitStream(*ARGS, cwd=tmp_path, input="\n".join(shas).encode())  # not a repository
    out = b"".join(git)
    assert git.rc not in (None, 0) and b"not a git repository" in git.stderr and out == b""
    with pytest.raises(GitError):
        GitStream("--version", cwd=tmp_path / "missing")


def test_shapes_stream_closed_early_stops_and_reaps_git(builder: ForkBuilder, tmp_path: Path) -> None:
    shas = _history(builder)
    git = GitStream(*ARGS, cwd=builder.upstream.path, input=("\n".join(shas) + "\n").encode())
    next(iter(git))  # the caller's parser gives up after the first chunk
    git.close()
    assert git.rc is not None and git._proc.poll() is not None  # no git process left behind
    git.close()  # twice is harmless


def test_parse_reads_lines_that_look_like_headers_inside_hunks_as_lines() -> None:
    a, b, c = "a" * 40, "b" * 40, "c" * 40
    raw = "\n".join([
        a,
        "diff --git a/x.py b/x.py", "index 1..2 100644", "--- a/x.py", "+++ b/x.py",
        "@@ -1 +1,3 @@", "-def old_name():", "+++ not a header", "+@@ -9 +9 @@ not a hunk",
        "+def new_name(): return helper_call()", "\\ No newline at end of file",
        "@@ -10,0 +12 @@", "+--- also a line",
        'diff --git "a/sp\\303\\251cial.bin" "b/sp\\303\\251cial.bin"', "new file mode 100644",
        "index 0..3", "Binary files /dev/null and b/sp\u00e9cial.bin differ",
        b,  # an empty commit's id (git prints none, but another tool may)
        c,
        "diff --git a/gone.cpp b/gone.cpp", "deleted file mode 100644", "index 4..0", "--- a/gone.cpp",
        "+++ /dev/null", "@@ -1,2 +0,0 @@", "-class Removed {", "-};", "",
    ]).encode()
    shapes = parse_diff_tree(raw, frozenset({Sha(a), Sha(b), Sha(c)}))
    x, special = shapes[Sha(a)].files
    assert x.path == "x.py" and x.hunks is not None and [(h.old_start, h.old_lines, h.new_start, h.new_lines)
                                                          for h in x.hunks] == [(1, 1, 1, 3), (10, 0, 12, 1)]
    assert special.path == "sp\u00e9cial.bin" and special.hunks is None and special.added
    assert shapes[Sha(a)].defines == {"new_name"}
    assert shapes[Sha(a)].uses == {"header", "helper_call"}
    assert {"old_name", "new_name", "header", "helper_call"} <= shapes[Sha(a)].mentions
    assert shapes[Sha(b)].files == ()
    gone, = shapes[Sha(c)].files
    assert gone.deleted and not gone.added and gone.hunks is not None and len(gone.hunks) == 1
    assert shapes[Sha(c)].mentions == {"Removed"} and shapes[Sha(c)].defines == frozenset()


def test_a_commit_read_in_process_has_the_shape_git_diff_tree_gives(builder: ForkBuilder) -> None:
    """The in-process reader (where git cannot read a commit: blobs a clone lacks) reads each
    file's patch as the stream does: same hunks, names defined, used and mentioned."""
    from forkflow.landing.shapes import ShapeReader

    shas = _history(builder)
    shas.append(builder.upstream_commit({"a.py": "def original():\n    return helper_call(3)\n"}, "Name f (#6)"))
    shas.append(builder.upstream_commit({"a.py": "def renamed():\n    return helper_call(3)\n",
                                         "README.md": "Call `renamed`.\n"}, "Rename it (#7)"))
    streamed = read_shapes(builder.upstream.path, shas)
    reader = ShapeReader(builder.upstream.path)
    for sha in shas:
        here = reader.shape(sha)
        assert (here.files, here.defines, here.uses, here.mentions) == \
            (streamed[sha].files, streamed[sha].defines, streamed[sha].uses, streamed[sha].mentions), sha
    last = streamed[shas[-1]]
    assert last.mentions == {"original", "renamed"} and last.defines == {"renamed"}
