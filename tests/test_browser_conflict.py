"""One conflict worked in a real browser, from the dashboard's list to landed: Debian's chromium
driven by Playwright against `forkflow serve` in the fork's checkout.  The conflict comes from a
real `forkflow ingest --land` (k.py changed by the fork and by upstream #10); the agent proposes,
the page shows the regions three ways and the proposal, the operator approves it with the token,
then lands it by re-running its unit."""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from forkflow.git.run import run_git
from forkflow.testing.gitrepo import ForkBuilder
from tests.conftest import service
from tests.serving import serving
from tests.test_browser import ARGS, artifacts
from tests.test_ingest import k_conflict_fork
from tests.test_review_trust import AGENT, BENIGN

pytestmark = pytest.mark.browser
TOKEN = "browser-conflict-token-0123456789"


@pytest.fixture
def served(cli, builder: ForkBuilder, tmp_path: Path) -> Iterator[tuple[str, Path]]:  # type: ignore[no-untyped-def]
    fork = k_conflict_fork(cli, builder)
    agent = tmp_path / "agent" / "agent.py"
    agent.parent.mkdir()
    agent.write_text(AGENT)
    (agent.parent / "answer.txt").write_text(BENIGN)
    with (fork / "forkflow.toml").open("a") as f:
        f.write(f'\n[ingest]\nl1_command = "true"\n\n[ingest.agent]\n'
                f"command = {json.dumps([sys.executable, str(agent)])}\ntimeout = 30\n")
    assert cli("ingest", "--land", repo=fork).rc == 4  # the agent's proposal waits for a person
    with serving(["--repo", str(fork)], fork, "/api/ingestion/conflicts", tmp_path / "serve.log",
                 {**os.environ, "FORKFLOW_TOKEN": TOKEN}) as (base, _):
        yield base, fork


@pytest.fixture
def page() -> Iterator[Any]:
    chromium = service("FORKFLOW_TEST_CHROMIUM", "chromium")
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    with sync_playwright() as p, tempfile.TemporaryDirectory(prefix="ff-chromium-") as profile:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=chromium, args=ARGS,
                                                   headless=True, viewport={"width": 1280, "height": 900})
        pg = ctx.new_page()
        pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        pg.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        pg.problems = problems  # type: ignore[attr-defined]
        try:
            yield pg
        finally:
            ctx.close()


def test_a_conflict_from_the_list_to_landed(page: Any, served: tuple[str, Path]) -> None:
    base, fork = served
    start = run_git("rev-parse", "main", cwd=fork).strip()
    page.goto(base + "/ingestion/conflicts")
    row = page.locator("#conflicts tr", has_text="k.py")
    assert row.count() == 1 and "Finn Fork" in row.inner_text() and "proposal waits" in row.inner_text()
    row.locator("a", has_text="#").first.click()
    page.wait_for_url("**/ingestion/conflicts/*")
    page.screenshot(path=str(artifacts() / "conflict.png"), full_page=True)
    # the region, numbered, its markers highlighted; upstream's change and the proposal beside it
    opening = page.locator("#regions tr.ln-open")
    assert opening.count() == 1 and opening.locator("td.no").inner_text() == "2"
    assert opening.evaluate("e => getComputedStyle(e).backgroundColor") not in ("rgba(0, 0, 0, 0)", "transparent")
    assert page.locator("#regions tr.ln-ours td.tx").inner_text() == "    return 10  # fork"
    assert "+    return 100" in page.locator("#upstream-change").inner_text()
    assert "+    return 10  # fork" in page.locator("#fork-change").inner_text()
    assert "+    return 110" in page.locator("#proposal pre.diff").inner_text()
    left, right = page.locator("#regions").bounding_box(), page.locator("#proposal").bounding_box()
    assert right["x"] > left["x"] + left["width"] - 1  # beside, not below
    # approve the proposal shown, with the token
    page.fill("#approve input[name=token]", TOKEN)
    page.click("#approve button")
    page.wait_for_selector("#land")
    assert "resolved" in page.locator("h1").inner_text()
    # land it: the unit's re-run picks with the approved resolution, runs L1 and lands
    page.fill("#land input[name=token]", TOKEN)
    page.click("#land button")
    page.wait_for_url("**/ingestion/units/*")
    deadline = time.monotonic() + 60
    while "landed" not in (page.locator("#rerun").inner_text() if page.locator("#rerun").count() else ""):
        assert time.monotonic() < deadline, page.content()
        time.sleep(0.5)
        page.reload()
    page.screenshot(path=str(artifacts() / "conflict-landed.png"), full_page=True)
    assert run_git("rev-parse", "main", cwd=fork).strip() != start
    assert run_git("show", "main:k.py", cwd=fork) == "def f():\n" + BENIGN
    assert not page.problems, page.problems
