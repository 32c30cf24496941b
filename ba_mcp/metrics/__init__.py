"""Metrics: OSI semantic-model files (model.py), their SQL pieces (sql.py) and the query compiler (compile.py)."""
