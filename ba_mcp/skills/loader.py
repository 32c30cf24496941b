"""Skills on disk: discovery, lenient loading, strict validation, files, levels and dependency chains.

A skill is a folder holding ``SKILL.md`` (YAML frontmatter + markdown) and any supporting files
(``scripts/``, ``references/``, ``assets/``, …) — the Agent Skills format (agentskills.io).

* **Loading is lenient** (the Agent Skills client guide): a name that does not match its folder, a long
  description, keys the specification does not know, ``allowed-tools`` as a list — loaded, with a
  warning. A skill without a description, or whose frontmatter is not YAML even after quoting values
  that hold ``: ``, is skipped with a warning. ``Skills.load`` never raises for a bad skill.
* **Validation is strict** (``validate_folder``): the specification's rules, each violation named.
* **Files are data.** They are listed by walking the folder (hidden names and ``__pycache__`` left out)
  and opened beneath a descriptor of the skill's folder: ``..``, absolute paths, encoded forms and
  symbolic links that leave the folder are refused by the kernel (``openat2`` ``RESOLVE_BENEATH``).
  Nothing here executes skill content.
* **Levels** (progressive disclosure): 1 = name + description (``Skills.catalog``), 2 = the SKILL.md body
  with its list of files (``Skill.body``, ``Skill.files``), 3 = one file (``Skill.read``).
* **Dependencies**: ``metadata.requires: "a b"``; ``Skills.chain(name)`` resolves them depth first,
  refusing cycles (the error shows the path) and chains deeper than ``MAX_DEPTH``.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import mimetypes
import os
import re
import stat
import threading
import unicodedata
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ba_mcp.errors import ErrorType, ToolFailure, denied, invalid, not_found
from ba_mcp.workspace import Resolved, open_beneath, open_resolved

_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: the same, ~10x faster

log = logging.getLogger(__name__)

SKILL_FILES = ("SKILL.md", "skill.md")
SPEC_KEYS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
# Keys hosts such as Claude Code read: loaded without a warning (validation still names them).
HOST_KEYS = frozenset(
    {"user-invocable", "disable-model-invocation", "model", "argument-hint", "when_to_use", "context", "agent"}
)
NAME_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_NAME, MAX_DESCRIPTION, MAX_COMPATIBILITY, MAX_BODY_LINES = 64, 1024, 500, 500
MAX_FILES, MAX_SKILL_BYTES = 512, 16 * 1024 * 1024  # SEP-2640's per-skill limits
MAX_DEPTH = 3  # levels of required skills below the one activated (seed 001's SkillActivationRequest)
_TEXT_TYPES = ("application/json", "application/sql", "application/x-yaml", "application/yaml", "application/xml")


class FrontmatterError(ValueError):
    """SKILL.md has no frontmatter, or it is not a YAML mapping."""


@dataclass(frozen=True)
class SkillFile:
    """One file of a skill: its path relative to the folder ('/'-separated), size and sha256 (hex)."""

    path: str
    size: int
    digest: str

    @property
    def mime(self) -> str:
        return mime_type(self.path)


@dataclass(eq=False)
class Skill:
    """A loaded skill. ``frontmatter`` is the YAML as written (JSON-safe); ``name`` is the one it is served
    under (its frontmatter name when that is a valid skill name, else its folder's)."""

    name: str
    description: str
    folder: Path
    frontmatter: dict[str, Any]
    body: str
    source: str
    skill_file: str = "SKILL.md"
    warnings: list[str] = field(default_factory=list)
    files: list[SkillFile] = field(default_factory=list)
    _digests: dict[Any, str] = field(default_factory=dict, repr=False, compare=False)  # see scan_files
    _fd: int | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # -- frontmatter --------------------------------------------------------------------------

    @property
    def user_invocable(self) -> bool:
        return self.frontmatter.get("user-invocable", True) is not False

    @property
    def model_invocable(self) -> bool:
        return self.frontmatter.get("disable-model-invocation", False) is not True

    @property
    def allowed_tools(self) -> list[str] | None:
        value = self.frontmatter.get("allowed-tools")
        if value is None:
            return None
        if isinstance(value, list):
            return [str(v) for v in value]
        return str(value).replace(",", " ").split()

    @property
    def model(self) -> str | None:
        value = self.frontmatter.get("model")
        return None if value is None else str(value)

    @property
    def requires(self) -> list[str]:
        meta = self.frontmatter.get("metadata")
        value = meta.get("requires") if isinstance(meta, dict) else None
        if value is None:
            return []
        items = value if isinstance(value, list) else str(value).replace(",", " ").split()
        return [str(v) for v in items]

    @property
    def publishable(self) -> bool:
        """Its frontmatter name is the name it is served under (SEP-2640: the URI ends in that name)."""
        return self.frontmatter.get("name") == self.name

    def context_modifier(self) -> dict[str, Any]:
        """What the skill asks of the host (seed 001's ContextModifier): allowed tools, model, whether
        the model may invoke it. Hosts decide what to honour; the server only reports it."""
        return {
            "allowed_tools": self.allowed_tools,
            "model": self.model,
            "disable_model_invocation": not self.model_invocable,
        }

    def uri(self, path: str | None = None) -> str:
        return f"skill://{self.name}/{urllib.parse.quote(path or self.skill_file, safe='/')}"

    # -- files --------------------------------------------------------------------------------

    def _dir(self) -> int:
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            return self._fd

    def close(self) -> None:
        """Let go of the skill's folder (opened on its first file read); a later read opens it again."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def open(self, path: str) -> Resolved:
        """One file of the skill, opened beneath its folder (a link may point within the folder, never
        out of it). Raises ToolFailure: denied for escapes, not_found for what is not a file of it."""
        relative = clean_path(path)
        if any(part.startswith(".") or part == "__pycache__" for part in relative.split("/")):
            raise not_found(f"'{path[:200]}' is not a file of the skill {self.name}", self._files_hint())
        shown = f"skill://{self.name}/{relative}"
        try:
            return open_resolved(
                self._dir(),
                relative,
                shown,
                "skill",
                None,
                allow_links=True,
                display=shown,
                where=f"the skill {self.name}",
            )
        except ToolFailure as failure:
            if failure.type is ErrorType.NOT_FOUND:
                raise not_found(
                    f"'{relative[:200]}' is not a file of the skill {self.name}", self._files_hint()
                ) from None
            raise

    def read(self, path: str) -> bytes:
        """The bytes of one file (level 3), at most the per-skill size limit."""
        resolved = self.open(path)
        try:
            if resolved.size > MAX_SKILL_BYTES:
                raise invalid(f"{resolved.name} is {resolved.size:,} bytes; skill files are served up to 16 MiB")
            with resolved.open() as f:
                return f.read(MAX_SKILL_BYTES + 1)
        finally:
            resolved.close()

    def manifest(self) -> list[SkillFile]:
        """Every file with its current size and digest (recomputed only for files that changed)."""
        self.files = scan_files(self.folder, self._dir(), self.warnings if not self.files else None, self._digests)
        return self.files

    def _files_hint(self) -> str:
        names = [f.path for f in self.files if f.path != self.skill_file][:20]
        return ("its files: " + ", ".join(names)) if names else "this skill has no supporting files"


# -- paths and types ------------------------------------------------------------------------------


def clean_path(path: str) -> str:
    """A skill-relative path as given (``references/a.md``), refused when it is empty, absolute, holds
    ``..``, a NUL or control character, or becomes one of those once percent-decoded."""
    if not isinstance(path, str) or not path.strip():
        raise invalid("path is empty", "pass a file of the skill, e.g. references/guide.md")
    if len(path) > 1024:
        raise invalid(f"path is {len(path)} characters long; at most 1024 are accepted")
    decoded = path
    for _ in range(3):
        nxt = urllib.parse.unquote(decoded)
        if nxt == decoded:
            break
        decoded = nxt
    for form in {path, decoded}:
        if any(ord(c) < 32 for c in form):
            raise denied("path contains a NUL or control character")
        if form.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", form):
            raise denied("absolute paths are not allowed", "pass a path relative to the skill's folder")
        if ".." in re.split(r"[\\/]+", form):
            raise denied("'..' is not allowed in skill paths", "pass a path inside the skill's folder")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or "\\" in path:
        raise denied(f"'{path[:200]}' is not a path inside the skill's folder", "use '/' between folder names")
    return "/".join(parts)


def mime_type(path: str) -> str:
    suffix = Path(path).suffix.lower()
    known = {".md": "text/markdown", ".py": "text/x-python", ".sql": "application/sql", ".yaml": "application/yaml"}
    if suffix in known:
        return known[suffix]
    return mimetypes.guess_type(path)[0] or "application/octet-stream"


def is_text(mime: str, data: bytes) -> bool:
    """Served as text (not a blob): a textual type whose bytes are UTF-8 and hold no NUL."""
    if not (mime.startswith("text/") or mime in _TEXT_TYPES) and mime != "application/octet-stream":
        return False
    if b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def scan_files(
    folder: Path, folder_fd: int, warnings: list[str] | None = None, digests: dict[Any, str] | None = None
) -> list[SkillFile]:
    """The files of a skill folder, sorted: regular files (and links that stay in the folder), hidden
    names and ``__pycache__`` left out. A link that leaves the folder is left out (with a warning).
    ``digests`` (the skill's own: (path, inode, size, mtime) -> sha256) spares hashing unchanged files."""
    digests = {} if digests is None else digests
    out: list[SkillFile] = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            relative = Path(dirpath, name).relative_to(folder).as_posix()
            try:
                resolved = open_resolved(folder_fd, relative, relative, "skill", None, allow_links=True)
            except ToolFailure as failure:
                if warnings is not None:
                    warnings.append(f"{relative}: {failure.message}; not served")
                continue
            try:
                key = (str(folder / relative), resolved.inode, resolved.size, resolved.mtime_ns)
                digest = digests.get(key)
                if digest is None:
                    h = hashlib.sha256()
                    with resolved.open() as f:
                        for chunk in iter(lambda: f.read(1 << 20), b""):
                            h.update(chunk)
                    digest = h.hexdigest()
                    digests[key] = digest
                out.append(SkillFile(relative, resolved.size, digest))
            finally:
                resolved.close()
    return out


# -- frontmatter ----------------------------------------------------------------------------------

_FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)(?:^|\n)---[ \t]*(?:\r?\n|\Z)", re.S | re.M)


def split_frontmatter(text: str) -> tuple[str, str]:
    """(frontmatter YAML, body) of a SKILL.md. Raises FrontmatterError when there is none."""
    text = text.lstrip("\ufeff")
    m = _FRONTMATTER.match(text)
    if not m:
        raise FrontmatterError("SKILL.md does not start with YAML frontmatter between '---' lines")
    return m.group(1), text[m.end() :]


def parse_frontmatter(raw: str, lenient: bool) -> tuple[dict[str, Any], list[str]]:
    """The frontmatter as a JSON-safe mapping, and warnings. Lenient: values holding ': ' that break the
    YAML (``description: Use when: …``) are quoted and parsed again, as the Agent Skills guide advises."""
    warnings: list[str] = []
    try:
        data = yaml.load(raw, Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:
        if not lenient:
            raise FrontmatterError(f"frontmatter is not valid YAML: {_yaml_problem(exc)}") from None
        try:
            data = yaml.load(_quote_colon_values(raw), Loader=_SAFE_LOADER)
        except yaml.YAMLError:
            raise FrontmatterError(f"frontmatter is not valid YAML: {_yaml_problem(exc)}") from None
        warnings.append("frontmatter is not valid YAML as written; read after quoting values that contain ': '")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FrontmatterError("frontmatter is not a mapping of keys to values")
    return {str(k): _json_safe(v) for k, v in data.items()}, warnings


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).split("\n")[0]
    return f"{problem} (line {mark.line + 2})" if mark is not None else str(problem)


def _quote_colon_values(raw: str) -> str:
    out = []
    for line in raw.splitlines():
        m = re.match(r"^([A-Za-z0-9_-]+):[ \t]+(.*:[ \t].*)$", line)
        if m and not m.group(2).lstrip().startswith(("'", '"', "|", ">", "[", "{")):
            value = m.group(2).strip().replace("\\", "\\\\").replace('"', '\\"')
            line = f'{m.group(1)}: "{value}"'
        out.append(line)
    return "\n".join(out)


def _json_safe(value: Any) -> Any:
    """YAML's dates and other non-JSON scalars as text, so the frontmatter can be sent as JSON."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


MAX_SKILL_MD_BYTES = 1024 * 1024


def _read_skill_text(folder: Path) -> tuple[str, str]:
    """(file name, text) of a folder's SKILL.md, opened like every file of a skill: beneath the folder (a link
    may point within it, never out of it — the kernel refuses), a regular file, at most MAX_SKILL_MD_BYTES.
    FileNotFoundError when it has none; FrontmatterError when it is not a readable SKILL.md."""
    folder_fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in SKILL_FILES:
            try:
                fd = open_beneath(folder_fd, name, allow_links=True)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise FrontmatterError(f"{name} cannot be opened inside the skill folder ({exc.strerror})") from None
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode):
                    raise FrontmatterError(f"{name} is not a regular file")
                if st.st_size > MAX_SKILL_MD_BYTES:
                    raise FrontmatterError(f"{name} is {st.st_size:,} bytes; at most {MAX_SKILL_MD_BYTES:,} are read")
                data = f.read(MAX_SKILL_MD_BYTES + 1)
            try:
                return name, data.decode("utf-8")
            except UnicodeDecodeError:
                raise FrontmatterError(f"{name} is not UTF-8 text") from None
    finally:
        os.close(folder_fd)
    raise FileNotFoundError(f"{folder.name} has no SKILL.md")


# -- strict validation ----------------------------------------------------------------------------


def validate_folder(folder: Path) -> list[str]:
    """The Agent Skills specification's rules for one skill folder: a list of problems, empty when the
    skill is valid."""
    try:
        _, text = _read_skill_text(folder)
        raw, body = split_frontmatter(text)
        data, _ = parse_frontmatter(raw, lenient=False)
    except FileNotFoundError:
        return ["no SKILL.md in the folder"]
    except (FrontmatterError, OSError) as exc:
        return [str(exc)]
    problems = []
    for key in data:
        if key not in SPEC_KEYS:
            problems.append(
                f"unexpected key '{key}' (the specification allows {', '.join(SPEC_KEYS)}; "
                "put other values under metadata)"
            )
    name = data.get("name")
    if name is None:
        problems.append("missing required key 'name'")
    elif not isinstance(name, str) or not name:
        problems.append("'name' must be a non-empty string")
    else:
        name = unicodedata.normalize("NFKC", name)
        if len(name) > MAX_NAME:
            problems.append(f"'name' is {len(name)} characters; at most {MAX_NAME}")
        if not NAME_PATTERN.match(name):
            problems.append(
                f"'name' {name!r} must be lowercase letters, digits and single hyphens, not starting or ending "
                "with a hyphen"
            )
        if name != unicodedata.normalize("NFKC", folder.name):
            problems.append(f"'name' {name!r} does not match its folder name {folder.name!r}")
    description = data.get("description")
    if description is None:
        problems.append("missing required key 'description'")
    elif not isinstance(description, str) or not description.strip():
        problems.append("'description' must be a non-empty string")
    elif len(description) > MAX_DESCRIPTION:
        problems.append(f"'description' is {len(description):,} characters; at most {MAX_DESCRIPTION:,}")
    compatibility = data.get("compatibility")
    if compatibility is not None and (not isinstance(compatibility, str) or len(compatibility) > MAX_COMPATIBILITY):
        problems.append(f"'compatibility' must be a string of at most {MAX_COMPATIBILITY} characters")
    metadata = data.get("metadata")
    if metadata is not None and (
        not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values())
    ):
        problems.append("'metadata' must map keys to string values")
    tools = data.get("allowed-tools")
    if tools is not None and not isinstance(tools, str):
        problems.append("'allowed-tools' must be a space-separated string, e.g. \"Read Bash(git:*)\"")
    if body.count("\n") > MAX_BODY_LINES:
        problems.append(f"the body has {body.count(chr(10)):,} lines; keep SKILL.md under {MAX_BODY_LINES}")
    return problems


def skill_folders(directory: Path) -> list[Path]:
    """The skill folders of ``directory``: itself when it holds a SKILL.md, else its subfolders that do."""
    if any((directory / n).is_file() for n in SKILL_FILES):
        return [directory]
    try:
        children = sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []
    return [p for p in children if any((p / n).is_file() for n in SKILL_FILES)]


# -- lenient loading ------------------------------------------------------------------------------


def load_skill(folder: Path, source: str) -> tuple[Skill | None, list[str]]:
    """One skill, leniently: (the skill or None when it must be skipped, warnings)."""
    warnings: list[str] = []
    try:
        skill_file, text = _read_skill_text(folder)
        raw, body = split_frontmatter(text)
        data, notes = parse_frontmatter(raw, lenient=True)
    except (FrontmatterError, OSError) as exc:
        return None, [f"{exc}; skipped"]
    warnings += notes
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        return None, [*warnings, "no description in the frontmatter; skipped"]
    if len(description) > MAX_DESCRIPTION:
        warnings.append(
            f"description is {len(description):,} characters (the specification allows {MAX_DESCRIPTION:,})"
        )
    declared = data.get("name")
    name = folder.name
    if not isinstance(declared, str) or not declared:
        warnings.append(f"no name in the frontmatter; served as its folder name {folder.name!r}")
    elif not NAME_PATTERN.match(declared):
        warnings.append(f"name {declared!r} is not a valid skill name; served as its folder name {folder.name!r}")
    else:
        name = declared
        if declared != folder.name:
            warnings.append(f"name {declared!r} does not match its folder {folder.name!r}")
        if len(declared) > MAX_NAME:
            warnings.append(f"name is {len(declared)} characters (the specification allows {MAX_NAME})")
    if not NAME_PATTERN.match(name):
        return None, [*warnings, f"folder name {folder.name!r} is not a valid skill name either; skipped"]
    unknown = [k for k in data if k not in SPEC_KEYS and k not in HOST_KEYS]
    if unknown:
        warnings.append("keys outside the specification: " + ", ".join(unknown))
    if isinstance(data.get("allowed-tools"), list):
        warnings.append("allowed-tools is a list (the specification wants a space-separated string)")
    real = Path(os.path.realpath(folder))
    skill = Skill(name, " ".join(description.split()), real, data, body, source, skill_file, warnings)
    try:
        files = skill.manifest()
    except OSError as exc:
        return None, [*warnings, f"its files cannot be listed ({exc.strerror}); skipped"]
    total = sum(f.size for f in files)
    if len(files) > MAX_FILES or total > MAX_SKILL_BYTES:
        return None, [*warnings, f"{len(files):,} files, {total:,} bytes: over 512 files or 16 MiB; skipped"]
    return skill, skill.warnings


@dataclass
class Skills:
    """The loaded skills, by name, and what loading them said (``warnings``: ``"name: message"``)."""

    by_name: dict[str, Skill] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, sources: Iterable[tuple[str, Path]]) -> Skills:
        """Skills from (label, directory) sources, earlier sources winning a name clash."""
        skills = cls()
        for label, directory in sources:
            if not directory.is_dir():
                skills.warnings.append(f"{label}: {directory.name or directory} is not a directory; no skills from it")
                continue
            for folder in skill_folders(directory):
                skill, warnings = load_skill(folder, label)
                shown = skill.name if skill else folder.name
                skills.warnings += [f"{shown} ({label}): {w}" for w in warnings]
                if skill is None:
                    continue
                if skill.name in skills.by_name:
                    other = skills.by_name[skill.name]
                    skills.warnings.append(f"{skill.name} ({label}): a skill of that name from {other.source} wins")
                    continue
                skills.by_name[skill.name] = skill
        for skill in skills.by_name.values():
            missing = [r for r in skill.requires if r not in skills.by_name]
            if missing:
                skills.warnings.append(f"{skill.name}: requires {', '.join(missing)}, not loaded")
            if not skill.publishable:
                skills.warnings.append(
                    f"{skill.name}: not published through skills/list (its frontmatter name is not the one served)"
                )
        return skills

    def __iter__(self) -> Any:
        return iter(sorted(self.by_name.values(), key=lambda s: s.name))

    def close(self) -> None:
        """Let go of every skill's folder (an App that ends leaves no descriptor behind)."""
        for skill in self.by_name.values():
            skill.close()

    def __len__(self) -> int:
        return len(self.by_name)

    def model_skills(self) -> list[Skill]:
        return [s for s in self if s.model_invocable]

    def get(self, name: str, *, for_model: bool = False) -> Skill:
        """The skill called ``name``; ToolFailure not_found listing close names. ``for_model``: skills the
        model may not invoke (``disable-model-invocation``) do not exist."""
        pool = {s.name: s for s in (self.model_skills() if for_model else self)}
        skill = pool.get(name.strip()) if isinstance(name, str) else None
        if skill is None:
            import difflib  # only when a name is wrong

            close = difflib.get_close_matches(str(name), list(pool), n=3, cutoff=0.5)
            hint = (
                f"did you mean {' or '.join(close)}?"
                if close
                else f"skills: {', '.join(list(pool)[:30]) or 'none are loaded'}"
            )
            raise not_found(f"there is no skill named '{str(name)[:80]}'", hint, code="UNKNOWN_SKILL")
        return skill

    def chain(self, name: str, *, for_model: bool = False) -> list[Skill]:
        """The skill and every skill it requires, directly or not: depth first, each once, the skill
        itself first. A cycle is a validation error showing its path; so is a chain more than
        ``MAX_DEPTH`` levels deep."""
        root = self.get(name, for_model=for_model)
        order: list[Skill] = []

        def visit(skill: Skill, path: list[str]) -> None:
            if skill not in order:
                order.append(skill)
            for dep in skill.requires:
                if dep in path:
                    cycle = " → ".join([*path[path.index(dep) :], dep])
                    raise ToolFailure(
                        ErrorType.VALIDATION_ERROR,
                        "SKILL_CYCLE",
                        f"skill {root.name} cannot be activated: its requirements form a cycle {cycle}",
                        "remove one of these metadata.requires entries",
                    )
                if len(path) > MAX_DEPTH:
                    raise ToolFailure(
                        ErrorType.VALIDATION_ERROR,
                        "SKILL_CHAIN_TOO_DEEP",
                        f"skill {root.name} cannot be activated: its requirements go {len(path)} levels deep "
                        f"({' → '.join([*path, dep])}); at most {MAX_DEPTH} are allowed",
                        "flatten the chain: let the skill require the deeper skills directly",
                    )
                if dep not in self.by_name:
                    raise not_found(
                        f"skill {skill.name} requires the skill '{dep}', which is not loaded",
                        "add the skill's folder to skills.paths, or remove it from metadata.requires",
                        code="UNKNOWN_SKILL",
                    )
                visit(self.by_name[dep], [*path, dep])

        visit(root, [root.name])
        return order

    def catalog(self, budget_tokens: int) -> tuple[list[str], list[str]]:
        """Level 1 for the model: ``name: when to use it`` lines for the skills that fit ``budget_tokens``,
        then the names of those that did not. Tokens are estimated on the safe side (a token per three
        bytes: real text averages about four)."""
        lines: list[str] = []
        names_only: list[str] = []
        used = 0
        for skill in self.model_skills():
            line = f"{skill.name}: {brief(skill.description)}"
            cost = estimate_tokens(line)
            if not names_only and used + cost <= budget_tokens:
                lines.append(line)
                used += cost
            else:
                names_only.append(skill.name)
        return lines, names_only


def brief(description: str) -> str:
    """A description as the catalog shows it: its "Use …" sentence, which says when to load it (the name says
    what it is), without the "Use" ("for A/B tests."), else its headline (up to " - ", where the details
    start); the whole description comes with the skill."""
    head, sep, rest = description.partition(" - ")
    if not sep:
        return description
    return rest[rest.find("Use ") + 4 :].strip() if "Use " in rest else head.rstrip(".") + "."


def estimate_tokens(text: str) -> int:
    return len(text.encode("utf-8")) // 3 + 1
