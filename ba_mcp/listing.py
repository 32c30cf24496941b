"""The tools as the model reads them: every tool's definition as ``tools/list`` carries it, within the budget.

``definitions(tools, structured)`` writes each tool's wire definition (name, title, description, input schema,
annotations; the output schema when structuredContent is sent) from the tool's class — whichever room registered
it: built-in, an embedder's, a plug-in's. ``fit(...)`` holds the listing within ``tools_list_budget_tokens``
(cl100k tokens of the JSON the wire carries) by a fixed rule, so that adding a tool cannot break it:

1. **What every tool would repeat is said once.** The output levels are explained in the server's instructions;
   ``output_level`` is listed only on tools whose results vary in size with the question (``Tool.offers_levels``;
   every tool accepts it); ``additionalProperties: false`` and the limits a model never nears are not listed (the
   server refuses an unknown argument or a value out of range itself: the tool's ``Params``).
2. **A plug-in's tool pays for itself first** (``capped``): its description and its parameters' are held to
   ``PLUGIN_DESCRIPTION_TOKENS`` and ``PLUGIN_PARAMETER_TOKENS`` before the listing is fitted.
3. **What gives way, in this order, until the listing fits:** (a) the skill catalog in ``use_skill``'s description
   — fewer ``name: when`` lines, then names only, then a pointer (``use_skill()`` lists every skill with its
   description): no skill is ever out of reach; (b) descriptions cut to their first sentence, the last-listed tool
   first (a tool added pays for itself before the tools before it) — and a description that is one long sentence
   cut to the words that fit (at least ``MIN_WORDS``, ending in "…"), before the tool listed before it gives any;
   (c) the descriptions of optional parameters,
   in the same order. A tool, a parameter, a required field, a name or a title never gives way; a listing still
   over after (c) is served and logged as a warning.

Nothing here knows MCP's types: the server turns the fitted definitions into its ``tools/list`` result.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from ba_mcp.tool import Tool
from ba_mcp.tools.use_skill import UseSkill

log = logging.getLogger(__name__)

Definition = dict[str, Any]  # a tool as the wire carries it (camelCase keys, no nulls)

# structuredContent when the operator asks for it (observation.structured_content): an object that always holds the
# observation's ``text`` (a string: ``Observation.text``), its metadata beside it — the least a schema says of it,
# since every tool repeats it
OUTPUT_SCHEMA = {"type": "object", "required": ["text"]}


def definition(tool: Tool, structured: bool = False) -> Definition:
    """``tool`` as tools/list carries it. Destructive and idempotent hints mean something only for tools that write
    (MCP spec): a read-only tool says only that it reads."""
    policy = tool.policy
    annotations = {
        "readOnlyHint": policy.read_only,
        "destructiveHint": None if policy.read_only else False,
        "idempotentHint": None if policy.read_only or not policy.idempotent else True,  # false: the default
        "openWorldHint": policy.open_world,
    }
    schema = compact_schema(tool.Params.model_json_schema())
    schema.pop("additionalProperties", None)  # unknown arguments are refused by the server (ToolParams)
    if not tool.offers_levels:
        schema.get("properties", {}).pop("output_level", None)
    schema = {"type": schema.pop("type", "object"), **schema}  # as the wire orders it (what is counted is what is sent)
    out: Definition = {"name": tool.name, "title": tool.title, "description": tool.description, "inputSchema": schema}
    if structured:
        out["outputSchema"] = OUTPUT_SCHEMA
    out["annotations"] = {k: v for k, v in annotations.items() if v is not None}
    return out


def definitions(tools: Sequence[Tool], structured: bool = False) -> list[Definition]:
    return [definition(t, structured) for t in tools]


def cost(listing: Sequence[Definition], count: Callable[[str], int]) -> int:
    """cl100k tokens of the listing as the wire carries it (``count``: ``TokenCounter.raw_tokens``)."""
    return count(json.dumps(list(listing), ensure_ascii=False))


def fit(
    listing: Sequence[Definition],
    budget: int,
    count: Callable[[str], int],
    use_skill: UseSkill | None = None,
) -> list[Definition]:
    """The listing within ``budget`` tokens by the module's rule (a new list; ``listing`` is left as it is)."""
    tools = copy.deepcopy(list(listing))
    over = cost(tools, count) - budget
    if over <= 0:
        return tools
    skills = next((t for t in tools if use_skill is not None and t["name"] == use_skill.name), None)
    if skills is not None and use_skill is not None:  # (a) the skill catalog
        room = use_skill.catalog_budget
        while over > 0 and room > 0:  # the catalog's own estimate is cautious: a few rounds at most
            room = max(0, room - over)
            skills["description"] = use_skill.describe(room)
            over = cost(tools, count) - budget
        if over > 0:
            skills["description"] = use_skill.describe(None)
            over = cost(tools, count) - budget
    for tool in reversed(tools):  # (b) descriptions to their first sentence, the last-listed tool first
        if over <= 0:
            break
        if tool is skills:
            continue  # its description is the catalog's pointer by now: its first sentence says how to use it
        short = first_sentence(tool.get("description") or "")
        if short != tool.get("description"):
            tool["description"] = short
            over = cost(tools, count) - budget
        if over > 0:  # one long sentence: the tool gives the words still needed before the tool listed before it
            over = _cut_words(tools, tool, budget, count)
    for tool in reversed(tools):  # (c) optional parameters' descriptions
        if over <= 0:
            break
        schema = tool["inputSchema"]
        required = set(schema.get("required") or ())
        for name, prop in (schema.get("properties") or {}).items():
            if name not in required and isinstance(prop, dict) and "description" in prop:
                del prop["description"]
        over = cost(tools, count) - budget
    if over > 0:
        log.warning("tools/list is %d cl100k tokens over tools_list_budget_tokens after every rule gave way", over)
    return tools


# A plug-in's tool pays for itself first: before the listing is fitted (and any built-in gives a word), its
# description is held to this many cl100k tokens and each of its parameters' descriptions to PLUGIN_PARAMETER_TOKENS.
PLUGIN_DESCRIPTION_TOKENS = 120
PLUGIN_PARAMETER_TOKENS = 30


def capped(tool: Definition, count: Callable[[str], int]) -> Definition:
    """A plug-in tool's definition with its description and its parameters' held to the plug-in limits (cut at a
    word, ending in "…"); a new definition, ``tool`` left as it is."""
    out = copy.deepcopy(tool)
    out["description"] = _held(out.get("description") or "", PLUGIN_DESCRIPTION_TOKENS, count)
    for prop in (out["inputSchema"].get("properties") or {}).values():
        if isinstance(prop, dict) and isinstance(prop.get("description"), str):
            prop["description"] = _held(prop["description"], PLUGIN_PARAMETER_TOKENS, count)
    return out


def _held(text: str, tokens: int, count: Callable[[str], int]) -> str:
    """``text`` if it is within ``tokens``, else its most words that are (with " …")."""
    if count(text) <= tokens:
        return text
    words = text.split()
    low, high = 0, len(words) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if count(" ".join(words[:middle]) + " …") <= tokens:
            low = middle
        else:
            high = middle - 1
    return " ".join(words[:low]) + " …"


MIN_WORDS = 12  # a description cut for the budget keeps at least its first words (and says it was cut: …)


def _cut_words(tools: list[Definition], tool: Definition, budget: int, count: Callable[[str], int]) -> int:
    """``tool``'s description cut to the most words that bring the listing within ``budget`` (never fewer than
    MIN_WORDS), ending in "…"; what the listing is still over by."""
    words = (tool.get("description") or "").split()
    if len(words) <= MIN_WORDS:
        return cost(tools, count) - budget

    def over_with(n: int) -> int:
        tool["description"] = " ".join(words[:n]) + " …"
        return cost(tools, count) - budget

    low, high = MIN_WORDS, len(words) - 1  # the most words that fit lies in [low, high], if any
    if over_with(low) > 0:
        return over_with(low)
    while low < high:
        middle = (low + high + 1) // 2
        if over_with(middle) <= 0:
            low = middle
        else:
            high = middle - 1
    return over_with(low)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'`])")


def first_sentence(text: str) -> str:
    """``text`` up to the end of its first sentence (a full stop, ! or ? followed by a space and a capital) or its
    first line, whichever comes first."""
    line = text.strip().split("\n", 1)[0]
    return _SENTENCE_END.split(line, 1)[0]


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter schema as the model needs it: no generated titles, ``X | None = None`` as plain ``X``
    (omitting it means None), no ``"default": null``, no ``"type"`` beside an ``enum`` of strings, and no limits a
    model never nears (a text's ``minLength: 1`` and ``maxLength`` of 1,000 or more, a ``maximum`` of a million
    or more, an integer's ``minimum`` of 0 or 1, ``exclusiveMinimum: 0``, ``minItems: 1``) — the server's
    validation still enforces every one of them (``Runner``: the Params model)."""

    def simplify(node: Any) -> Any:
        if isinstance(node, list):
            return [simplify(n) for n in node]
        if not isinstance(node, dict):
            return node
        node = {k: simplify(v) for k, v in node.items() if k != "title"}
        options = node.get("anyOf")
        if isinstance(options, list) and {"type": "null"} in options:
            rest = [o for o in options if o != {"type": "null"}]
            node.pop("anyOf")
            if len(rest) == 1:
                node = {**rest[0], **node}
            else:
                node["anyOf"] = rest
            if node.get("default", 0) is None:
                node.pop("default")
        if node.get("type") == "string" and all(isinstance(v, str) for v in node.get("enum") or [0]):
            node.pop("type")
        if node.get("minLength") == 1:
            node.pop("minLength")
        if node.get("maxLength", 0) >= 1000:
            node.pop("maxLength")
        if node.get("maximum", 0) >= 1_000_000:
            node.pop("maximum")
        if node.get("minimum") in (0, 1) and node.get("type") == "integer":
            node.pop("minimum")  # a count, an index: no model sends a negative one
        if node.get("exclusiveMinimum") == 0:
            node.pop("exclusiveMinimum")  # a duration: more than zero goes without saying
        if node.get("minItems") == 1:
            node.pop("minItems")
        if "default" in node and node["default"] in ("", False, 0, []) and node["default"] is not None:
            node.pop("default")  # a text's, a flag's, a count's zero: what a model assumes unsaid
        if node.get("type") == "object" and node.get("additionalProperties") is True:
            node.pop("additionalProperties")  # what JSON Schema assumes
        return node

    out: dict[str, Any] = simplify(schema)
    return out
