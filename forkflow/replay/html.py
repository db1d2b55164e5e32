"""A replay as one self-contained HTML page: two SVG charts and the per-step table.  [pure]

The charts are inline SVG with presentation attributes only (no script, no inline style), so the
same markup serves the `--html` file and the dashboard under its strict content policy.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

REAL, FORKFLOW, BY_PICKS = "#c0392b", "#2471a3", "#17a589"
W, H, PAD = 640, 220, 44


def chart_svg(title: str, xs: Sequence[str], series: Mapping[str, tuple[str, Sequence[float]]]) -> str:
    """A line chart of a few series over the same steps."""
    values = [v for _, ys in series.values() for v in ys]
    top = max(values + [1.0]) * 1.1
    n = max(len(xs) - 1, 1)

    def px(i: int) -> float:
        return PAD + (W - 2 * PAD) * i / n

    def py(v: float) -> float:
        return H - PAD + (v / top) * (2 * PAD - H) if top else H - PAD

    out = [f'<svg class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
           f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
           f'<text x="{PAD}" y="18" font-size="13" font-weight="bold">{escape(title)}</text>',
           f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#888"/>',
           f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}" stroke="#888"/>']
    for frac in (0.0, 0.5, 1.0):
        v = top / 1.1 * frac
        out.append(f'<text x="{PAD - 6}" y="{py(v) + 4:.1f}" font-size="10" text-anchor="end">{v:.0f}</text>')
    for i, x in enumerate(xs):
        if len(xs) <= 8 or i % max(1, len(xs) // 6) == 0 or i == len(xs) - 1:
            out.append(f'<text x="{px(i):.1f}" y="{H - PAD + 14}" font-size="10" text-anchor="middle">'
                       f'{escape(x[5:])}</text>')
    for k, (name, (color, ys)) in enumerate(series.items()):
        pts = " ".join(f"{px(i):.1f},{py(v):.1f}" for i, v in enumerate(ys))
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{pts}"/>')
        out += [f'<circle cx="{px(i):.1f}" cy="{py(v):.1f}" r="2.5" fill="{color}"/>' for i, v in enumerate(ys)]
    lx = W - PAD - sum(_legend_width(name) for name in series)  # the legends, right-aligned
    for name, (color, _) in series.items():
        out.append(f'<rect x="{lx:.0f}" y="8" width="10" height="10" fill="{color}"/>'
                   f'<text x="{lx + 14:.0f}" y="17" font-size="11">{escape(name)}</text>')
        lx += _legend_width(name)
    out.append("</svg>")
    return "".join(out)


def _legend_width(name: str) -> float:
    return 26 + 6.2 * len(name)  # the swatch, the name at 11 px, a gap


def every_words(seconds: int) -> str:
    """A replay's step as `--every` took it: "every week", "every 2 weeks", "every day",
    "every 3 days", "every 12 hours" (never "one step every 168 hours")."""
    for size, unit in ((7 * 86_400, "week"), (86_400, "day"), (3_600, "hour")):
        if seconds >= size and seconds % size == 0:
            n = seconds // size
            return f"every {unit}" if n == 1 else f"every {n} {unit}s"
    return f"every {seconds} seconds"


def charts(report: Mapping[str, Any]) -> list[str]:
    """The curves of a replay (its JSON form): days behind, backlog and open commits, real vs
    forkflow; days behind and backlog also for forkflow's branch by picks (the real fork's rule:
    the ingestion point inferred from picks, deferrals not counted), where the steps carry it."""
    steps = report["steps"]
    xs = [s["at_iso"][:10] for s in steps]
    by_picks = bool(steps) and all(s.get("same_rule") for s in steps)  # older stored replays lack it

    def curves(key: str, same_rule: bool = False) -> dict[str, tuple[str, list[float]]]:
        out = {"real": (REAL, [float(s["real"][key]) for s in steps]),
               "forkflow": (FORKFLOW, [float(s["after"][key]) for s in steps])}
        if same_rule and by_picks:
            out["forkflow, by picks"] = (BY_PICKS, [float(s["same_rule"][key]) for s in steps])
        return out

    return [chart_svg("days behind upstream", xs, curves("days_behind", True)),
            chart_svg("backlog commits", xs, curves("backlog", True)),
            chart_svg("open upstream commits (not taken yet)", xs, curves("open"))]


def step_rows(report: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for s in report["steps"]:
        same = s.get("same_rule") or s["after"]  # a replay stored before the like-for-like state
        rows.append([s["at_iso"][:10], s["fork_sha"][:10], f'{s["real"]["days_behind"]:g}',
                     f'{s["after"]["days_behind"]:g}', f'{same["days_behind"]:g}', str(s["real"]["backlog"]),
                     str(s["after"]["backlog"]), str(same["backlog"]), str(s["real"]["open"]), str(s["after"]["open"]),
                     str(len(s["landed"])), str(s["deferred"]), str(s["waiting"]), *headline_cells(s["after"])])
    return rows


def headline_cells(state: Mapping[str, Any]) -> list[str]:
    """The rest of `status`'s headline for a step's state (forkflow/ledger/headline.py): the oldest
    open commit's age, open conflicts as commits (and files), days behind were the held commits
    deferred; "-" where a replay stored before them does not say."""
    def days(v: Any) -> str:
        return "-" if v is None else f"{v:g}"
    commits, files = state.get("conflict_commits"), state.get("conflict_files")
    conflicts = "-" if commits is None else f"{commits} ({files if files is not None else '?'} files)"
    return [days(state.get("oldest_open_days")), conflicts, days(state.get("if_deferred_days"))]


HEADERS = ("step", "fork", "days behind (real)", "days behind (forkflow)", "(forkflow, by picks)", "backlog (real)",
           "backlog (forkflow)", "(forkflow, by picks)", "open (real)", "open (forkflow)", "landed", "deferred",
           "waiting", "oldest open, days (forkflow)", "open conflicts (forkflow)", "if deferred, days (forkflow)")


def summary_lines(report: Mapping[str, Any]) -> list[str]:
    m = report["summary"]

    def n(x: Any) -> str:
        return "-" if x is None else f"{x:g}"

    return [
        f'{m["landed_commits"]} upstream commits landed by forkflow; lag saved per commit the fork took later '
        f'({m["lag_saved_count"]}): median {n(m["lag_saved_median"])} days, p90 {n(m["lag_saved_p90"])} days; '
        f'{m["not_taken"]} not taken by the fork yet (as of its current tip)',
        f'same change as the fork\'s own pick: {m["clean_same"]} of {m["clean_compared"]} clean landings; the '
        f'fork\'s hand-resolved picks: {m["resolved_same"]} of {m["resolved_compared"]} resolved the same way '
        f'({m["resolved_by_forkflow"]} settled by forkflow\'s resolvers, the rest deferred to a person)',
        f'after forkflow: at most {n(m["max_days_behind_after"])} days behind; a backlog no larger than the '
        f'fork\'s at {m["steps_backlog_not_larger"]} of {m["steps"]} steps',
        f'forkflow\'s branch by picks alone (the rule the real fork is measured by: the ingestion point '
        f'inferred, deferrals not counted): at most {n(m.get("max_days_behind_same_rule"))} days behind; a backlog '
        f'no larger than the fork\'s at {m.get("steps_backlog_not_larger_same_rule", "-")} of {m["steps"]} steps; '
        f'fewer open commits at {m.get("steps_open_not_larger", "-")} of {m["steps"]} steps; no more commits '
        f'untaken at or before the fork\'s own ingestion point at '
        f'{m.get("steps_backlog_at_real_point_not_larger", "-")} of {m["steps"]} steps',
    ]


def render_html(report: Any, fork: str) -> str:
    """The whole page for `forkflow replay --html`."""
    doc = report.to_json() if hasattr(report, "to_json") else report
    table = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in step_rows(doc))
    head = "".join(f"<th>{escape(h)}</th>" for h in HEADERS)
    notes = "".join(f"<li>{escape(n)}</li>" for n in doc["notes"])
    summary = "".join(f"<li>{escape(x)}</li>" for x in summary_lines(doc))
    return (
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>forkflow replay: {escape(fork)}</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child,td:nth-child(2){text-align:left}"
        ".chart{display:block;margin:1em 0}</style></head><body>"
        f"<h1>forkflow replay: {escape(fork)}</h1>"
        f"<p>{escape(doc['since'])} to {escape(doc['until'])}, one step {every_words(doc['every_seconds'])}; "
        f"gate: {escape(doc['gate'] or 'none (merge-ability only)')}; {doc['wall_seconds']} s.</p>"
        + "".join(charts(doc)) + f"<ul>{summary}</ul><table><thead><tr>{head}</tr></thead><tbody>{table}"
        f"</tbody></table><ul>{notes}</ul></body></html>\n")
