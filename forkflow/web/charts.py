"""Chart payloads for static/charts.js: plain JSON the script draws as SVG.  [pure]

    line:  {"type": "line", "x": [unix s], "y": [...], "labels": [...], "marks": [...], "floor": n|null}
    bars:  {"type": "bars", "y": [...], "labels": [...], "cls": [...], "href": [...]}

A mark is a change point or an alert on a series: the index of its first point after the
change, the index of the last point before it, a label and a link.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Mark:
    before: int  # index of the last point before the change
    after: int   # index of the first point after it
    label: str
    href: str
    cls: str     # regression | improvement


def _finite(values: Sequence[float]) -> list[float | None]:
    return [v if isinstance(v, (int, float)) and math.isfinite(v) else None for v in values]


def line(title: str, x: Sequence[int], y: Sequence[float], *, unit: str = "", labels: Sequence[str] = (),
         marks: Sequence[Mark] = (), href: str = "", compact: bool = False, better: str = "",
         floor: float | None = None) -> dict[str, Any]:
    """A line chart of one series; `labels` name each point (a short sha), `href` links the title;
    `floor`: the least value the series can take (0 for days and counts): the axis stops there."""
    return {"type": "line", "title": title, "unit": unit, "x": list(x), "y": _finite(y),
            "labels": list(labels), "href": href, "compact": compact, "better": better, "floor": floor,
            "marks": [{"before": m.before, "after": m.after, "label": m.label, "href": m.href,
                       "cls": m.cls} for m in marks]}


def bars(title: str, y: Sequence[float], cls: Sequence[str], *,
         labels: Sequence[str] = (), hrefs: Sequence[str] = (), unit: str = "") -> dict[str, Any]:
    """One bar per item (a run), coloured by class (PASS, FAIL, INFRA, RUNNING)."""
    return {"type": "bars", "title": title, "unit": unit, "y": _finite(y),
            "cls": list(cls), "labels": list(labels), "href": list(hrefs)}
