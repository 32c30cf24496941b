"""The code that runs inside the DuckDB and connection worker processes, never in the server
(``python -I -B -m ba_mcp.inside '<options JSON>'``; ``sandbox`` is the Python worker's, a package of its own).

``main`` confines the process and serves what its options say; ``serve`` answers each request
(``ba_mcp.workers.messages``) by its type from the program's table. A DuckDB worker: ``duck`` (the session's
DuckDB: SQL), ``decoding`` (files and pages), ``parquet`` (artifacts), ``metrics`` (the metrics compiler) and
``placeholders`` (a saved analysis's parameters; ``params`` reads them); a connection worker: ``connection`` (one
ADBC connection through its engine's hooks). ``sql`` is what DuckDB's side uses. They import nothing of the
server's side of workers but the protocol both speak (``workers.wire``) and the requests (``workers.messages``):
the server starts them, confines them and translates their failures (``ba_mcp.workers``), and never imports them
(tests/test_house.py).
"""
