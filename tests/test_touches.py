"""What a commit touches, read from the object database: files, symbols, the files parsed."""
from __future__ import annotations

from pathlib import Path

from forkflow.landing.touches import TouchReader
from forkflow.planning.model import EMPTY_TOUCH
from forkflow.testing.gitrepo import ForkBuilder

PY = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"


def test_touch_names_the_changed_function(tmp_path: Path) -> None:
    b = ForkBuilder(tmp_path)
    root = b.upstream_commit({"k.py": PY, "notes.txt": "a\nb\n"}, "start")
    sha = b.upstream_commit({"k.py": PY.replace("return 2", "return 3"), "notes.txt": "a\nc\n"}, "g returns 3")
    reader = TouchReader(b.upstream.path)
    t = reader.touch(sha)
    assert t.files == {"k.py", "notes.txt"}
    assert t.parsed == {"k.py", "notes.txt"}  # no parser for .txt: its hunk headers stand in
    assert any(s.startswith("k.py::") and s.endswith("g") for s in t.symbols)
    assert not any(s.startswith("k.py::") and s.endswith("f") for s in t.symbols)
    assert any(s.startswith("notes.txt::") for s in t.symbols)
    assert reader.touch(root).files == {"k.py", "notes.txt"}  # a root commit: against nothing


def test_touch_of_a_blank_line_names_no_symbol(tmp_path: Path) -> None:
    b = ForkBuilder(tmp_path)
    b.upstream_commit({"k.py": PY}, "start")
    sha = b.upstream_commit({"k.py": PY.replace("\n\n\ndef g", "\n\n\n\ndef g")}, "a blank line")
    t = TouchReader(b.upstream.path).touch(sha)
    assert t.files == {"k.py"} and t.parsed == {"k.py"} and not t.symbols


def test_touch_of_an_unknown_sha_is_empty(tmp_path: Path) -> None:
    b = ForkBuilder(tmp_path)
    b.upstream_commit({"k.py": PY}, "start")
    assert TouchReader(b.upstream.path).touch("0" * 40) is EMPTY_TOUCH
