"""``python -I -B -m ba_mcp.workers '<options JSON>'``: an engine worker (see ``engine``)."""

import sys

from ba_mcp.workers.engine import run

run(sys.argv[1:])
