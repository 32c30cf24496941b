"""``python -I -B -m ba_mcp.inside '<options JSON>'``: a DuckDB or connection worker (see ``main``)."""

import sys

from ba_mcp.inside.main import run

run(sys.argv[1:])
