"""``python -I -B -m ba_mcp.worker '<options JSON>'``: an engine worker (see ``engine``)."""

import sys

from ba_mcp.worker.engine import run

run(sys.argv[1:])
