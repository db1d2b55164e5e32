"""The decisions and ingestion pages in a real browser (Debian's chromium through Playwright,
against `forkflow serve`): filters and pagers are followed by clicks, hostile text never runs."""
from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from forkflow.landing import records as landing_records
from forkflow.ledger import records as ledger_records
from forkflow.models import Decider, Decision, MemberOutcome, RecordedDecision, UnitState
from forkflow.store import forks
from forkflow.store.session import Store
from forkflow.testing.seed import HOSTILE, sha_of
from tests.conftest import service
from tests.serving import serving
from tests.test_browser import ARGS

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("decisions-browser")
    url = f"sqlite:///{root / 'store.db'}"
    store = Store.open(url)
    with store.session_scope() as s:
        fid = forks.fork_id(s, "triton:main")
        for i in range(70):
            verdict = (Decision.SKIP, Decision.WONT_PORT)[i % 2]
            ledger_records.record_decision(s, fid, RecordedDecision(
                sha_of(f"up-{i}"), verdict.disposition, f"reason {i} {HOSTILE}", source=Decider.PERSON,
                verdict=verdict, task="javascript:window.__pwned=1" if i % 5 == 0 else "https://tracker.example/T",
                decided_by=f"Ann {HOSTILE}" if i % 7 == 0 else "Bob <bob@example.com>"))
        for r in range(3):
            run = landing_records.start_run(s, fid, "land", sha_of("base"))
            for i in range(30):
                landing_records.add_unit(s, run, fid, "bundle", f"bundle-{r}-{i} {HOSTILE}", sha_of("base"),
                                         sha_of(f"c-{r}-{i}"), UnitState.LANDED,
                                         [(sha_of(f"m-{r}-{i}"), MemberOutcome.APPLIED)], f"L1 passed {HOSTILE}")
            landing_records.finish_run(s, run)
    store.dispose()
    with serving(["--store", url], root, "/api/decisions", root / "serve.log") as (base, _):
        yield base


@pytest.fixture(scope="module")
def page(base_url: str) -> Iterator[Any]:
    chromium = service("FORKFLOW_TEST_CHROMIUM", "chromium")
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    with sync_playwright() as p, tempfile.TemporaryDirectory(prefix="ff-chromium-") as profile:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=chromium, args=ARGS,
                                                   headless=True, viewport={"width": 1280, "height": 900})
        pg = ctx.new_page()
        pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))

        def on_dialog(d: Any) -> None:
            problems.append(f"dialog: {d.message}")
            d.dismiss()

        pg.on("dialog", on_dialog)
        pg.problems = problems  # type: ignore[attr-defined]
        try:
            yield pg
        finally:
            ctx.close()


def _safe(pg: Any) -> None:
    assert pg.evaluate("window.__pwned") is None
    assert not pg.problems, pg.problems


@pytest.mark.security
def test_filter_and_page_the_decisions_by_clicks(page: Any, base_url: str) -> None:
    page.goto(base_url + "/")
    page.locator('header nav a[href="/decisions"]').click()
    page.wait_for_url("**/decisions")
    assert page.locator("#decisions tr").count() == 1 + 50
    _safe(page)
    page.locator("#pager a[rel=next]").click()
    page.wait_for_url("**/decisions?page=2")
    assert page.locator("#decisions tr").count() == 1 + 20
    page.select_option('#decision-filter select[name="kind"]', "wont-port")
    page.select_option('#decision-filter select[name="person"]', "Bob <bob@example.com>")
    page.locator("#decision-filter button").click()
    page.wait_for_url("**/decisions?kind=wont-port&person=Bob*")
    kinds = page.locator("#decisions tr td:nth-child(4)").all_inner_texts()
    assert kinds and set(kinds) == {"wont-port"}
    assert set(page.locator("#decisions tr td:nth-child(2)").all_inner_texts()) == {"Bob <bob@example.com>"}
    for link in page.locator("#decisions a").all():  # javascript: tasks are text, never links
        assert (link.get_attribute("href") or "").startswith(("/commits/", "https://"))
    page.locator("#decisions td a.sha").first.click()
    page.wait_for_url("**/commits/*")
    assert "recorded decision" in page.locator("#decision").inner_text()
    _safe(page)


@pytest.mark.security
def test_page_through_the_ingestion_runs(page: Any, base_url: str) -> None:
    page.goto(base_url + "/ingestion")
    assert page.locator("#units-table tr.run").count() == 2  # 30 of the newest run, 20 of the next
    assert page.locator("#units-table tr[id^=unit-]").count() == 50
    _safe(page)
    page.locator("#pager a[rel=next]").click()
    page.wait_for_url("**/ingestion?page=2")
    assert page.locator("#units-table tr[id^=unit-]").count() == 40
    assert "(continued)" in page.locator("#units-table tr.run").first.inner_text()
    _safe(page)
