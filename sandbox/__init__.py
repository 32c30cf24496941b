"""The Python execution worker of ba-mcp (docs/tools.md, S-4).

Runs in a child process that the server starts with ``python -I -B -m sandbox``; it imports nothing
from ``ba_mcp``. Modules: ``protocol`` (length-prefixed JSON frames over a socketpair, file
descriptors passed alongside), ``isolation`` (namespaces, read-only filesystem, privilege drop,
resource limits), ``policy`` (the import guardrail), ``worker`` (the persistent namespace that runs
cells and captures their output).
"""
