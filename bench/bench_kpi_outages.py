"""How often the kpi-anomaly-detection skill finds a one-day outage, and how many false alarms it raises, on
simulated retailers with recurring holidays - its script now against the same script at an earlier revision.

Each series is tests/test_skills_bundled.py's HOLIDAY_RETAILER (four years of daily orders, ~300 a day growing
15 % a year, weekends, a winter peak, Black Friday x 3, Cyber Monday x 2, a quiet Thanksgiving, Christmas x 0.3,
4 July x 0.6, negative binomial noise) with its own seed and the -70 % outage moved to a random day. The scripts
run in this interpreter (load_artifact and save_artifact as identities), not in the sandbox: this measures the
method, not the server.

Run:  uv run python bench/bench_kpi_outages.py [--series 20] [--against 47d395e]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import warnings
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SCRIPT = "skills/kpi-anomaly-detection/scripts/kpi_anomalies.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--series", type=int, default=20)
    parser.add_argument("--against", default="47d395e", help="the git revision whose script is compared")
    args = parser.parse_args()
    matplotlib.use("Agg")
    warnings.simplefilter("ignore")
    from tests.test_skills_bundled import HOLIDAY_RETAILER

    scripts = {
        "now": (ROOT / SCRIPT).read_text(),
        args.against: subprocess.run(
            ["git", "show", f"{args.against}:{SCRIPT}"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout,
    }
    rng = np.random.default_rng(123)
    days = pd.date_range("2022-03-01", "2025-10-31", freq="D")
    found = dict.fromkeys(scripts, 0)
    false = dict.fromkeys(scripts, 0)
    for i in range(args.series):
        day = str(days[rng.integers(len(days))].date())
        generator = HOLIDAY_RETAILER.replace("default_rng(2)", f"default_rng({1000 + i})").replace(
            'pd.Timestamp("2025-06-18")', f'pd.Timestamp("{day}")'
        )
        made: dict = {"save_artifact": lambda frame: frame}
        exec(generator, made)
        for name, code in scripts.items():
            run: dict = {
                "SOURCE": made["SOURCE"],
                "load_artifact": lambda frame: frame.copy(),
                "print": lambda *a: None,
            }
            exec(code, run)
            periods = run["anomalies"].period
            found[name] += int((periods == day).any())
            false[name] += int((periods != day).sum())
    for name in scripts:
        print(f"{name}: the outage found in {found[name]} of {args.series} series; {false[name]} false alarms in all")


if __name__ == "__main__":
    main()
