"""Saved analyses (docs/saved-analyses.md): a conversation's calls kept as data and replayed without the model.

``manifest`` — the steps chosen from the session's provenance, their parameters found and bound, the folder
``analyses/<name>/`` (``analysis.yaml``, the launcher ``analysis.py``) written atomically and whose session it is;
``replay`` — the steps run again through the same tools, bounded like live calls. ``ba_mcp.rerun`` runs one with an
App of its own (``ba-mcp analyses run``, ``analysis.py``); the tools ``save_analysis`` and ``run_analysis`` with
the server's.
"""
