"""Server-side render time of every dashboard page on a year of history, next to the plain reads.

    python benchmarks/bench_web.py                       # 365 nightlies x 50 metrics, 5,000 upstream commits
    python benchmarks/bench_web.py --days 730 --metrics 100 --commits 20000
    python benchmarks/bench_web.py --alerts 150 --l3 100   # a busy year: many alerts and L3 requests

The store is seeded (forkflow.testing.seed) into a SQLite file.  Each page is requested once to warm
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
from forkflow.testing.seed import SeedInfo, SeedSize, seed_store

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


def add_alerts_and_l3(store: Store, info: SeedInfo, alerts: int, l3: int) -> None:
    """More alerts and L3 requests than the seed's two each: the pages that list them must not
    read them one query at a time."""
    from forkflow.models import Better
    from forkflow.regress import records
    from forkflow.regress.alerts import AlertDraft, SeriesChange
    from forkflow.tiers import records as tq
    from forkflow.tiers.tiers import RunStatus, Tier

    revs, names = info.fork_revs, info.metric_names
    with store.session_scope() as s:
        for k in range(alerts):
            good, bad = revs[k % (len(revs) - 1)], revs[k % (len(revs) - 1) + 1]
            members = tuple(SeriesChange(names[(k + j) % len(names)], "ms", Better.LOWER, good, bad, 1.0, 1.1,
                                         0.1, 0.001) for j in range(3))
            (a,) = records.save_alerts(s, info.fork_id, [AlertDraft(good, bad, members)])
            info.alert_ids.append(a.id)
            if k % 2:
                records.save_bisection(s, info.fork_id, a.id, {
                    "metric": members[0].metric, "mode": "perf", "good": good, "bad": bad, "status": "found",
                    "confidence": 0.95, "rounds": 4, "measurements": 40, "message": "found",
                    "culprit": {"fork_commit": bad, "landing_unit": bad, "subject": "a change",
                                "upstream_commit": None, "pr": None}, "stages": []})
        for k in range(l3):
            rev = revs[-1 - k % len(revs)]
            rid = tq.add_l3_request(s, info.fork_id, "serving", rev, "alice", f"check {k}")
            run_id, _ = tq.create_run(s, info.fork_id, tq.NewRun(Tier.L3, rev, None, "local", "l3", 0, (),
                                                                 ("serving",), {}, l3_request_id=rid),
                                      [tq.NewJob("serving", "serve", "", "", "", False, None, None)])
            tq.finish_run(s, run_id, RunStatus.PASS, "L3 run", ())
            tq.add_signoff(s, rid, run_id, "oncall", "accept", "ok")
            info.l3_request_ids.append(rid)


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
    ap.add_argument("--alerts", type=int, default=0, help="extra alerts (3 metrics each, every other bisected)")
    ap.add_argument("--l3", type=int, default=0, help="extra L3 requests (a run and a sign-off each)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ff-bench-web-"))
    db = tmp / "store.db"
    t0 = time.perf_counter()
    store = Store.open(f"sqlite:///{db}")
    info = seed_store(store, "triton:main", SeedSize(args.days, args.metrics, args.commits))
    add_alerts_and_l3(store, info, args.alerts, args.l3)
    store.dispose()
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}; "
          f"seeded {args.days} nightlies x {args.metrics} metrics, {args.commits} upstream commits, "
          f"{len(info.alert_ids)} alerts, {len(info.l3_request_ids)} L3 requests "
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
