"""The bounded worker processes where every SQL statement and every decode of untrusted bytes runs, never in the
server (S-12): ``python -I -B -m ba_mcp.workers '<options>'`` — an engine worker (``engine``: DuckDB, the parsers,
the metrics compiler) or a connection worker (``connection``: one ADBC connection, its engine's hooks loaded by
name). ``pool`` is the server's side of the engine workers, ``connections`` of the connection workers; ``wire``
the frames and Arrow blobs between them; ``sql`` and ``params`` run inside the engine worker.
"""
