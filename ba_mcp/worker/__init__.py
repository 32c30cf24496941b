"""The worker programs: the code that runs inside the engine and connection worker processes, never in the server
(``python -I -B -m ba_mcp.worker '<options JSON>'``; ``sandbox`` is the Python worker's, a package of its own).

``engine`` serves one session's in-memory DuckDB (the configured files ATTACHed read-only, the session's TEMP
objects), the decoders of untrusted bytes and the metrics compiler; ``connection`` serves one ADBC connection to a
configured database through its engine's hooks; ``sql`` and ``params`` are what both use. They speak the protocol of
``ba_mcp.workers.wire`` and import nothing else of the server's side of workers: the server starts them, confines
them and translates their failures (``ba_mcp.workers``), and never imports them (tests/test_house.py).
"""
