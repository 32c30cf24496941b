"""A database's catalog as text a model reads, and the search over it (query_database's ``search``,
``db://{database}/search/{words}``).

Any engine's catalog (``Database.describe``: tables with kind, rows, comment, columns, keys; PostgreSQL's also
``children`` folded into a parent, ``alias_of`` for a view that only renames one relation) is searched by words, each
matched in the relation's name, its comment, its columns' names and comments — as a substring, so ``purchase order``
finds ``purchaseorderheader`` and ``vendor`` its column ``vendorid``. Relations are ranked by how many of the words
they hold, then by where (a name counts more than a column, a column more than a comment); an alias view is shown
under the relation it aliases, never as a second answer. The answer is the best relations with their columns, keys
and notes — what a model needs to write its first query — and the names of the other matches.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ba_mcp.databases.base import TableInfo, Tables

SHOWN = 6  # relations shown with their columns, at most
SHOWN_CHARS = 6_000  # … and within about this many characters (one window of a standard observation)
NAMED = 20  # further matches named
DEFINITION_CHARS = 400  # a view's definition in a search's answer (whole in db://{database}/schema/{table})

_STOP = frozenset(
    {
        *("a", "an", "and", "all", "any", "by", "each", "for", "from", "in", "into", "of", "on", "or", "per"),
        *("the", "to", "with", "what", "which", "who", "how", "much", "many"),
    }
)
_WEIGHTS = {"name": 4.0, "column": 2.0, "comment": 1.5, "column comment": 1.0}


def words_of(text: str) -> list[str]:
    """The search's words: lower case, without stop words, a plural's ``s`` taken off (``orders`` → ``order``,
    ``categories`` → ``categor``, which ``category`` holds)."""
    out: list[str] = []
    for word in re.findall(r"[0-9a-z]+", text.lower()):
        if word in _STOP:
            continue
        if word.endswith("ies") and len(word) > 4:
            word = word[:-3]
        elif word.endswith("s") and not word.endswith("ss") and len(word) > 3:
            word = word[:-1]
        if word not in out:
            out.append(word)
    return out


def _squash(text: str) -> str:
    return re.sub(r"[^0-9a-z]", "", text.lower())


def matches(name: str, entry: TableInfo, words: list[str]) -> tuple[int, float, list[str]]:
    """(how many of ``words`` the relation holds, its score, where each was found)."""
    fields = [("name", _squash(name))]
    fields.append(("comment", str(entry.get("comment") or "").lower()))
    for col in entry.get("columns") or []:
        fields.append(("column", _squash(str(col["name"]))))
        if col.get("comment"):
            fields.append(("column comment", str(col["comment"]).lower()))
    found, score, why = 0, 0.0, []
    for word in words:
        best = max(((_WEIGHTS[kind], kind) for kind, text in fields if word in text), default=None)
        if best is None:
            continue
        found += 1
        score += best[0]
        why.append(f"{word} ({best[1]})")
    return found, score, why


def search(tables: Tables, text: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The words searched and the matching relations, best first, each with where its words were found; alias views
    whose relation matches are left out (their relation lists them)."""
    words = words_of(text)
    if not words:
        return words, []
    scored = []
    for name, entry in tables.items():
        found, score, why = matches(name, entry, words)
        if found:
            alias = 1 if entry.get("alias_of") else 0
            scored.append(((-found, alias, -score, -int(entry.get("rows") or 0), name), name, why))
    scored.sort()
    hit = {name for _, name, _ in scored}
    return words, [(name, why) for _, name, why in scored if tables[name].get("alias_of") not in hit]


def aliases(tables: Tables) -> dict[str, list[str]]:
    """Each relation's alias views."""
    out: dict[str, list[str]] = {}
    for name, entry in tables.items():
        if entry.get("alias_of"):
            out.setdefault(str(entry["alias_of"]), []).append(name)
    return out


def search_markdown(database: str, heading: str, tables: Tables, text: str) -> str:
    """The search's answer as the model reads it: the best relations whole, the others named."""
    words, found = search(tables, text)
    if not words:
        return f"{heading}\n\nNo words to search for in {text[:100]!r}: name what you look for (purchase order vendor)."
    if not found:
        return (
            f"{heading}\n\nNo table, view or column of {database} ({len(tables):,} relations) has "
            f"{' or '.join(words)} in its name or comment; try other words (a synonym, the singular)."
        )
    alias_views = aliases(tables)
    lines = [
        heading,
        "",
        f"{len(found):,} of {len(tables):,} relations match {' '.join(words)} (best first; a name counts more than "
        "a column, a column more than a comment):",
        "",
    ]
    shown, used = 0, 0
    for name, why in found[:SHOWN]:
        block = table_lines(name, tables[name], alias_views.get(name), DEFINITION_CHARS)
        block.insert(1, f"Matched: {', '.join(why)}")
        size = sum(len(line) + 1 for line in block)
        if shown and used + size > SHOWN_CHARS:
            break
        lines += block
        shown, used = shown + 1, used + size
    rest = found[shown : shown + NAMED]
    if rest:
        lines.append("Also matching: " + ", ".join(f"{name} ({size_of(tables[name])})" for name, _ in rest))
        if len(found) > shown + NAMED:
            lines.append(f"… and {len(found) - shown - NAMED:,} more; add a word to narrow.")
    lines.append(f"Any one whole (a view's definition uncut): db://{database}/schema/{{table}}.")
    return "\n".join(lines).rstrip() + "\n"


def size_of(entry: TableInfo) -> str:
    """A relation's kind and size in a line (a view's rows are never counted: nothing is scanned)."""
    if entry.get("alias_of"):
        return f"view, alias of {entry['alias_of']}"
    kids = entry.get("children") or []
    folded = f", {len(kids)} {'partitions' if entry.get('partitioned') else 'children'} folded in" if kids else ""
    if (entry["kind"] == "view" and entry.get("rows_estimated")) or entry.get("rows") is None:
        return entry["kind"] + folded
    about = "≈" if entry.get("rows_estimated") else ""
    return f"{entry['kind']}, {about}{entry['rows']:,} rows{folded}"


def table_lines(
    table: str, entry: TableInfo, alias_views: list[str] | None = None, definition_chars: int | None = None
) -> list[str]:
    """A relation with its columns, keys, what is folded into it and its definition (cut at ``definition_chars``),
    as markdown lines."""
    lines = [f"## {table} ({size_of(entry)})"]
    if entry.get("comment"):
        lines.append(str(entry["comment"]))
    if entry.get("alias_of"):
        lines.append(f"An alias view: the rows of {entry['alias_of']} under these column names.")
    if entry.get("note"):
        lines.append(str(entry["note"]))
    if entry.get("partitioned"):
        lines.append(f"Partitioned: {entry['partitioned']}")
    for c in entry["columns"]:
        line = f"- {c['name']}: {c['type']}{'' if c['nullable'] else ' not null'}"
        if c.get("comment"):
            line += f" — {c['comment']}"
        if values := c.get("values"):
            line += " — values: " + ", ".join(values)
        lines.append(line)
    if entry.get("primary_key"):
        lines.append(f"Primary key: {', '.join(entry['primary_key'])}")
    for fk in entry.get("foreign_keys") or []:
        lines.append(
            f"Foreign key: {', '.join(fk['columns'])} → {fk['references']}({', '.join(fk['referenced_columns'])})"
        )
    if alias_views:
        lines.append(f"Alias views of it: {', '.join(alias_views)}")
    definition = str(entry.get("definition") or "").strip()
    if definition and not entry.get("alias_of"):
        if definition_chars is not None and len(definition) > definition_chars:
            definition = definition[:definition_chars].rstrip() + " …"
        lines += ["Definition:", "```sql", definition, "```"]
    lines.append("")
    return lines
