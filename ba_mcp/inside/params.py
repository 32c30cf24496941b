"""In the engine worker: the literal values an analysis turns into parameters, found in a step's SQL (by DuckDB's
tokenizer), a metrics step's ``where`` filters or Python (by ``tokenize``/``ast``) and replaced — SQL by a bound
``$name``, a filter by ``${name}`` (MetricFlow's filters take no bind parameters: the run writes the validated,
typed value there as a literal), Python by ``PARAMS["name"]`` — so a saved analysis binds its parameters and
never pastes them into SQL text.

Only the occurrences that *are* the parameter are replaced. A text is (an equal text anywhere is the same
value); so is a number that occurs once in the step. A number that occurs several times is the parameter only
where it is a value the query compares or counts with: beside a comparison, in an IN list or a BETWEEN, after
LIMIT or OFFSET, or in THEN/ELSE; in Python, an operand of a comparison or the whole value of an assignment. A
parameter ``4`` never replaces the ``4`` of ``round(x, 4)`` beside ``WHERE n > 4``.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from typing import Any

_TYPED = ("DATE", "TIMESTAMP", "TIME", "INTERVAL")
_COMPARES = {"=", "==", "<", ">", "<=", ">=", "<>", "!=", "LIMIT", "OFFSET", "BETWEEN", "THEN", "ELSE", "WHEN"}
_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)


def sql_placeholders(sql: str, values: dict[str, Any]) -> tuple[str, list[str]]:
    """``sql`` with each literal that is a value's occurrence replaced by ``$name`` (a typed literal such as
    DATE '…' by CAST($name AS DATE)), and the names found."""
    edits, found = _literals(sql, values, typed_cast=True)
    for begin, end, text in sorted(edits, reverse=True):
        sql = sql[:begin] + text + sql[end:]
    return sql, found


def filter_placeholders(text: str, values: dict[str, Any]) -> tuple[str, list[str]]:
    """A metrics ``where`` (SQL over declared fields, or MetricFlow's filter with ``{{ Dimension(…) }}``) with each
    literal that is a value's occurrence replaced by ``${name}``; what is inside ``{{ … }}`` is never a value."""
    masked = _JINJA.sub(lambda m: " " * len(m.group(0)), text)
    edits, found = _literals(masked, values, typed_cast=False)
    for begin, end, placeholder in sorted(edits, reverse=True):
        text = text[:begin] + "${" + placeholder.lstrip("$") + "}" + text[end:]
    return text, found


def _literals(sql: str, values: dict[str, Any], typed_cast: bool) -> tuple[list[tuple[int, int, str]], list[str]]:
    import duckdb

    tokens = duckdb.tokenize(sql)
    edits: list[tuple[int, int, str]] = []
    found: list[str] = []

    def text_of(i: int) -> str:
        end = tokens[i + 1][0] if i + 1 < len(tokens) else len(sql)
        return sql[tokens[i][0] : end].strip()

    numbers = [text_of(i) for i, (_, kind) in enumerate(tokens) if kind == duckdb.token_type.numeric_const]
    for i, (start, kind) in enumerate(tokens):
        if kind not in (duckdb.token_type.string_const, duckdb.token_type.numeric_const):
            continue
        text = text_of(i)
        is_text = kind == duckdb.token_type.string_const
        if is_text:
            if not (text.startswith("'") and text.endswith("'")):
                continue
            literal: Any = text[1:-1].replace("''", "'")
        else:
            try:
                literal = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                continue
            if not _once(numbers, literal) and not _compared(tokens, i, text_of):
                continue
        for name, value in values.items():
            if isinstance(value, bool) or not _same(literal, value, is_text):
                continue
            begin, placeholder = start, f"${name}"
            if typed_cast and i > 0 and tokens[i - 1][1] in (duckdb.token_type.keyword, duckdb.token_type.identifier):
                before = text_of(i - 1).upper()
                if before in _TYPED:
                    begin, placeholder = tokens[i - 1][0], f"CAST(${name} AS {before})"
            edits.append((begin, start + len(text), placeholder))
            found.append(name)
            break
    return edits, found


def _compared(tokens: list[Any], i: int, text_of: Any) -> bool:
    """Whether the number at token ``i`` is a value the statement compares or counts with (not a function's
    argument, a precision, a position or a term of arithmetic)."""
    before = text_of(i - 1).upper() if i > 0 else ""
    after = text_of(i + 1).upper() if i + 1 < len(tokens) else ""
    if before in _COMPARES or after in _COMPARES - {"LIMIT", "OFFSET", "THEN", "ELSE", "WHEN", "BETWEEN"}:
        return True
    if before == "AND" and i >= 3 and text_of(i - 3).upper() == "BETWEEN":  # x BETWEEN 1 AND <this>
        return True
    if before in ("(", ","):  # inside parentheses: an IN list is a comparison, a function's arguments are not
        depth = 0
        for j in range(i - 1, -1, -1):
            t = text_of(j)
            if t == ")":
                depth += 1
            elif t == "(":
                if depth == 0:
                    return j > 0 and text_of(j - 1).upper() == "IN"
                depth -= 1
    return False


def code_placeholders(code: str, values: dict[str, Any]) -> tuple[str, list[str]]:
    """``code`` with each literal that is a value's occurrence replaced by ``PARAMS["name"]``: any equal text, and
    an equal number that is an operand of a comparison or the whole value of an assignment."""
    found: list[str] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
        tree = ast.parse(code)
    except (tokenize.TokenError, SyntaxError, IndentationError, ValueError):
        return code, found
    numbers: set[tuple[int, int]] = set()  # (line, column) of the numbers that are values
    for node in ast.walk(tree):
        operands: list[Any] = []
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            operands = [node.value]
        for operand in operands:
            if isinstance(operand, ast.Constant) and isinstance(operand.value, int | float):
                numbers.add((operand.lineno, operand.col_offset))
    lines = code.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    edits = []
    every = [t.string for t in tokens if t.type == tokenize.NUMBER]
    for tok in tokens:
        if tok.type in (tokenize.STRING, tokenize.NUMBER):
            if tok.type == tokenize.NUMBER and tok.start not in numbers and not _once(every, tok.string):
                continue
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


def _once(numbers: list[str], literal: Any) -> bool:
    """Whether the number occurs once among the step's numbers (then it is the parameter wherever it is)."""
    equal = 0
    for text in numbers:
        try:
            equal += ast.literal_eval(text) == (literal if not isinstance(literal, str) else ast.literal_eval(literal))
        except (ValueError, SyntaxError):
            continue
    return equal == 1


def _same(literal: Any, value: Any, is_text: bool) -> bool:
    if is_text:
        return isinstance(value, str) and literal == value
    return isinstance(value, int | float) and not isinstance(literal, str) and literal == value


_CLAUSE_ENDS = {"GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "FETCH", "WINDOW", "QUALIFY", ";"}
_SET_OPERATIONS = {"UNION", "INTERSECT", "EXCEPT"}


def sql_cut(sql: str) -> dict[str, Any]:
    """Whether the statement's result is cut: the LIMIT (or FETCH FIRST) and OFFSET of the outermost query — a
    number, or the placeholder that gives it (``$1``, ``$name``, the Nth ``?`` as ``?N``) — and whether it is
    ordered (a top N, not any N); ``where``: the outermost query's filter (its WHERE, and HAVING, as written, the
    Nth ``?`` as ``?N``), which keeps part of the rows (none for a UNION's branches: no one filter is the result's).
    ``{}`` when nothing cuts it. What a report's key figure of it covers."""
    import duckdb

    tokens = duckdb.tokenize(sql)

    def text_of(i: int) -> str:
        end = tokens[i + 1][0] if i + 1 < len(tokens) else len(sql)
        return sql[tokens[i][0] : end].strip()

    words = [text_of(i) for i in range(len(tokens))]
    depth, questions = 0, 0
    cut: dict[str, Any] = {}

    def value_at(i: int) -> Any:
        if i >= len(words):
            return None
        if tokens[i][1] == duckdb.token_type.numeric_const and words[i].isdigit():
            return int(words[i])
        if words[i] == "$" and i + 1 < len(words):
            return "$" + words[i + 1]
        if words[i] == "?":
            return f"?{questions + 1}"
        return None

    for i, word in enumerate(words):
        upper = word.upper()
        if word == "(":
            depth += 1
        elif word == ")":
            depth -= 1
        elif depth == 0 and upper == "ORDER" and i + 1 < len(words) and words[i + 1].upper() == "BY":
            cut["ordered"] = True
        elif depth == 0 and upper == "LIMIT":
            cut["limit"] = value_at(i + 1)
        elif depth == 0 and upper == "FETCH" and i + 2 < len(words) and words[i + 1].upper() in ("FIRST", "NEXT"):
            cut["limit"] = value_at(i + 2)
        elif depth == 0 and upper == "OFFSET":
            cut["offset"] = value_at(i + 1)
        if word == "?":
            questions += 1
    where = _filters(sql, words, tokens)
    if where:
        cut["where"] = where
    if cut.get("limit") is None:
        cut.pop("limit", None)
        cut.pop("offset", None)
        cut.pop("ordered", None)
    return cut if cut.get("limit") is not None or cut.get("where") else {}


def _filters(sql: str, words: list[str], tokens: list[Any]) -> str:
    """The outermost query's WHERE and HAVING conditions as written, on one line (``sql_cut``); ``""`` without any,
    or in a UNION, INTERSECT or EXCEPT."""
    import duckdb

    depth, clause, start = 0, "", 0
    found: dict[str, str] = {}
    for i, word in enumerate([*words, ";"]):
        upper = word.upper()
        keyword = i < len(tokens) and tokens[i][1] == duckdb.token_type.keyword
        ends = depth == 0 and (i == len(words) or word == ";" or (keyword and upper in _CLAUSE_ENDS | {"WHERE"}))
        if clause and ends:
            found[clause] = _condition(sql, tokens, start, i)
            clause = ""
        if depth == 0 and keyword and upper in _SET_OPERATIONS:
            return ""
        if depth == 0 and keyword and upper in ("WHERE", "HAVING"):
            clause, start = upper, i + 1
        depth += (word == "(") - (word == ")")
        if i >= len(words) or word == ";":
            break
    where, having = found.get("WHERE", ""), found.get("HAVING", "")
    return "; ".join(p for p in (where, f"having {having}" if having else "") if p)


def _condition(sql: str, tokens: list[Any], start: int, end: int) -> str:
    """Tokens ``start`` to ``end`` of ``sql`` as written on one line, the Nth ``?`` of the statement as ``?N``."""
    if start >= end:
        return ""
    questions = sum(1 for t in tokens[:start] if sql[t[0]] == "?")
    pieces = []
    for k in range(start, end):
        stop = tokens[k + 1][0] if k + 1 < len(tokens) else len(sql)
        piece = sql[tokens[k][0] : stop]
        if piece.strip() == "?":
            questions += 1
            piece = piece.replace("?", f"?{questions}", 1)
        pieces.append(piece)
    text = re.sub(r"--[^\n]*|/\*.*?\*/", " ", "".join(pieces), flags=re.S)
    return " ".join(text.split())


_CUT_METHODS = {"head": False, "nlargest": True, "nsmallest": True}  # -> ordered (a top N)
_ORDERING = {"sort_values", "sort_index", "rank"}


def code_cut(code: str) -> dict[str, Any]:
    """Whether the value a Python step ends with (its last expression, the ``value`` output) is cut:
    ``….head(n)``, ``….nlargest(n, …)``, ``….nsmallest(n, …)`` or ``….iloc[:n]`` in its chain of calls — ``n`` a
    number or ``PARAMS["name"]`` (as ``$name``) — ordered when a sort comes before a head; ``where``: a filter in the
    chain that keeps part of the rows (``df[mask]``, ``.loc[mask]``, ``.query("…")``), as written. ``{}`` otherwise."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return {}
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return {}
    node: Any = tree.body[-1].value
    cut: dict[str, Any] = {}
    kept: list[str] = []  # the filters of the chain, outermost first
    for _ in range(64):  # a chain of calls, outermost first
        mask = _mask(node)
        if mask:
            kept.append(mask)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            if name in _CUT_METHODS and not cut:
                given = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "n"), None)
                limit = 5 if given is None and name == "head" else _count(given)
                if limit is None:
                    return {}
                cut = {"limit": limit, "ordered": _CUT_METHODS[name]}
            elif name in _ORDERING and cut:
                cut["ordered"] = True
            node = node.func.value
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "iloc":
            piece = node.slice
            if not cut and isinstance(piece, ast.Slice) and piece.step is None and _count(piece.lower) in (None, 0):
                limit = _count(piece.upper)
                if limit is not None:
                    cut = {"limit": limit, "ordered": False}
            node = node.value.value
        elif isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        else:
            break
    if kept:
        cut["where"] = " and ".join(reversed(kept))
    return cut


_MASK_NODES = (ast.Compare, ast.BoolOp, ast.UnaryOp)


def _mask(node: Any) -> str:
    """The condition a pandas filter keeps rows by, as written: ``df[<mask>]``, ``df.loc[<mask>]`` /
    ``df.loc[<mask>, cols]``, ``df.query("<expression>")``; ``""`` for any other node (a column pick, a slice)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "query":
        given = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "expr"), None)
        return given.value if isinstance(given, ast.Constant) and isinstance(given.value, str) else ""
    if not isinstance(node, ast.Subscript):
        return ""
    piece = node.slice
    if isinstance(node.value, ast.Attribute) and node.value.attr == "loc" and isinstance(piece, ast.Tuple):
        piece = piece.elts[0] if piece.elts else piece
    masked = isinstance(piece, _MASK_NODES) or (
        isinstance(piece, ast.BinOp) and isinstance(piece.op, ast.BitAnd | ast.BitOr)
    )
    if isinstance(piece, ast.UnaryOp) and not isinstance(piece.op, ast.Invert | ast.Not):
        masked = False  # -x: no mask
    return ast.unparse(piece) if masked else ""


def _count(node: Any) -> int | str | None:
    """A literal count, or ``$name`` for ``PARAMS["name"]``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return int(node.value)
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "PARAMS"
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ):
        return "$" + node.slice.value
    return None
