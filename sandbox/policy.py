"""The import guardrail: user code may import only allowed top-level modules.

A guardrail against mistakes (a model reaching for ``subprocess`` or ``requests``), not the security
boundary — the process, its namespaces and limits are. It replaces ``__import__`` in the builtins
the user's namespace sees, so imports made by libraries themselves are not affected.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from typing import Any


class ImportPolicyError(ImportError):
    """Raised for an import the policy does not allow; its message names the module."""


def guarded_builtins(allowed: Iterable[str] | None) -> dict[str, Any]:
    """A copy of the builtins for the user's namespace; ``allowed=None`` turns the guardrail off."""
    names = builtins.__dict__.copy()
    if allowed is None:
        return names
    allow = frozenset(allowed)
    real: Callable[..., Any] = builtins.__import__

    def __import__(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        top = name.partition(".")[0]
        if level == 0 and top not in allow:
            raise ImportPolicyError(f"import of '{top}' is not allowed by the sandbox's import policy", name=top)
        return real(name, globals, locals, fromlist, level)

    names["__import__"] = __import__
    return names
