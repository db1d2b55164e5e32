"""A replay's step says what `--every` said: "every week", not "one step every 168 hours"."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from forkflow.replay import records
from forkflow.replay.html import every_words, render_html
from forkflow.replay.model import parse_every
from forkflow.store import forks
from forkflow.store.session import Store
from forkflow.web.app import create_app
from tests.test_replay_web import _report


@pytest.mark.parametrize("every,words", [("week", "every week"), ("day", "every day"), ("2w", "every 2 weeks"),
                                         ("3d", "every 3 days"), ("12h", "every 12 hours"),
                                         ("14 days", "every 2 weeks"), ("1h", "every hour")])
def test_every_reads_as_the_option_said_it(every: str, words: str) -> None:
    assert every_words(parse_every(every)) == words


@pytest.mark.parametrize("seconds,words", [(604_800, "every week"), (86_400, "every day")])
def test_replay_page_and_html_file_say_every_week_or_day(tmp_path: Path, seconds: int, words: str) -> None:
    report = replace(_report(), every=seconds)
    assert f"one step {words};" in render_html(report, "triton:main")
    assert "hours" not in render_html(report, "triton:main").split("</h1>", 1)[1].split("</p>", 1)[0]
    url = f"sqlite:///{tmp_path / 'ff.db'}"
    with Store.open(url).session_scope() as s:
        fid = forks.fork_id(s, "triton:main")
        run = records.start_run(s, fid, "2026-01-05", "2026-01-26", seconds, "")
        records.finish_run(s, run, report.to_json())
    with TestClient(create_app(url)) as c:
        page = c.get("/replay").text
    assert f"one step {words};" in page and "168 hours" not in page and "24 hours" not in page
