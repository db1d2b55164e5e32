"""The pure part of replay: the window's checks and the summary, on literal data."""
from __future__ import annotations

import pytest

from forkflow.errors import UserError
from forkflow.replay.html import chart_svg, render_html
from forkflow.replay.model import (
    DAY,
    Landed,
    Report,
    ResolvedPick,
    State,
    Step,
    parse_day,
    parse_every,
    percentile,
    step_times,
    summarize,
)

T0 = 1_767_571_200  # 2026-01-05T00:00:00Z


@pytest.mark.parametrize("text, seconds", [("week", 7 * DAY), ("2w", 14 * DAY), ("3 days", 3 * DAY),
                                           ("day", DAY), ("12h", 12 * 3600), ("1Week", 7 * DAY)])
def test_parse_every_durations(text: str, seconds: int) -> None:
    assert parse_every(text) == seconds


@pytest.mark.parametrize("text", ["", "weekly", "0w", "-1d", "3 months", "w3"])
def test_parse_every_rejects_what_is_not_a_duration(text: str) -> None:
    with pytest.raises(UserError, match="not a duration"):
        parse_every(text)


def test_parse_day_means_the_end_of_that_day() -> None:
    assert parse_day("2026-01-05", "--since") == T0 + DAY - 1
    assert parse_day("2026-01-05T00:00:00Z", "--since") == T0
    with pytest.raises(UserError, match="--until '5 Jan' is not a date"):
        parse_day("5 Jan", "--until")


def test_step_times_of_a_window() -> None:
    times = step_times(T0, T0 + 16 * 7 * DAY, 7 * DAY, now=T0 + 365 * DAY, fork_point_date=T0 - 100 * DAY)
    assert len(times) == 17 and times[0] == T0 and times[-1] == T0 + 16 * 7 * DAY
    with pytest.raises(UserError, match="is after --until"):
        step_times(T0 + DAY, T0, DAY, now=T0 + 9 * DAY, fork_point_date=0)
    with pytest.raises(UserError, match="in the future"):
        step_times(T0, T0 + 9 * DAY, DAY, now=T0 + DAY, fork_point_date=0)
    with pytest.raises(UserError, match="before the fork point"):
        step_times(T0, T0 + DAY, DAY, now=T0 + 9 * DAY, fork_point_date=T0 + 1)


def test_percentile_interpolates() -> None:
    assert percentile([], 0.9) is None
    assert percentile([5.0], 0.9) == 5.0
    assert percentile([float(x) for x in range(1, 11)], 0.9) == pytest.approx(9.1)


def _step(i: int, landed: tuple[Landed, ...], after_backlog: int = 5) -> Step:
    return Step(T0 + i * 7 * DAY, f"f{i}", f"u{i}", 0, 0, State(100.0 + i, 10, 50, 50),
                State(0.0 if i else 3.0, after_backlog, 0, after_backlog), landed)


def test_summarize_counts_each_commit_once_at_its_first_landing() -> None:
    a = Landed("a", "A", "applied", fork_sha="F1", taken_at=T0 + 10 * DAY, same="patch-id")
    b = Landed("b", "B", "applied", fork_sha="F2", taken_at=T0 + 30 * DAY, same="differs")
    c = Landed("c", "C", "resolved", "trivial")  # not taken by the fork
    steps = [_step(0, (a, c)), _step(1, (a, b)), _step(2, (b,), after_backlog=20)]
    m = summarize(steps, [ResolvedPick("F9", ("x",), "same"), ResolvedPick("F8", ("y",), "unresolved")])
    assert m.landed_commits == 3 and m.not_taken == 1
    # a: first landed at step 0, taken 10 days later; b: first at step 1 (day 7), taken at day 30
    assert m.lag_saved_count == 2 and m.lag_saved_median == 16.5
    assert (m.clean_compared, m.clean_same, m.clean_kinds) == (2, 1, {"differs": 1, "patch-id": 1})
    assert (m.resolved_compared, m.resolved_same, m.resolved_by_forkflow) == (2, 1, 1)
    assert m.max_days_behind_after == 3.0 and m.steps_backlog_not_larger == 2


def test_step_json_round_trip_and_html_page() -> None:
    s = _step(1, (Landed("a", "<A>", "applied", fork_sha="F", taken_at=T0 + 20 * DAY, same="post-image"),))
    assert Step.from_json(s.to_json()) == s
    report = Report(T0, T0 + 7 * DAY, 7 * DAY, "", (_step(0, ()), s), summarize([s]), (), ("note <b>",))
    page = render_html(report, "fork <x>")
    assert page.count("<svg") == 3 and "fork &lt;x&gt;" in page and "note &lt;b&gt;" in page
    assert "<script" not in page
    assert chart_svg("t", [], {}).startswith("<svg")


def test_summarize_compares_like_with_like() -> None:
    """forkflow's own backlog (its point at upstream's tip) against the same branch read by the real rule."""
    real = State(120.0, 3, 600, 600)
    after = State(0.0, 400, 0, 400, inferred=False)  # deferrals are decisions: every one in the backlog
    steps = [Step(T0, "f", "u", 0, 0, real, after, same_rule=State(110.0, 5, 400, 400), backlog_at_real_point=2),
             Step(T0 + DAY, "f", "u", 0, 0, real, after, same_rule=State(90.0, 2, 400, 400),
                  backlog_at_real_point=3)]
    m = summarize(steps)
    assert m.steps_backlog_not_larger == 0 and m.max_days_behind_after == 0.0
    assert m.steps_backlog_not_larger_same_rule == 1 and m.max_days_behind_same_rule == 110.0
    assert m.steps_open_not_larger == 2 and m.steps_backlog_at_real_point_not_larger == 2
    assert Step.from_json(steps[0].to_json()) == steps[0]
    old = {k: v for k, v in steps[0].to_json().items() if k not in ("same_rule", "backlog_at_real_point")}
    assert Step.from_json(old).after_same_rule == after  # a step stored before these fields
