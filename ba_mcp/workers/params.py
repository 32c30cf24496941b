"""In the engine worker: the literal values an analysis turns into parameters, found in a step's SQL (by DuckDB's
tokenizer) or Python (by ``tokenize``) and replaced — SQL by a bound ``$name``, Python by ``PARAMS["name"]`` —
so a saved analysis binds its parameters and never pastes them into SQL text."""

from __future__ import annotations

import ast
import io
import tokenize
from typing import Any

_TYPED = ("DATE", "TIMESTAMP", "TIME", "INTERVAL")


def sql_placeholders(sql: str, values: dict[str, Any]) -> tuple[str, list[str]]:
    """``sql`` with each literal equal to a value replaced by ``$name`` (a typed literal such as DATE '…' by
    CAST($name AS DATE)), and the names found."""
    import duckdb

    tokens = duckdb.tokenize(sql)
    edits: list[tuple[int, int, str]] = []
    found: list[str] = []
    for i, (start, kind) in enumerate(tokens):
        if kind not in (duckdb.token_type.string_const, duckdb.token_type.numeric_const):
            continue
        end = tokens[i + 1][0] if i + 1 < len(tokens) else len(sql)
        text = sql[start:end].rstrip()
        if kind == duckdb.token_type.string_const:
            if not (text.startswith("'") and text.endswith("'")):
                continue
            literal: Any = text[1:-1].replace("''", "'")
        else:
            try:
                literal = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                continue
        for name, value in values.items():
            if isinstance(value, bool) or not _same(literal, value, kind == duckdb.token_type.string_const):
                continue
            begin, placeholder = start, f"${name}"
            if i > 0 and tokens[i - 1][1] in (duckdb.token_type.keyword, duckdb.token_type.identifier):
                before = sql[tokens[i - 1][0] : start].strip().upper()
                if before in _TYPED:
                    begin, placeholder = tokens[i - 1][0], f"CAST(${name} AS {before})"
            edits.append((begin, start + len(text), placeholder))
            found.append(name)
            break
    for begin, end, text in sorted(edits, reverse=True):
        sql = sql[:begin] + text + sql[end:]
    return sql, found


def code_placeholders(code: str, values: dict[str, Any]) -> tuple[str, list[str]]:
    """``code`` with each string or number literal equal to a value replaced by ``PARAMS["name"]``."""
    found: list[str] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return code, found
    lines = code.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    edits = []
    for tok in tokens:
        if tok.type in (tokenize.STRING, tokenize.NUMBER):
            try:
                literal = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):
                continue
            for name, value in values.items():
                if not isinstance(value, bool) and _same(literal, value, isinstance(literal, str)):
                    start = offsets[tok.start[0] - 1] + tok.start[1]
                    end = offsets[tok.end[0] - 1] + tok.end[1]
                    edits.append((start, end, f'PARAMS["{name}"]'))
                    found.append(name)
                    break
    for start, end, text in sorted(edits, reverse=True):
        code = code[:start] + text + code[end:]
    return code, found


def _same(literal: Any, value: Any, is_text: bool) -> bool:
    if is_text:
        return isinstance(value, str) and literal == value
    return isinstance(value, int | float) and not isinstance(literal, str) and literal == value
