"""The command-line reference in ``docs/commands.md``, generated from the CLI's own parser (``ba_mcp.cli.build_parser``)
so it cannot drift: ``uv run python -m tests.cli_reference`` rewrites the part between the markers, and
``tests/test_docs.py`` fails when the file differs from what the parser says."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ba_mcp.cli import build_parser

DOC = Path(__file__).resolve().parent.parent / "docs" / "commands.md"
BEGIN = "<!-- generated from the parser: uv run python -m tests.cli_reference -->"
END = "<!-- end of the generated reference -->"
COMMON = {"--config", "--workspace", "--read-root", "-h"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _flag(action: argparse.Action) -> str:
    if not action.option_strings:
        name = action.metavar or action.dest
        if action.choices:
            name = " \\| ".join(str(c) for c in action.choices)
        return f"`{name}`" + (" (optional)" if action.nargs in ("?", "*") else "")
    flag = ", ".join(action.option_strings)
    if action.nargs != 0:
        flag += " " + (action.metavar or action.dest.upper())
    return f"`{_cell(flag)}`"


def _what(action: argparse.Action) -> str:
    parts = [action.help or ""]
    if action.option_strings and action.choices:
        parts.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
    shown = action.nargs != 0 and action.option_strings and "default" not in (action.help or "")
    if shown and action.default not in (None, argparse.SUPPRESS):
        parts.append(f"default `{action.default}`")
    if isinstance(action, argparse._AppendAction) or action.nargs == "*":
        parts.append("repeatable")
    return _cell("; ".join(p for p in parts if p))


def reference() -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in sub._choices_actions}
    lines = [BEGIN, ""]
    for name, command in sub.choices.items():
        usage = " ".join(command.format_usage().split()).removeprefix("usage: ")
        lines += [f"### `ba-mcp {name}`", "", helps.get(name) or command.description or "", "", f"`{usage}`", ""]
        rows = [a for a in command._actions if not (set(a.option_strings) & COMMON)]
        if rows:
            lines += ["| argument | what |", "|---|---|"]
            lines += [f"| {_flag(a)} | {_what(a)} |" for a in rows]
            lines.append("")
    lines.append(END)
    return "\n".join(lines)


def rendered(text: str) -> str:
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return head + reference() + tail


if __name__ == "__main__":
    DOC.write_text(rendered(DOC.read_text()))
    sys.stdout.write(f"{DOC} written\n")
