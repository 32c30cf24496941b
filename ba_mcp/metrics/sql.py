"""Expressions of metric files and predicates of queries, parsed with sqlglot.

A predicate a model sends (``where``) is parsed alone — one expression, no ``;``, no comment — and checked by
its parse tree: no subquery, no table, no window, no aggregate, no function outside ``ALLOWED``; each column
must then be a declared field (``compile.py``). Nothing of it is pasted into SQL as text: the compiled
statement is generated from the checked tree.
"""

from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

MAX_EXPRESSION_CHARS = 4000
MAX_DEPTH = 60

# functions a predicate may call (pure, no side effect, no access to anything but its arguments)
_ALLOWED_NAMES = (
    "Lower",
    "Upper",
    "Trim",
    "Length",
    "Coalesce",
    "Nullif",
    "Abs",
    "Round",
    "Floor",
    "Ceil",
    "Cast",
    "TryCast",
    "Substring",
    "Concat",
    "DateTrunc",
    "TimestampTrunc",
    "DateAdd",
    "DateSub",
    "Extract",
    "Year",
    "Quarter",
    "Month",
    "Week",
    "Day",
    "DayOfWeek",
    "CurrentDate",
    "CurrentTimestamp",
    "Case",
    "If",
    "StartsWith",
    "Date",
    "TsOrDsToDate",
    "StrToDate",
    "Greatest",
    "Least",
)
ALLOWED: tuple[type[exp.Expr], ...] = tuple(getattr(exp, n) for n in _ALLOWED_NAMES if hasattr(exp, n))


# operators sqlglot models as functions (AND, OR, =, LIKE, IN, BETWEEN, IS, NOT, -x …): not calls of anything
_OPERATORS: tuple[type[exp.Expr], ...] = (exp.Connector, exp.Binary, exp.Predicate, exp.Unary, exp.Paren)


def parse_expression(text: str, dialect: str) -> exp.Expr:
    """One SQL expression (``ValueError`` with the parser's reason otherwise). Cached: treat as read-only."""
    return _parsed(text, dialect).copy()


@functools.lru_cache(maxsize=4096)
def _parsed(text: str, dialect: str) -> exp.Expr:
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"an expression of {len(text):,} characters (at most {MAX_EXPRESSION_CHARS:,})")
    try:
        tokens = sqlglot.Dialect.get_or_raise(dialect or None).tokenize(text)
    except (TokenError, ValueError) as exc:
        raise ValueError(f"does not parse: {_short(exc)}") from None
    if any(t.token_type == TokenType.SEMICOLON for t in tokens):
        raise ValueError("';' is not allowed: one expression, not statements")
    if any(t.comments for t in tokens):
        raise ValueError("comments are not allowed in an expression")
    try:
        trees = sqlglot.parse(text, read=dialect or None)
    except (ParseError, TokenError, RecursionError) as exc:
        raise ValueError(f"does not parse in the {dialect or 'ANSI'} dialect: {_short(exc)}") from None
    if len(trees) != 1 or trees[0] is None:
        raise ValueError("one expression, not statements")
    tree = trees[0]
    if isinstance(tree, (exp.Query, exp.DDL, exp.DML, exp.Command)) or tree.find(exp.Command) is not None:
        raise ValueError(f"{text[:60]!r} is a statement, not an expression")
    if _depth(tree) > MAX_DEPTH:
        raise ValueError(f"the expression nests deeper than {MAX_DEPTH} levels")
    return tree


def _depth(node: exp.Expr) -> int:
    deepest, stack = 0, [(node, 1)]
    while stack:
        current, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in current.iter_expressions())
    return deepest


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


def check_predicate(tree: exp.Expr) -> None:
    """Refuse what a predicate may not hold (``ValueError`` naming it)."""
    for node in tree.walk():
        if isinstance(node, (exp.Query, exp.Subquery, exp.Exists, exp.Table, exp.From, exp.Join)):
            raise ValueError("a subquery or another table is not allowed; filter on declared fields")
        if isinstance(node, exp.Window):
            raise ValueError("a window function is not allowed in where")
        if isinstance(node, exp.AggFunc):
            raise ValueError(
                f"the aggregate {node.sql()[:60]} is not allowed in where (where filters rows before they "
                "are aggregated); ask for the metric and filter its result instead"
            )
        if isinstance(node, (exp.Placeholder, exp.Parameter, exp.SessionParameter, exp.Star)):
            raise ValueError(f"{node.sql()[:40]!r} is not allowed in where")
        if isinstance(node, exp.Func) and not isinstance(node, (*ALLOWED, *_OPERATORS)):
            name = node.sql_name() if not isinstance(node, exp.Anonymous) else str(node.this)
            raise ValueError(
                f"the function {name.upper()} is not allowed in where "
                f"(allowed: {', '.join(n.upper() for n in _ALLOWED_NAMES[:20])}, …)"
            )
        if isinstance(node, exp.Column) and len(node.parts) > 2:
            raise ValueError(f"{node.sql()[:60]} names more than dataset.field")
