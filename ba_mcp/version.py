"""The package's version (the one place it is written; pyproject.toml carries the same)."""

__version__ = "0.1.0"
