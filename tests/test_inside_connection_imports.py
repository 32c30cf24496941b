"""Issue 63 item 5: a connection worker imports what a connection needs — the driver, pyarrow — and not pandas,
which the ADBC driver manager's ``import pyarrow.dataset`` and pyarrow's look for pandas objects pulled in (2-3 s of
each worker's start; ``bench/bench_connection_start.py`` measures the start). Checked in a fresh interpreter, as the
worker starts (``python -I -B``); what still needs pandas or ``pyarrow.dataset`` gets them whole."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import importlib, json, sys
from ba_mcp.inside import main  # the worker program
from ba_mcp.inside.connection import light_imports
light_imports()
importlib.import_module("ba_mcp.databases.postgresql")  # an engine's module, as Connector.connect loads it
import adbc_driver_postgresql.dbapi  # the driver, as the engine's open imports it
import pyarrow as pa
pa.array(["text", None]); pa.record_batch([[1], ["2025-01-01"]], names=["0", "1"])  # bound parameters, shown texts
seen = {"pandas": "pandas" in sys.modules, "pyarrow._dataset": "pyarrow._dataset" in sys.modules}
import pyarrow.dataset as ds
seen["dataset_used"] = ds.dataset([pa.table({"a": [1, 2]})]).to_table().num_rows  # the real module, on first use
seen["to_pandas"] = int(pa.table({"a": [1, 2]}).to_pandas()["a"].sum())  # pandas still there when asked
seen["from_pandas"] = pa.Table.from_pandas(pa.table({"b": [3]}).to_pandas()).num_rows
print(json.dumps(seen))
"""


@pytest.mark.slow
def test_a_connection_worker_imports_no_pandas() -> None:
    out = subprocess.run(
        [sys.executable, "-I", "-B", "-c", CHILD],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {
        "pandas": False,
        "pyarrow._dataset": False,
        "dataset_used": 2,
        "to_pandas": 3,
        "from_pandas": 1,
    }, (seen, out.stderr)
