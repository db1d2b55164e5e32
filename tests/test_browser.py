"""The dashboard in a real browser: Debian's chromium driven by Playwright, against `forkflow serve`
(uvicorn) on a free port over a seeded store.  Screenshots go to FORKFLOW_ARTIFACTS."""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from forkflow.store.session import Store
from forkflow.testing.seed import SeedInfo, SeedSize, seed_store
from tests.serving import serving
from tests.conftest import service

pytestmark = pytest.mark.browser

SIZE = SeedSize(days=90, metrics=12, upstream_commits=600, tests_per_run=6)
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@dataclass
class Server:
    url: str
    info: SeedInfo
    proc: subprocess.Popen[str]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("browser")
    url = f"sqlite:///{root / 'store.db'}"
    store = Store.open(url)
    info = seed_store(store, "triton:main", SIZE, hostile=True)
    store.dispose()
    with serving(["--store", url], root, "/api/overview", root / "serve.log") as (base, proc):
        yield Server(base, info, proc)


@pytest.fixture(scope="module")
def browser_page(server: Server) -> Iterator[Any]:
    chromium = service("FORKFLOW_TEST_CHROMIUM", "chromium")
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    with sync_playwright() as p, tempfile.TemporaryDirectory(prefix="ff-chromium-") as profile:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=chromium, args=ARGS,
                                                   headless=True, viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
                if m.type == "error" else None)

        def on_dialog(d: Any) -> None:
            problems.append(f"dialog: {d.message}")
            d.dismiss()

        page.on("dialog", on_dialog)
        page.problems = problems  # type: ignore[attr-defined]
        try:
            yield page
        finally:
            ctx.close()


def artifacts() -> Path:
    out = Path(os.environ.get("FORKFLOW_ARTIFACTS") or tempfile.gettempdir()) / "dashboard"
    out.mkdir(parents=True, exist_ok=True)
    return out


def _open(page: Any, server: Server, path: str, shot: str) -> None:
    page.goto(server.url + path)
    page.wait_for_selector("html[data-charts-rendered]", state="attached", timeout=10_000)
    page.screenshot(path=str(artifacts() / f"{shot}.png"), full_page=True)
    assert page.evaluate("window.__pwned") is None, f"hostile text ran on {path}"
    assert not page.problems, page.problems


def _vertices(d: str) -> int:
    return len(re.findall(r"[ML]", d))


def test_overview_charts_draw_the_history(browser_page: Any, server: Server) -> None:
    _open(browser_page, server, "/", "overview")
    for key in ("days-behind", "backlog"):
        box = browser_page.locator(f'[data-chart="{key}"]')
        assert box.get_attribute("data-rendered") == "1"
        assert box.locator("svg").get_attribute("data-points") == str(SIZE.days)
        assert _vertices(box.locator("path.ff-line").get_attribute("d") or "") == SIZE.days
        assert box.locator("circle.ff-pt").count() == SIZE.days
    assert browser_page.locator("#days-behind").inner_text().strip() != ""


def test_l2_charts_show_every_series_with_its_alerts(browser_page: Any, server: Server) -> None:
    _open(browser_page, server, "/l2", "l2")
    paths = browser_page.locator("[data-chart] path.ff-line")
    assert paths.count() == SIZE.metrics
    for i in range(SIZE.metrics):
        assert _vertices(paths.nth(i).get_attribute("d") or "") == SIZE.days
    assert browser_page.locator("[data-chart] rect.ff-mark.ff-regression").count() > 0
    assert browser_page.locator("[data-chart] rect.ff-mark.ff-improvement").count() > 0


def test_metric_chart_hover_and_click_through_its_alert_mark(browser_page: Any, server: Server) -> None:
    name = server.info.metric_names[0]  # regressed late in the year, alert bisected
    _open(browser_page, server, f"/l2/metrics/{name}", "l2-metric")
    svg = browser_page.locator('[data-chart="series"] svg')
    assert browser_page.locator('[data-chart="series"] circle.ff-pt').count() == SIZE.days
    box = svg.bounding_box()
    browser_page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] / 2)
    tip = browser_page.locator('[data-chart="series"] .ff-tip')
    assert tip.is_visible() and "TFLOP/s" in tip.inner_text()
    browser_page.locator('[data-chart="series"] a.ff-link').first.click()
    browser_page.wait_for_url(re.compile(r"/l2/alerts/\d+$"))
    assert "alert #" in browser_page.locator("h1").inner_text()


def test_click_from_alert_to_its_bisection_culprit(browser_page: Any, server: Server) -> None:
    info = server.info
    _open(browser_page, server, "/l2", "l2-alerts")
    browser_page.locator(f'a.alert-link[href="/l2/alerts/{info.alert_ids[1]}"]').click()
    browser_page.wait_for_url(f"**/l2/alerts/{info.alert_ids[1]}")
    browser_page.wait_for_selector("html[data-charts-rendered]", state="attached")
    assert browser_page.locator("[data-chart] path.ff-line").count() >= 1
    browser_page.screenshot(path=str(artifacts() / "alert.png"), full_page=True)
    browser_page.locator("#culprit a.culprit-link").click()
    browser_page.wait_for_url(f"**/commits/{info.culprit_upstream}")
    assert browser_page.locator("#upstream-commit .subject").inner_text() == info.culprit_subject
    browser_page.screenshot(path=str(artifacts() / "culprit.png"), full_page=True)
    assert browser_page.evaluate("window.__pwned") is None


def test_validation_triage_and_ingestion_pages(browser_page: Any, server: Server) -> None:
    _open(browser_page, server, "/validation", "validation")
    bars = browser_page.locator('[data-chart="tier-L2"] rect.ff-bar')
    assert bars.count() == 40  # the newest runs per tier
    assert browser_page.locator('[data-chart="tier-L2"] rect.ff-bar.ff-fail').count() >= 1
    _open(browser_page, server, "/triage", "triage")
    assert browser_page.locator('[data-chart="trunk"] rect.ff-bar').count() == min(SIZE.days, 60)
    assert browser_page.locator("#groups tr").count() == 1 + len(server.info.group_keys)
    for path, shot in (("/ingestion", "ingestion"), (f"/ingestion/units/{server.info.unit_ids[3]}", "unit"),
                       (f"/triage/groups/{server.info.group_keys[0]}", "group")):
        _open(browser_page, server, path, shot)
    assert "<script>" in browser_page.locator("pre.log").first.inner_text()  # shown as text
