"""Skills over MCP: resources, prompts and the ``io.modelcontextprotocol/skills`` extension (SEP-2640).

* Resources: ``skill://<name>/SKILL.md`` is listed for every skill (``text/markdown``, with the skill's name
  and description); ``skill://<name>/<path>`` serves every file of the skill byte for byte (text as text,
  anything else as a blob with its MIME type), confined to the skill's folder (``read``).
* Prompts: one per skill a user may invoke (``user-invocable`` not false), named after it, with an
  optional ``task``; its messages embed the SKILL.md (and those of the skills it requires) as resources.
* The extension: ``skills/list`` (paginated) and ``skills/get``, each entry with the verbatim frontmatter
  and every file's sha256 digest and size, through the SDK's extension API.
"""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from mcp.server.extension import Extension, MethodBinding
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.mcpserver.prompts.base import Prompt, PromptArgument, UserMessage
from mcp.server.mcpserver.resources import FunctionResource
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, EmbeddedResource, PaginatedRequestParams, RequestParams, TextResourceContents

from ba_mcp.errors import ErrorType, ToolFailure
from ba_mcp.skills.loader import MAX_SKILL_BYTES, Skill, Skills, is_text, mime_type

if TYPE_CHECKING:
    from mcp.server import MCPServer

EXTENSION_ID = "io.modelcontextprotocol/skills"
PAGE_SIZE = 50
TTL_MS = 300_000


def register(server: MCPServer[Any], skills: Skills, use_skill_served: bool) -> None:
    """The skills' resources and prompts on ``server`` (the extension is passed to the server's
    constructor: ``SkillsExtension``)."""
    for skill in skills:  # made directly, as the prompts below: no signature to analyse
        server.add_resource(
            FunctionResource(
                uri=skill.uri(),
                name=skill.name,
                title=f"Skill: {skill.name}",
                description=skill.description,
                mime_type="text/markdown",
                fn=_reader(skill),
            )
        )
    if len(skills):

        @server.resource(
            "skill://{name}/{path}",
            name="skill-file",
            title="A file of a skill",
            description="Any file of a skill, e.g. skill://<name>/references/guide.md (skills/get lists them).",
        )
        async def skill_file(name: str, path: str) -> str | bytes:  # served by read(), which keeps the bytes
            contents = await read(skills, f"skill://{name}/{path}")
            return contents[0].content

    for skill in skills:
        if skill.user_invocable:  # made directly: the decorator's signature analysis costs ~1 ms a prompt at start-up
            server.add_prompt(
                Prompt(
                    name=skill.name,
                    title=f"Skill: {skill.name}",
                    description=skill.description,
                    arguments=[_TASK],
                    fn=_prompt(skills, skill, use_skill_served),
                )
            )


def _reader(skill: Skill) -> Any:
    async def read_skill_md() -> str:
        data = await anyio.to_thread.run_sync(skill.read, skill.skill_file)
        return data.decode("utf-8")

    return read_skill_md


_TASK = PromptArgument(name="task", description="what to analyse, in your words (optional)", required=False)


def _prompt(skills: Skills, skill: Skill, use_skill_served: bool) -> Any:
    def prompt(task: str | None = None) -> list[UserMessage]:
        chain = skills.chain(skill.name)  # a cycle or a missing skill: an error the user reads
        messages = [UserMessage(_embedded(s)) for s in chain]
        more = f"its supporting files are resources under skill://{skill.name}/" + (
            f' (or use_skill(name="{skill.name}", path=...))' if use_skill_served else ""
        )
        lead = f"Follow the skill '{skill.name}' above ({more})."
        if len(chain) > 1:
            lead += f" It builds on {', '.join(s.name for s in chain[1:])}, also above."
        lead += f"\n\nTask: {task}" if task and task.strip() else " Ask me what to analyse first."
        messages.append(UserMessage(lead))
        return messages

    return prompt


def _embedded(skill: Skill) -> EmbeddedResource:
    text = skill.read(skill.skill_file).decode("utf-8")
    return EmbeddedResource(
        type="resource", resource=TextResourceContents(uri=skill.uri(), mime_type="text/markdown", text=text)
    )


async def read(skills: Skills, uri: str) -> list[ReadResourceContents]:
    """``skill://<name>/<path>``: the file's bytes, as text when they are text. Unknown skills and files
    are ResourceNotFoundError; paths that leave the skill's folder are ResourceError."""
    rest = uri[len("skill://") :]
    name, _, encoded = rest.partition("/")
    path = urllib.parse.unquote(encoded)
    try:
        skill = skills.get(name)
        data = await anyio.to_thread.run_sync(skill.read, path or skill.skill_file)
    except ToolFailure as failure:
        if failure.type is ErrorType.NOT_FOUND:
            raise ResourceNotFoundError(failure.message) from None
        raise ResourceError(failure.message) from None
    mime = mime_type(path or skill.skill_file)
    if len(data) > MAX_SKILL_BYTES:
        raise ResourceError(f"{uri[:200]} is over 16 MiB")
    if is_text(mime, data):
        return [ReadResourceContents(content=data.decode("utf-8"), mime_type=mime)]
    return [ReadResourceContents(content=data, mime_type=mime)]


# -- the extension ----------------------------------------------------------------------------------


class GetSkillParams(RequestParams):
    uri: str


def entry(skill: Skill) -> dict[str, Any]:
    """A SEP-2640 Skill entry: the SKILL.md's URI, its frontmatter as written, every file with digest and size."""
    return {
        "uri": skill.uri(),
        "frontmatter": skill.frontmatter,
        "resources": [
            {"uri": skill.uri(f.path), "digest": f"sha256:{f.digest}", "size": f.size} for f in skill.manifest()
        ],
    }


class SkillsExtension(Extension):
    """``skills/list`` and ``skills/get``. Skills served under a name other than their frontmatter's
    (a lenient load) are left out: an entry's URI must end in its frontmatter name."""

    identifier = EXTENSION_ID

    def __init__(self, skills: Skills) -> None:
        self.skills = skills

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("skills/list", PaginatedRequestParams, self._list),
            MethodBinding("skills/get", GetSkillParams, self._get),
        ]

    def _published(self) -> list[Skill]:
        return [s for s in self.skills if s.publishable]

    async def _list(self, ctx: Any, params: PaginatedRequestParams) -> dict[str, Any]:
        published = self._published()
        start = 0
        if params.cursor:
            if not params.cursor.isdigit() or int(params.cursor) > len(published):
                raise MCPError(INVALID_PARAMS, "invalid cursor: pass the nextCursor of a skills/list result")
            start = int(params.cursor)
        page = published[start : start + PAGE_SIZE]
        entries = await anyio.to_thread.run_sync(lambda: [entry(s) for s in page])
        result: dict[str, Any] = {"resultType": "complete", "skills": entries, "ttlMs": TTL_MS, "cacheScope": "public"}
        if start + PAGE_SIZE < len(published):
            result["nextCursor"] = str(start + PAGE_SIZE)
        return result

    async def _get(self, ctx: Any, params: GetSkillParams) -> dict[str, Any]:
        by_uri = {s.uri(): s for s in self._published()}
        skill = by_uri.get(params.uri)
        if skill is None:
            raise MCPError(INVALID_PARAMS, f"not a skill of this server: {params.uri[:200]} (skills/list names them)")
        return {
            "resultType": "complete",
            "skill": await anyio.to_thread.run_sync(entry, skill),
            "ttlMs": TTL_MS,
            "cacheScope": "public",
        }
