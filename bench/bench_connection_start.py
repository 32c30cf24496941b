"""The connection worker's start (issue 63 item 5): a fresh ``python -I -B`` process that does what a connection
worker does before its first answer — imports the worker program, opens a PostgreSQL connection through the engine's
``open`` (the driver, the role's checks, the allow-list catalog) — timed from the parent, wall clock.

Two variants, interleaved in one run (the same machine, the same load): ``now`` (the worker as it is: the driver's
``pyarrow.dataset`` a stand-in until used, ``inside.connection.light_imports``) and ``before`` (``pyarrow.dataset``
imported first, as the driver's DB-API did: pandas with it). Each run's median and the ratio are printed.

    uv run python bench/bench_connection_start.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = """
import sys
if sys.argv[1] == "before":
    import pyarrow.dataset  # what the driver's DB-API imported at its top
from ba_mcp.inside import main  # noqa: F401  (the worker program: python -m ba_mcp.inside)
from ba_mcp.inside.connection import Connector
from ba_mcp.workers.messages import Connect
c = Connector({})
c.connect(Connect(engine="ba_mcp.databases.postgresql", driver="", uri=sys.argv[2], options={}), [])
print("pandas" in sys.modules)
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    from tests import pg_server

    times: dict[str, list[float]] = {"before": [], "now": []}
    pandas: dict[str, set[str]] = {"before": set(), "now": set()}
    with pg_server.postgres() as pg:
        url = pg.url("analyst", "shop")
        for i in range(args.runs):
            for variant in ("now", "before") if i % 2 else ("before", "now"):
                started = time.perf_counter()
                out = subprocess.run(
                    [sys.executable, "-I", "-B", "-c", CHILD, variant, url],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    check=True,
                    env={"PYTHONPATH": str(ROOT)},
                )
                times[variant].append(time.perf_counter() - started)
                pandas[variant].add(out.stdout.strip())
    load = Path("/proc/loadavg").read_text().split()[0]
    for variant, values in times.items():
        print(
            f"{variant:>6}: median {statistics.median(values):.2f} s  (min {min(values):.2f}, max {max(values):.2f}; "
            f"pandas imported: {', '.join(sorted(pandas[variant]))})"
        )
    ratio = statistics.median(times["now"]) / statistics.median(times["before"])
    print(f"now / before: {ratio:.2f}  ({args.runs} runs each, interleaved; load average {load})")


if __name__ == "__main__":
    main()
