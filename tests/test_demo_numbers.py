"""`forkflow demo`'s printed numbers agree with each other and with what the commands it shows say."""
from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import run_forkflow


def _status_blocks(out: str) -> list[str]:
    """The text of each `forkflow status` table the demo printed, in order."""
    parts = re.split(r"─+ \d\. ", out)
    return [p for p in parts if p.startswith("forkflow status")]


def _int(pattern: str, text: str) -> int:
    m = re.search(pattern, text)
    assert m is not None, (pattern, text)
    return int(m.group(1))


def test_demo_numbers_agree(tmp_path: Path) -> None:
    keep = tmp_path / "demo"
    r = run_forkflow("demo", "--keep", str(keep), cwd=tmp_path, env={"COLUMNS": "200"})
    assert r.rc == 0, r.err
    upstream = _int(r"upstream has (\d+) new commits since the fork point", r.out)
    before, after = _status_blocks(r.out)
    for block in (before, after):
        counts = {k: int(v) for k, v in re.findall(r"(pending|picked|skipped|deferred|reverted)=(\d+)", block)}
        assert sum(counts.values()) == upstream, (counts, upstream)  # every upstream commit counted once
        opened = _int(r"open commits\s+(\d+) \(", block)
        held = _int(r"open commits\s+\d+ \((\d+) held", block)
        automatic = re.search(r"deferred\s+\d+ \((\d+) automatic\)", block)
        assert held == (int(automatic.group(1)) if automatic else 0)
        assert opened == counts["pending"] + held, block  # open: nobody decided them
        # the backlog is a part of the open commits, and says which part (0 beside pending=11 read as a contradiction)
        assert _int(r"backlog commits\s+(\d+) \(of the open, those at or before the ingestion point\)", block) <= opened
    assert _int(r"open commits\s+(\d+)", before) == upstream - 2  # the revert pair cancels out upstream
    fork = keep / "sample" / "fork"
    shown = run_forkflow("conflicts", "--json", "--repo", str(fork), cwd=tmp_path)
    assert shown.rc == 0, shown.err
    rows = json.loads(shown.out)["conflicts"]
    assert rows, "the demo keeps a conflict for a person"
    commits, files = len({c["upstream_sha"] for c in rows}), len(rows)
    assert re.search(rf"open conflicts\s+{commits} commits \({files} files\)", after), after
    assert re.search(r"open conflicts\s+0 commits \(0 files\)", before)  # none kept before the first ingest
