"""The server's side of the bounded worker processes where every SQL statement and every decode of untrusted bytes
runs, never in the server (S-12): ``spawn`` starts and confines them (``python -I -B -m ba_mcp.inside '<options>'``
for a DuckDB or a connection worker, ``-m sandbox`` for Python); ``pool`` keeps them — one per session or lent per
call; ``duckworkers`` are the sessions' DuckDB workers, ``sandboxes`` the Python ones, ``connections`` the
connection workers per database; ``call`` is one call's use of a worker (the boundary call: a typed request out,
its answer in), ``messages`` the typed requests both sides share, ``work`` what the tools and services hand a
DuckDB worker; ``failures`` translates what a worker's failure means to the caller, ``wire`` is the protocol
(frames and Arrow blobs) both sides speak. The programs that run inside the workers are ``ba_mcp.inside`` — never
imported here.
"""
