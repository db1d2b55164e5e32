"""libgit2's read settings for the plan's probe (git/reads.py): on inside, libgit2's defaults after."""
from __future__ import annotations

import subprocess
import zlib
from pathlib import Path

import pygit2
import pytest

from forkflow.git.reads import quick_reads


def _damaged_blob(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose one blob's loose file holds other bytes than its id says."""
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "f").write_text("hello\n")
    subprocess.run(["git", "add", "f"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "x"], cwd=repo, check=True)
    oid = subprocess.run(["git", "rev-parse", "HEAD:f"], cwd=repo, check=True, capture_output=True,
                         text=True).stdout.strip()
    loose = repo / ".git" / "objects" / oid[:2] / oid[2:]
    loose.chmod(0o644)
    loose.write_bytes(zlib.compress(b"blob 6\0hellO\n"))
    return repo, oid


def test_quick_reads_skip_the_hash_check_inside_and_restore_it_after(tmp_path: Path) -> None:
    repo, oid = _damaged_blob(tmp_path)
    with pytest.raises(pygit2.GitError, match="hash mismatch"):
        _ = pygit2.Repository(str(repo)).get(oid)
    with quick_reads():
        with quick_reads():  # nested: the outer one restores
            pass
        blob = pygit2.Repository(str(repo)).get(oid)
        assert isinstance(blob, pygit2.Blob) and blob.data == b"hellO\n"
    with pytest.raises(pygit2.GitError, match="hash mismatch"):
        _ = pygit2.Repository(str(repo)).get(oid)
