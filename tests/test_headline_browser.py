"""The overview's days-behind chart in a real browser: its axis never goes below zero."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from forkflow.web.charts import line
from tests.conftest import service

pytestmark = pytest.mark.browser

CHARTS_JS = Path(__file__).resolve().parent.parent / "forkflow" / "web" / "static" / "charts.js"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def _ticks(spec: dict[str, object]) -> list[float]:
    """The value axis' tick labels charts.js draws for one line chart payload."""
    chromium = service("FORKFLOW_TEST_CHROMIUM", "chromium")
    from playwright.sync_api import sync_playwright

    page_html = ('<html><body><div data-chart="c" style="width:600px"></div>'
                 '<script type="application/json" id="ff-charts">' + json.dumps({"c": spec}) + "</script></body></html>")
    with sync_playwright() as p, tempfile.TemporaryDirectory(prefix="ff-chromium-") as profile:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=chromium, args=ARGS, headless=True)
        try:
            page = ctx.new_page()
            page.set_content(page_html)
            page.add_script_tag(content=CHARTS_JS.read_text())
            page.wait_for_selector("html[data-charts-rendered]", state="attached", timeout=10_000)
            texts = page.eval_on_selector_all("text.ff-tick", "els => els.map(e => e.textContent)")
        finally:
            ctx.close()
    return [float(t) for t in texts if "-" not in t[1:]]  # the dates of the x axis aside


@pytest.mark.parametrize("values", [[0.0, 0.0, 0.0], [0.0, 3.5, 12.0]])
def test_days_behind_axis_stops_at_zero(values: list[float]) -> None:
    # before: [0, 0, 0] drew ticks -1, 0, 1; [0, 3.5, 12] drew a tick at -0.96
    ticks = _ticks(line("days behind upstream", [1_700_000_000 + i * 86_400 for i in range(3)], values,
                        unit="days", floor=0.0))
    assert ticks and min(ticks) == 0.0 and max(ticks) >= max(values)
