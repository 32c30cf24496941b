"""The server's side of the bounded worker processes where every SQL statement and every decode of untrusted bytes
runs, never in the server (S-12): ``spawn`` starts and confines them (``python -I -B -m ba_mcp.worker '<options>'``
for an engine or a connection worker, ``-m sandbox`` for Python), ``pool`` keeps the engine and sandbox workers per
session, ``connections`` the connection workers per database, ``failures`` translates what a worker's failure means
to the caller, ``wire`` is the protocol (frames and Arrow blobs) both sides speak. The programs that run inside the
workers are ``ba_mcp.worker`` — never imported here.
"""
