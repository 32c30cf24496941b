"""Normalising ``ba-mcp demo`` output for comparison across versions: what legitimately varies from run to
run (timings, latencies, matplotlib's note that a font cache build is slow, token totals of the metrics resource,
ids of artifacts whose rows tie in order) is masked, and continuation lines are left out (their wording is the
pipeline's, from ``next_args``)."""

from __future__ import annotations

import re

_MASKS = [
    (re.compile(r"\bin \d+(?:\.\d+)? (?:ms|s)\b"), "in <time>"),
    (re.compile(r"artifact_[0-9a-f]{12}"), "artifact_<id>"),
    (re.compile(r'("(?:avg_latency_ms|output_tokens|input_tokens|bytes|calls|count)": )[0-9.]+'), r"\1<n>"),
]
_CONTINUATION = re.compile(r"^More (?:rows|text) follows?\b")
# matplotlib logs this only when building a worker's font cache takes over 5 s (a busy machine): a timing, not output
_FONT_CACHE = re.compile(r"^Note: output written straight to file descriptors .*Matplotlib is building the font cache")


def normalize(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        if _CONTINUATION.match(line) or _FONT_CACHE.match(line):
            continue
        for pattern, replacement in _MASKS:
            line = pattern.sub(replacement, line)
        lines.append(line)
    return lines
