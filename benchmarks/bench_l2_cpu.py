"""CPU time of the dashboard's `/l2` handler, called in this process (no HTTP, no threads).

    python benchmarks/bench_l2_cpu.py                    # seeds 365 nightlies x 50 metrics, as bench_web.py
    python benchmarks/bench_l2_cpu.py --store-file F.db  # an existing store (seeded when F.db is missing)

`time.process_time` counts only this process's CPU, so on a shared machine it varies less than the
wall time `bench_web.py` reads from `Server-Timing`; the slowest call shows the garbage collector's
full passes.  Prints the median and the slowest of `--repeat` calls after one warm-up call.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from starlette.requests import Request

from forkflow.store.session import Store
from forkflow.testing.seed import SeedSize, seed_store
from forkflow.web.app import create_app
from forkflow.web.routes import l2 as l2_routes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store-file", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    db = args.store_file or Path(tempfile.mkdtemp(prefix="ff-bench-l2-")) / "store.db"
    if not db.exists():
        store = Store.open(f"sqlite:///{db}")
        seed_store(store, "triton:main", SeedSize(365, 50, 5000))
        store.dispose()
    app = create_app(f"sqlite:///{db}")

    async def start() -> None:
        await app.router.lifespan_context(app).__aenter__()

    if not hasattr(app.state, "source"):
        asyncio.run(start())

    def request() -> Request:
        return Request({"type": "http", "method": "GET", "path": "/l2", "raw_path": b"/l2", "root_path": "",
                        "scheme": "http", "query_string": b"", "headers": [(b"accept", b"text/html")],
                        "app": app, "server": ("bench", 80), "client": ("bench", 1)})

    size = len(l2_routes.l2(request()).body)
    times = []
    for _ in range(args.repeat):
        t = time.process_time()
        l2_routes.l2(request())
        times.append((time.process_time() - t) * 1000)
    print(f"/l2 handler CPU time over {args.repeat} calls: median {statistics.median(times):.1f} ms, "
          f"slowest {max(times):.1f} ms ({size} bytes)")


if __name__ == "__main__":
    main()
