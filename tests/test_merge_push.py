"""A merge-mode ingest pushes only while it is still the fork's one writer (docs/team.md)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from forkflow.git.run import run_git
from forkflow.testing.gitrepo import ForkBuilder
from tests.test_merge_fork import _init, merging  # noqa: F401  (a fixture)

# the L1 command a second writer runs meanwhile: it takes the fork's lease in the store
TAKE_LEASE = r'''
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE fork_leases SET generation = generation + 1, holder = 'another clone'")
db.commit()
'''


@pytest.mark.security
def test_a_merge_ingest_that_lost_the_lease_pushes_nothing(merging: ForkBuilder, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "take.py"
    script.write_text(TAKE_LEASE)
    fork = merging.f.path
    db = fork / ".git" / "forkflow" / "forkflow.db"
    _init(merging, cli, l1=" ".join(json.dumps(x)[1:-1] for x in (sys.executable, str(script), str(db))))
    bare = tmp_path / "shared.git"
    run_git("clone", "-q", "--bare", str(fork), str(bare), cwd=tmp_path)
    run_git("remote", "add", "origin", str(bare), cwd=fork)
    shared_before = run_git("rev-parse", "main", cwd=bare).strip()
    r = cli("ingest", "--land", "--push", repo=fork)
    assert r.rc == 1 and "another writer took this fork" in r.err and len(r.err.strip().splitlines()) == 1
    assert run_git("rev-parse", "main", cwd=bare).strip() == shared_before  # nothing pushed
