"""Server-side render time of every dashboard page on a year of history, next to the plain reads.

    python benchmarks/bench_web.py                       # 365 nightlies x 50 metrics, 5,000 upstream commits
    python benchmarks/bench_web.py --days 730 --metrics 100 --commits 20000

The store is seeded (forkflow.web.seed) into a SQLite file.  Each page is requested once to warm
caches, then `--repeat` times; the time is the app's own `Server-Timing` (routing, store reads,
template rendering), as HTML and as JSON.  The baseline is plain sqlite3 reading the rows the page
shows, without forkflow; the ratio is what building the page costs on top of fetching its data.
The target: every page under 300 ms.
"""
from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from fastapi.testclient import TestClient

from forkflow.store.session import Store
from forkflow.web.app import create_app
from forkflow.web.seed import SeedInfo, SeedSize, seed_store

TARGET_MS = 300.0


def baselines(db: Path, fid: int) -> dict[str, Callable[[], object]]:
    """Plain sqlite3 reads of the rows each page shows."""
    con = sqlite3.connect(db, check_same_thread=False)

    def q(sql: str, *args: object) -> Callable[[], object]:
        return lambda: con.execute(sql, args).fetchall()

    def overview() -> object:
        rows = con.execute("SELECT * FROM snapshots WHERE fork_id=? ORDER BY taken_at", (fid,)).fetchall()
        payload = con.execute("SELECT payload FROM ledger_cache WHERE fork_id=? ORDER BY created_at DESC "
                              "LIMIT 1", (fid,)).fetchone()[0]
        return rows, json.loads(payload)

    return {
        "overview": overview,
        "l2": q("SELECT name, rev, value, unit, better, suite, commit_date FROM metric_points WHERE fork_id=? "
                "ORDER BY name, commit_date, id", fid),
        "validation": q("SELECT r.id, t.outcome, count(*) FROM validation_runs r JOIN test_outcomes t ON "
                        "t.run_id = r.id WHERE r.fork_id=? GROUP BY r.id, t.outcome", fid),
        "ingestion": q("SELECT * FROM ingest_units u JOIN ingest_unit_members m ON m.unit_id = u.id "
                       "WHERE u.fork_id=?", fid),
        "triage": q("SELECT g.id, c.classification, count(*) FROM triage_groups g JOIN triage_failures f ON "
                    "f.group_id = g.id LEFT JOIN triage_classifications c ON c.failure_id = f.id WHERE "
                    "g.fork_id=? GROUP BY g.id, c.classification", fid),
        "l2 metric": q("SELECT rev, value, commit_date FROM metric_points WHERE fork_id=? AND name=? "
                       "ORDER BY commit_date, id", fid, "matmul/fp16/M1024-N1024-K1024:tflops"),
    }


def pages(info: SeedInfo) -> dict[str, str]:
    return {
        "overview": "/", "ingestion": "/ingestion", "validation": "/validation", "l2": "/l2",
        "triage": "/triage", "l2 metric": f"/l2/metrics/{info.metric_names[0]}",
        "l2 alert": f"/l2/alerts/{info.alert_ids[-1]}", "bisection": f"/l2/bisections/{info.bisection_ids[0]}",
        "commit": f"/commits/{info.culprit_upstream}", "unit": f"/ingestion/units/{info.unit_ids[0]}",
        "run": f"/validation/runs/{info.nightly_run_ids[-2]}", "group": f"/triage/groups/{info.group_keys[0]}",
    }


def server_ms(c: TestClient, path: str, repeat: int, accept: str) -> list[float]:
    out = []
    for _ in range(repeat):
        r = c.get(path, headers={"Accept": accept})
        assert r.status_code == 200, (path, r.text[-300:])
        out.append(float(r.headers["server-timing"].split("dur=")[1]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--metrics", type=int, default=50)
    ap.add_argument("--commits", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ff-bench-web-"))
    db = tmp / "store.db"
    t0 = time.perf_counter()
    store = Store.open(f"sqlite:///{db}")
    info = seed_store(store, "triton:main", SeedSize(args.days, args.metrics, args.commits))
    store.dispose()
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}; "
          f"seeded {args.days} nightlies x {args.metrics} metrics, {args.commits} upstream commits "
          f"in {time.perf_counter() - t0:.1f}s ({db.stat().st_size / 2**20:.1f} MiB)")
    base = baselines(db, info.fork_id)
    worst = 0.0
    print(f"{'page':<12} {'html median':>11} {'html p95':>9} {'json median':>11} {'plain reads':>11} {'ratio':>6} bytes")
    with TestClient(create_app(f"sqlite:///{db}")) as c:
        for name, path in pages(info).items():
            c.get(path)  # warm: the ledger parse is cached per key, templates compiled
            html = sorted(server_ms(c, path, args.repeat, "text/html"))
            js = sorted(server_ms(c, path, args.repeat, "application/json"))
            size = len(c.get(path).content)
            b = base.get(name)
            plain = statistics.median(_time(b) for _ in range(args.repeat)) if b else None
            med = statistics.median(html)
            p95 = html[int(0.95 * (len(html) - 1))]
            worst = max(worst, p95, statistics.median(js))
            ratio = f"{med / plain:6.1f}" if plain else "     -"
            plain_s = f"{plain:9.1f}ms" if plain else "          -"
            print(f"{name:<12} {med:9.1f}ms {p95:7.1f}ms {statistics.median(js):9.1f}ms {plain_s} {ratio} {size}")
    verdict = "OK" if worst < TARGET_MS else "OVER"
    print(f"slowest page (p95 html, median json): {worst:.1f} ms; target {TARGET_MS:.0f} ms: {verdict}")


def _time(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


if __name__ == "__main__":
    main()
