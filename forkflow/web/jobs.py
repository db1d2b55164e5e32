"""Background actions (re-runs): their state lives in app.state.jobs, shown on the page they concern."""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

Job = dict[str, Any]


def running(jobs: dict[Any, Job], key: Any) -> bool:
    return jobs.get(key, {}).get("state") == "running"


def start(jobs: dict[Any, Job], key: Any, name: str, initial: Job, work: Callable[[], Job],
          after: Callable[[Job], None] | None = None) -> None:
    """Mark `key` running and call `work` in a thread; its dict (or its error) becomes the job's state."""
    jobs[key] = {"state": "running", **initial, "error": ""}

    def run() -> None:
        try:
            jobs[key] = {**jobs[key], "state": "done", **work()}
        except Exception as e:  # noqa: BLE001  (reported on the job's page, not lost in a thread)
            jobs[key] = {**jobs[key], "state": "error", "error": " ".join(str(e).split())[:500]}
        if after is not None:
            after(jobs[key])

    threading.Thread(target=run, name=name, daemon=True).start()
