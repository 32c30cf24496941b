"""Settings: the shipped ``config/default.yaml`` < the user-level file (``config.yaml`` in the platform's
configuration directory) < ``--config`` < the project file (the ``ba-mcp.yaml`` of the folder a command starts in,
read when no ``--config`` is given) < ``BA_MCP_*`` variables < explicit arguments (command-line flags), each
overriding the one before (``config_sources``).

**Who may set what (S-17).** Every source but the project file is the operator's and may set every key. The project
file is untrusted input — a repository someone else wrote — and passes one trust gate here, nowhere else: until the
user approves its exact content (``trust_project``: its digest recorded in the user's configuration directory), it
may only add what loosens no boundary (``_gate_project``); the keys it was refused are named (``ProjectFile``).

``load_settings()`` is the one entry point. It returns a validated, immutable ``Settings`` or raises
``ConfigError`` whose message names the offending key (``tools.file_reader.timeout_s: …``) — in YAML
and in the environment alike (``BA_MCP_WEB__X`` is an error, not ignored). Each tool's settings live
under ``tools.<name>`` in one model per tool — the tool's own ``Settings`` (``ToolSettings``: timeouts, default
level, and its own keys with their defaults), found through the tool table (``registry``); a name that is not a
tool of the server is an error naming it. Services shared by several tools have top-level
sections that follow the rooms (``formats`` — parse bounds, ``sandbox`` — the Python workers, ``databases.<name>``
— a database and its engine's knobs, ``web``, ``skills``, ``files``); a key that moved there from
``tools.<name>`` is an error naming its new place.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, ValidationError, model_validator

from ba_mcp import registry
from ba_mcp.plugins import Loaded, Plugin
from ba_mcp.plugins import enable as enable_plugins

_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: the same, ~10x faster

LevelName = Literal["brief", "standard", "full"]
ModelFamily = Literal["claude", "gpt", "gemini", "glm", "qwen", "unknown"]


def config_dir() -> Path:
    """The directory holding the shipped ``default.yaml`` and ``token_encoders.yaml``."""
    packaged = Path(__file__).parent / "_config"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parent.parent / "config"


class ConfigError(Exception):
    """Invalid configuration; the message names the key."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ObservationSettings(_Section):
    structured_content: bool = False
    preview_rows: int = Field(10, ge=1, le=200)
    standard_whole_rows: int = Field(50, ge=0, le=1000)
    standard_budget_tokens: int = Field(1000, ge=100)
    inline_limit_tokens: int = Field(8000, ge=100)
    whole_limit_tokens: int = Field(16000, ge=100)  # a text useful only whole (a skill's script) at `full`
    document_window_tokens: int = Field(2000, ge=50)
    json_budget_tokens: int = Field(1500, ge=50)
    table_encoding: Literal["csv", "markdown", "toon", "json"] = "csv"
    max_cell_chars: int = Field(80, ge=8)


class ArtifactSettings(_Section):
    ttl_hours: float = Field(24, gt=0)
    max_bytes: int = Field(2 * 1024**3, ge=1024 * 1024)
    cleanup_interval_s: float = Field(600, gt=0)
    max_artifact_bytes: int = Field(1024**3, ge=1024)
    max_bytes_per_user: int | None = Field(None, ge=1024 * 1024)  # one HTTP session's (one user's, with http.auth)
    shared: bool = False  # every session reads every session's artifacts and code (single-user HTTP)


class CacheSettings(_Section):
    max_entries: int = Field(256, ge=0)
    max_bytes: int = Field(256 * 1024**2, ge=0)


class RetrySettings(_Section):
    max_retries: int = Field(3, ge=0, le=10)
    base_ms: float = Field(1000, ge=0)
    factor: float = Field(1.5, ge=1)
    max_ms: float = Field(10000, ge=0)


class TelemetrySettings(_Section):
    enabled: bool = True
    lag_monitor: bool = False
    otlp_endpoint: str | None = None


class AuditSettings(_Section):
    """``audit:``: the audit trail (S-20, ``pipeline/audit.py``) — the operator's alone: a project file's ``audit``
    keys are refused, approved or not (``OPERATOR_ONLY``)."""

    enabled: bool = True
    dir: Path | None = None  # null: audit/ in the platform's state directory (Settings.audit_dir)
    keep_days: int | None = Field(365, ge=1)  # files of days older than this are removed; null: kept for ever
    max_file_mb: int = Field(64, ge=1)  # a day's file past this goes on in the next (audit-<day>.1.jsonl, …)
    max_text_kb: int = Field(64, ge=1)  # a statement, code or arguments longer: the first this many KB and a digest


class SessionsSettings(_Section):
    """``sessions:``: what the server keeps per client session (S-16)."""

    http_idle_timeout_s: float = Field(1800, gt=0)  # an HTTP session with no request for this long is ended
    history_calls: int = Field(200, ge=1)  # the latest calls kept in a session's history (ba://history, saving)
    history_call_bytes: int = Field(256 * 1024, ge=1024)  # a call's arguments over this are kept as their size
    history_bytes: int = Field(16 * 1024**2, ge=64 * 1024)  # a session's history in all; the oldest go first


ClaimValue = str | int | bool  # a claim http.auth.required_claims accepts, compared as a JSON value


class HttpAuthSettings(_Section):
    """``http.auth``: the server as an OAuth 2.1 resource server (the MCP authorization specification): every HTTP
    request carries a bearer token the ``issuer`` issued for ``audience``, and the server's work is the token's
    principal's (S-19)."""

    issuer: str = Field(min_length=1, max_length=500)  # its metadata: /.well-known/openid-configuration or
    # /.well-known/oauth-authorization-server beneath it
    audience: str = Field(min_length=1, max_length=500)  # this server's resource identifier (its public MCP URL)
    required_scopes: list[str] = []
    principal_claim: str = Field("sub", min_length=1, max_length=100)
    leeway_s: float = Field(30, ge=0, le=300)  # clock skew allowed on exp, nbf and iat
    keys_cache_s: float = Field(300, gt=0)  # how long the issuer's metadata and keys are kept (an unknown kid
    # fetches them again at once, at most every 10 s)
    introspection_client_id: str | None = Field(None, max_length=200)  # for opaque tokens (RFC 7662)
    introspection_client_secret: SecretStr | None = None
    token_types: list[str] = Field(
        ["at+jwt"],
        min_length=1,
        description="The header typ a JWT access token must carry (case-insensitive; application/ optional). "
        "at+jwt (RFC 9068) keeps ID tokens out; add JWT for an issuer that types its access tokens JWT or not at "
        "all (Entra ID, Keycloak) — a token without typ counts as JWT.",
    )
    allowed_clients: list[str] | None = Field(
        None,
        min_length=1,
        description="The OAuth clients whose tokens are accepted (the token's client_id, else its azp). "
        "null: any client of the issuer — with anonymous dynamic registration, any client anybody registers.",
    )
    required_claims: dict[str, ClaimValue | list[ClaimValue]] = Field(
        {},
        description="Claims a token must carry: each claim present and equal to the value, or one of the list "
        "(a list-valued claim, e.g. groups, holding one of them). E.g. {groups: [ba-analysts]}.",
    )

    @model_validator(mode="after")
    def _urls(self) -> HttpAuthSettings:
        import urllib.parse

        for key in ("issuer", "audience"):
            url = urllib.parse.urlsplit(getattr(self, key))
            loopback = url.hostname in ("127.0.0.1", "localhost", "::1")
            if (url.scheme != "https" and not (url.scheme == "http" and loopback)) or not url.hostname:
                raise ValueError(f"{key} must be an https:// URL (http:// only on this machine's loopback)")
        for key in ("token_types", "allowed_clients"):
            if any(not name or len(name) > 500 for name in getattr(self, key) or []):
                raise ValueError(f"{key}: each name is 1 to 500 characters")
        return self


class HttpSettings(_Section):
    """``http:``: the streamable HTTP transport (``serve --transport http``)."""

    auth: HttpAuthSettings | None = None
    requests_per_minute: int = Field(600, ge=1)  # per principal (per HTTP session without auth)


class ToolSettings(_Section):
    """What every tool has: its default timeout, the ceiling a call may ask for, its default level. A tool's own
    model (its ``Settings``) adds keys and changes defaults; the defaults are validated too, so a tool's are checked
    as the operator's values are."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    enabled: bool = True
    timeout_s: float = Field(30, gt=0)
    max_timeout_s: float = Field(300, gt=0)
    default_level: LevelName | None = None

    @model_validator(mode="after")
    def _ceiling_covers_default(self) -> ToolSettings:
        if self.max_timeout_s < self.timeout_s:
            raise ValueError("max_timeout_s must be at least timeout_s")
        return self


class FormatsSettings(_Section):
    """``formats:``: bounds on untrusted files, for every reader of them."""

    max_file_bytes: int = Field(256 * 1024**2, ge=1024)
    max_columns: int = Field(5000, ge=1)
    max_line_bytes: int = Field(8 * 1024**2, ge=1024)
    max_cells: int = Field(20_000_000, ge=1000)
    max_decompressed_bytes: int = Field(256 * 1024**2, ge=1024**2)
    partial_rows: int = Field(10000, ge=1)
    partial_text_bytes: int = Field(1024**2, ge=1024)
    encoding_sample_bytes: int = Field(65536, ge=1024)


class RoleMappingSettings(_Section):
    """``databases.<name>.role_from`` (S-21): each call runs as the database role its caller's token maps to, so the
    database's own grants and row-level security decide what each person reads. ``claim`` names a claim of the
    verified token (a text such as ``email`` or ``sub``, or a list of texts such as ``groups``); ``roles`` maps its
    values to roles — a key holding ``*`` matches any run of characters (``"*@eu.example.com"``); an exact key is
    tried before any pattern, each kind in the order written. ``default``: the role of a caller no key matches and of
    the local operator (stdio; HTTP without ``http.auth``), who has no token — null refuses them. Only the roles
    named here are ever taken, as written (quoted: case matters); each is vetted when the database is connected."""

    claim: str = Field(min_length=1, max_length=100)
    roles: dict[str, str] = Field({}, max_length=10_000)
    default: str | None = None

    @model_validator(mode="after")
    def _roles(self) -> RoleMappingSettings:
        if not self.roles and self.default is None:
            raise ValueError("map at least one claim value to a role (roles), or set a default role")
        if any(not value or len(value) > 500 for value in self.roles):
            raise ValueError("roles: each claim value is 1 to 500 characters")
        for role in self.all_roles():
            if not role or len(role.encode()) > 63 or "\x00" in role:
                raise ValueError(f"{role[:80]!r} is no database role name (1 to 63 bytes)")
        return self

    def all_roles(self) -> list[str]:
        """Every role the mapping can take, each once, in the order written (the default last)."""
        named = [*self.roles.values(), *([self.default] if self.default is not None else [])]
        return list(dict.fromkeys(named))


class DatabaseSettings(_Section):
    """``databases.<name>``: a configured database and its engine's knobs. A DuckDB file (``path``; null and no
    ``url``: the embedded demo) or a connection (``url``, ``driver``, ``options``) to an engine of the registry, or
    any ADBC driver. Secrets stay ``SecretStr``: never shown by a repr or a dump."""

    # null: the embedded demo database (generated into data/demo.duckdb on first use)
    path: Path | None = None
    url: SecretStr | None = None
    driver: str | None = Field(None, max_length=200, pattern=r"^[A-Za-z0-9_.\-/]+$")
    options: dict[str, SecretStr] = {}
    description: str = ""
    allow_privileged_role: bool = False  # serve a role with server-file or program privileges
    allow_writable_role: bool = False  # serve a role that can write, create objects or reach other databases (S-14)
    allow_unguarded_writes: bool = False  # serve an endpoint whose engine runs without ba-mcp's read-only rule
    # PostgreSQL: functions beyond the catalog's allow-list a statement may call, by name (an extension's, S-14)
    allow_functions: list[str] = Field([], max_length=500)
    role_from: RoleMappingSettings | None = None  # each caller's own database role (S-21); an engine that takes roles
    schemas: list[str] = []
    threads: int = Field(2, ge=1, le=64)
    memory_limit: str = Field("2GB", pattern=r"^\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$")
    max_concurrent: int = Field(4, ge=1, le=64)
    max_concurrent_per_user: int | None = Field(None, ge=1, le=64)  # None: all (one analyst), half with http.auth
    # set by load_settings: the url and options as written (``${VAR}`` unexpanded) and the values the variables gave
    _written: dict[str, str] = PrivateAttr(default_factory=dict)
    _expanded: list[str] = PrivateAttr(default_factory=list)
    # set by load_settings for a database an unapproved project file added: the project's folder (S-17)
    _beneath: Path | None = PrivateAttr(None)

    def beneath(self) -> Path | None:
        """The folder an unapproved project file's database lies in: its file is opened beneath it, following no
        symbolic link (None: the operator's database, opened as configured)."""
        return self._beneath

    def written(self, key: str) -> str | None:
        """``url`` or ``options.<k>`` as the configuration wrote it, when it named environment variables."""
        return self._written.get(key)

    def expanded(self) -> list[str]:
        """The values ``${VAR}`` gave this database's url and options: shown nowhere (S-1, S-11)."""
        return list(self._expanded)

    @model_validator(mode="after")
    def _one_kind(self) -> DatabaseSettings:
        if self.path is not None and (self.url is not None or self.driver):
            raise ValueError("give either path (a DuckDB file) or url/driver (a connection), not both")
        return self  # a URL that reaches no engine leaves this database unavailable (``unavailable``), not the server

    def unavailable(self) -> tuple[str, str] | None:
        """Why this database cannot be served whatever the database says — (what is wrong, what to write) — or None:
        a URL that reaches no engine (``registry.url_problem``) or whose user part holds a character a URL reserves
        (drivers split it elsewhere and would show part of the password). Nothing of the URL is quoted."""
        from ba_mcp import redaction

        url = self.url.get_secret_value() if self.url is not None else ""
        problem = registry.url_problem(url, self.driver)  # first: a URL no engine takes (no scheme) is that
        if problem is None and redaction.unsure(url):
            return (
                "the user or password in its URL holds a character a URL reserves (@ # / ?), so drivers read it "
                "differently — percent-encode the password",
                redaction.PERCENT_ENCODE_HINT,
            )
        return problem

    @property
    def kind(self) -> str:
        """Its engine (``databases/registry.py``): duckdb for a file or the demo, else by driver or URL scheme."""
        return registry.kind_of(self.url.get_secret_value() if self.url is not None else "", self.driver)


class WorkerLimits(_Section):
    """What bounds a worker process, the same shape for the engine workers (``engine:``) and the Python sandbox
    (``sandbox:``): its memory, disk, user, CPU, how many live at once, a spare started ahead, how long a timed-out
    call gets before its worker is killed, the largest object it hands over, how long it may take to start and
    how long an idle session's worker lives."""

    memory_mb: int = Field(4096, ge=256)
    disk_mb: int = Field(1024, ge=16)
    uid: int = Field(65534, ge=1)
    gid: int = Field(65534, ge=1)
    cpu_seconds: int = Field(3600, ge=10)
    cpus: float = Field(0, ge=0)  # cores' worth of CPU time per worker (cpu cgroup); 0: all the machine's
    max_workers: int = Field(8, ge=1)
    spare_workers: int = Field(1, ge=0, le=1)
    interrupt_grace_s: float = Field(3.0, gt=0, le=60)
    max_transfer_mb: int = Field(256, ge=1)
    start_timeout_s: float = Field(60, gt=0)
    idle_timeout_s: float = Field(3600, gt=0)


class EngineSettings(WorkerLimits):
    """``engine:``: the engine workers, where SQL runs and untrusted bytes are decoded (one per session), and the
    connection workers of configured connections."""

    disk_mb: int = Field(2048, ge=16)
    cpu_seconds: int = Field(36000, ge=10)
    interrupt_grace_s: float = Field(1.0, gt=0, le=10)
    # a session's idle worker that grew this much and holds none of its TEMP objects is replaced by a fresh one
    renew_idle_s: float = Field(30, gt=0)
    renew_growth_mb: int = Field(50, ge=0)


class SandboxSettings(WorkerLimits):
    """``sandbox:``: the Python workers of run_python — their limits, isolation and output capture."""

    max_processes: int = Field(128, ge=8)
    max_file_mb: int = Field(1024, ge=1)
    network: bool = False
    env_allowlist: list[str] = ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"]
    # The shipped list is in config/default.yaml (always loaded); without it nothing may be imported.
    allowed_imports: list[str] | Literal["*"] = []
    output_head_chars: int = Field(6_000, ge=100)
    output_tail_chars: int = Field(2_000, ge=0)


class BraveSettings(_Section):
    api_key: str | None = Field(None, repr=False)
    endpoint: str = "https://api.search.brave.com/res/v1/web/search"


class TavilySettings(_Section):
    api_key: str | None = Field(None, repr=False)
    endpoint: str = "https://api.tavily.com/search"


class SearxngSettings(_Section):
    url: str | None = None


class DuckDuckGoSettings(_Section):
    endpoint: str = "https://html.duckduckgo.com/html/"


class SearchSettings(_Section):
    provider: Literal["auto", "searxng", "brave", "tavily", "duckduckgo"] = "auto"
    min_interval_s: float = Field(1.0, ge=0)
    cache_ttl_s: float = Field(900, ge=0)
    searxng: SearxngSettings = SearxngSettings()
    brave: BraveSettings = BraveSettings()
    tavily: TavilySettings = TavilySettings()
    duckduckgo: DuckDuckGoSettings = DuckDuckGoSettings()


class WebSettings(_Section):
    allow_private_networks: bool = False
    respect_robots_txt: bool = True
    user_agent: str | None = Field(None, max_length=300)
    max_download_bytes: int = Field(5 * 1024**2, ge=1024)
    max_redirects: int = Field(5, ge=0, le=30)
    timeout_s: float = Field(20, gt=0)
    search: SearchSettings = SearchSettings()


class SkillsSettings(_Section):
    # Extra directories, each holding skill folders (a directory that is itself a skill folder works too).
    paths: list[Path] = []
    bundled: bool = True
    catalog_budget_tokens: int = Field(2000, ge=0)


class DbtProjectSettings(_Section):
    """``metrics.dbt[]``: a dbt project whose semantic models and metrics are served (MetricFlow compiles them):
    the project's folder (its ``target/semantic_manifest.json``, written by ``dbt parse``) and the configured
    database it was built on."""

    project: Path
    database: str = Field(max_length=100)


class MetricsSettings(_Section):
    """``metrics:``: OSI metric files (docs/metrics.md), beyond <workspace>/metrics/ and each read root's metrics/."""

    paths: list[Path] = []
    dbt: list[DbtProjectSettings] = []
    demo: bool | None = None  # the demo's metrics: None until your files declare datasets; True always; False never
    max_file_bytes: int = Field(1024 * 1024, ge=1024)
    catalog_budget_chars: int = Field(1600, ge=200)


READ_ROOT_NAME = r"^[a-z][a-z0-9_-]{0,31}$"
# the workspace's folders, and each user's own (analyses/, exports/ and users/ itself: a read root of that name would
# shadow what every user reaches as their own)
RESERVED_ROOT_NAMES = frozenset(
    {"uploads", "artifacts", "code", "sessions", "data", "logs", "users", "analyses", "exports", "published"}
)


class FilesSettings(_Section):
    # name -> directory, readable (never writable) as name/<path> by file_reader, query_database and
    # run_python's load_file/open_file.
    read_roots: dict[str, Path] = {}
    # Where exports land (run_python's export(), ba-mcp artifacts export): null = <workspace>/exports.
    # Relative directories are relative to the working directory.
    export_dir: Path | None = None

    @model_validator(mode="after")
    def _names(self) -> FilesSettings:
        import re

        for name in self.read_roots:
            if not re.match(READ_ROOT_NAME, name):
                raise ValueError(
                    f"read root name {name!r}: lowercase letters, digits, '-' and '_', starting with a letter"
                )
            if name in RESERVED_ROOT_NAMES or name.startswith(("upload_", "artifact_", "code_")):
                raise ValueError(f"read root name {name!r} is taken by the workspace's own folders or ids")
        return self


class ToolsSettings(_Section):
    """``tools.<name>``: one section per tool of the server, each validated by the tool's own model (its class's
    ``Settings``, found through the tool table in ``registry``) — in ``load_settings`` and on first use
    (``Settings.tool``). Sections of tools registered by an embedding application (or a test) are checked by
    ``load_settings(tool_models=…)``."""

    model_config = ConfigDict(extra="allow", frozen=True)


class Settings(_Section):
    """Every key is documented in ``config/default.yaml``."""

    workspace: Path | None = None
    default_output_level: LevelName = "standard"
    session_token_budget: int = Field(200_000, ge=1000)
    tools_list_budget_tokens: int = Field(2000, ge=200)
    budget_downgrade_ratio: float = Field(0.8, gt=0, le=1)
    budget_window_s: float = Field(1800, gt=0)
    downgrade_floor_tokens: int = Field(300, ge=0)
    model_family: ModelFamily = "claude"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
    observation: ObservationSettings = ObservationSettings()
    artifacts: ArtifactSettings = ArtifactSettings()
    cache: CacheSettings = CacheSettings()
    retry: RetrySettings = RetrySettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    audit: AuditSettings = AuditSettings()
    sessions: SessionsSettings = SessionsSettings()
    http: HttpSettings = HttpSettings()
    databases: dict[str, DatabaseSettings] = {"demo": DatabaseSettings()}
    formats: FormatsSettings = FormatsSettings()
    engine: EngineSettings = EngineSettings()
    sandbox: SandboxSettings = SandboxSettings()
    web: WebSettings = WebSettings()
    skills: SkillsSettings = SkillsSettings()
    metrics: MetricsSettings = MetricsSettings()
    files: FilesSettings = FilesSettings()
    tools: ToolsSettings = ToolsSettings()
    plugins: list[str] = []  # installed plug-in packages to load (``plugins.py``): the operator's alone
    _project: ProjectFile | None = PrivateAttr(None)  # set by load_settings
    _plugins: tuple[Plugin, ...] = PrivateAttr(())  # set by load_settings: every installed plug-in
    _tool_models: dict[str, type[ToolSettings]] = PrivateAttr(default_factory=dict)  # an embedder's (load_settings)
    _tools: dict[str, ToolSettings] = PrivateAttr(default_factory=dict)  # each tool's section, validated once

    @property
    def project_file(self) -> ProjectFile | None:
        """The project's ``ba-mcp.yaml`` this configuration read, and what it was refused (S-17)."""
        return self._project

    @property
    def plugin_status(self) -> tuple[Plugin, ...]:
        """Every installed plug-in (and each one ``plugins:`` names that is not installed): enabled, loaded, or
        unavailable with the reason."""
        return self._plugins

    @model_validator(mode="after")
    def _dbt_databases(self) -> Settings:
        for project in self.metrics.dbt:
            if project.database not in self.databases:
                raise ValueError(
                    f"metrics.dbt: the project {project.project} names database {project.database!r}, which is not "
                    f"configured (databases.{project.database})"
                )
        return self

    def tool(self, name: str) -> ToolSettings:
        """The settings of one tool, validated by its own model (``tool_model``): what ``tools.<name>`` sets over
        the model's defaults. A tool the settings do not know gets ``ToolSettings``'s."""
        found = self._tools.get(name)
        if found is None:
            raw = (self.tools.model_extra or {}).get(name)
            found = self._tools[name] = self.tool_model(name).model_validate(raw if isinstance(raw, dict) else {})
        return found

    def tool_model(self, name: str) -> type[ToolSettings]:
        """The model of ``tools.<name>``: the built-in tool's ``Settings`` (the tool table), an embedder's
        (``load_settings(tool_models=…)``), else ``ToolSettings``."""
        if name in self._tool_models:
            return self._tool_models[name]
        if name in registry.tool_names():
            model: type[ToolSettings] = registry.tool_class(name).Settings
            return model
        return ToolSettings

    def workspace_root(self) -> Path:
        """Where the workspace lives: the setting, else the platform's user data directory."""
        if self.workspace is not None:
            return self.workspace.expanduser()
        import platformdirs

        return Path(platformdirs.user_data_dir("ba-mcp", appauthor=False))

    def export_root(self) -> Path:
        """Where exports are written: ``files.export_dir``, else ``<workspace>/exports``."""
        chosen = self.files.export_dir
        return (chosen.expanduser() if chosen is not None else self.workspace_root() / "exports").absolute()

    def audit_dir(self) -> Path:
        """Where the audit trail is written: ``audit.dir``, else ``audit/`` in the platform's state directory
        (``~/.local/state/ba-mcp/audit``, ``$XDG_STATE_HOME``) — never beneath the workspace."""
        if self.audit.dir is not None:
            return self.audit.dir.expanduser().absolute()
        import platformdirs

        return Path(platformdirs.user_state_dir("ba-mcp", appauthor=False)) / "audit"


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {path.name}: {exc.strerror}") from None
    return _parse_yaml(text, path)


def _parse_yaml(text: str, path: Path) -> dict[str, Any]:
    try:
        data = yaml.load(text, Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:
        raise ConfigError(f"configuration file {path.name} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"configuration file {path.name} must hold a mapping of keys")
    return data


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


# Keys that moved when the settings took the shape of the rooms: the old place -> the new one. A
# configuration that still uses an old place fails at start with a message naming the new one.
_FORMAT_KEYS = tuple(FormatsSettings.model_fields)
_SANDBOX_KEYS = tuple(SandboxSettings.model_fields)
MOVED: dict[str, str] = {
    **{f"tools.file_reader.{k}": f"formats.{k}" for k in _FORMAT_KEYS},
    **{f"tools.run_python.{k}": f"sandbox.{k}" for k in _SANDBOX_KEYS},
    **{f"tools.query_database.{k}": f"databases.<name>.{k}" for k in ("threads", "memory_limit", "max_concurrent")},
}


def _moved_keys(values: Mapping[str, Any], origin: Mapping[str, str]) -> list[str]:
    problems = []
    for old, new in MOVED.items():
        node: Any = values
        for part in old.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if node is not None:
            problems.append(f"{_named(old, origin)}: moved to {new}")
    return problems


ENV_PREFIX = "BA_MCP_"


def environment_values(environ: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """``BA_MCP_*`` variables as nested values (``__`` joins keys; JSON for lists and objects), and
    which variable set which dotted key (for error messages). An empty variable sets nothing (as pydantic-settings'
    ``env_ignore_empty``): a host that passes an optional field the user left blank — a Claude Desktop extension's
    ``user_config`` — leaves the key at its default."""
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name == ENV_PREFIX or raw == "":
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]
        if any(not part for part in path):
            raise ConfigError(f"environment variable {name}: empty key part")
        value: Any = raw
        if raw.strip()[:1] in ("[", "{"):
            try:
                value = json.loads(raw)
            except ValueError:
                raise ConfigError(f"environment variable {name}: not valid JSON") from None
        node = values
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"environment variable {name}: {'.'.join(path)} conflicts with another variable")
            node = child
        node[path[-1]] = value
        origin[".".join(path)] = name
    return values, origin


PROJECT_FILE = "ba-mcp.yaml"
USER_FILE = "config.yaml"  # the user-level file, in the platform's configuration directory
TRUST_FILE = "trusted-projects.json"  # the project files the user approved, by path and digest


def user_config_dir() -> Path:
    """The platform's configuration directory for ba-mcp (``~/.config/ba-mcp`` on Linux, ``XDG_CONFIG_HOME``):
    the user-level file and the approvals of project files live here, outside every project."""
    import platformdirs

    return Path(platformdirs.user_config_dir("ba-mcp", appauthor=False))


def config_sources(given: Path | None, cwd: Path | None = None) -> tuple[list[Path], Path | None]:
    """Where a command's configuration comes from: the operator's files (the user-level file when it exists, then
    ``--config``) and the project file — the ``ba-mcp.yaml`` of the folder the command starts in (where Claude
    Code starts a plugin's server), read when no ``--config`` is given."""
    operator = [found] if (found := user_config_dir() / USER_FILE).is_file() else []
    if given is not None:
        return [*operator, given], None
    project = (cwd or Path.cwd()) / PROJECT_FILE
    return operator, (project.absolute() if project.is_file() else None)


# -- the project file: untrusted input until its exact content is approved (S-17) -------------------------------


def _digest(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _approvals() -> dict[str, str]:
    try:
        data = json.loads((user_config_dir() / TRUST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _write_approvals(approvals: dict[str, str]) -> Path:
    folder = user_config_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / TRUST_FILE
    tmp = folder / f".{TRUST_FILE}.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(approvals, f, indent=2, sort_keys=True)
    os.replace(tmp, target)
    return target


def trust_project(path: Path) -> str:
    """Approve the project file ``path`` as it is now: its digest is recorded in the user's configuration
    directory (never in the project). A later change of one byte needs approval again. Returns the digest."""
    path = path.absolute()
    try:
        digest = _digest(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    approvals = _approvals()
    approvals[str(path)] = digest
    _write_approvals(approvals)
    return digest


def untrust_project(path: Path) -> bool:
    """Withdraw the approval of ``path``; whether there was one."""
    approvals = _approvals()
    found = approvals.pop(str(path.absolute()), None)
    if found is not None:
        _write_approvals(approvals)
    return found is not None


class ProjectFile:
    """What became of a project file: its path and digest, whether the user approved this exact content (or an
    earlier one: ``changed``), the keys it was refused until approved (``ignored``: ``key — why``) and those no
    approval lets it set (``refused``: the operator's alone, ``OPERATOR_ONLY``)."""

    def __init__(
        self,
        path: Path,
        digest: str,
        approved: bool,
        changed: bool,
        ignored: list[str],
        refused: list[str] | None = None,
    ) -> None:
        self.path, self.digest, self.approved, self.changed, self.ignored = path, digest, approved, changed, ignored
        self.refused = refused or []

    def advice(self) -> str:
        """One paragraph for stderr and ``doctor``: what was ignored and the command that approves it."""
        alone = (
            f"; never from a project file, approved or not (the operator's alone): {'; '.join(self.refused)}"
            if self.refused
            else ""
        )
        if self.approved:
            kept = "every other key applies" if self.refused else "every key applies"
            return f"{self.path.name} in {self.path.parent}: approved ({kept}){alone}"
        why = "changed since you approved it" if self.changed else "not approved"
        if not self.ignored:
            return f"{self.path.name} in {self.path.parent}: {why}; it sets nothing that needs approval{alone}"
        return (
            f"{self.path.name} in {self.path.parent} is {why}, so these keys were ignored: "
            + "; ".join(self.ignored)
            + f". If you trust this file, approve its exact content: ba-mcp config trust {self.path}{alone}"
        )


# Sections only the operator's sources set: a project file's are refused whether or not it is approved (S-20: the
# audit trail is never turned off, moved or trimmed by the repository being analysed).
OPERATOR_ONLY = ("audit", "plugins")  # plugins: a project file never loads code


def _operator_only(values: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A project file's values without the sections only the operator sets, and those keys, each with the reason."""
    kept = {k: v for k, v in values.items() if k not in OPERATOR_ONLY}
    refused = [
        f"{key} — the operator's alone (set it in your own configuration)"
        for section in OPERATOR_ONLY
        if section in values
        for key in _leaves(section, values[section])
    ]
    return kept, refused


# Keys a project file may set without approval: additions that loosen no boundary.
_PROJECT_DATABASE_KEYS = ("path", "url", "driver", "options", "description", "schemas")
_PACKAGE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _inside(folder: Path, value: Any) -> Path | None:
    """``value`` as an absolute path when it names something inside ``folder`` (symbolic links followed), else
    None."""
    if not isinstance(value, str | Path) or not str(value) or str(value).startswith("~"):
        return None
    real = Path(os.path.realpath(folder / value))
    base = Path(os.path.realpath(folder))
    return real if real == base or base in real.parents else None


def _leaves(prefix: str, value: Any) -> list[str]:
    """The dotted keys ``value`` sets beneath ``prefix``, one level down (``sandbox.network``)."""
    if isinstance(value, dict) and value:
        return [f"{prefix}.{k}" for k in value]
    return [prefix]


def _gate_project(values: dict[str, Any], folder: Path, taken: set[str]) -> tuple[dict[str, Any], list[str]]:
    """What an unapproved project file may set (S-17): its own databases (new names; no ``allow_*`` flags, no
    limits, no ``${VAR}``; files inside the project; a driver by package name), metric files, dbt projects and
    skills inside the project, descriptions. Everything else is ignored, each key named with the reason."""
    kept: dict[str, Any] = {}
    ignored: list[str] = []
    for key, value in values.items():
        if key == "databases" and isinstance(value, dict):
            for name, conf in value.items():
                verdict = _project_database(str(name), conf, folder, taken)
                if isinstance(verdict, str):
                    ignored.append(f"databases.{name} — {verdict}")
                    continue
                kept.setdefault("databases", {})[name] = verdict[0]
                ignored += [f"databases.{name}.{k} — {why}" for k, why in verdict[1]]
        elif key in ("metrics", "skills") and isinstance(value, dict):
            for sub, item in value.items():
                dotted = f"{key}.{sub}"
                if sub == "paths" and isinstance(item, list):
                    inside = [_inside(folder, p) for p in item]
                    outside = [str(p) for p, i in zip(item, inside, strict=True) if i is None]
                    kept.setdefault(key, {})[sub] = [i for i in inside if i is not None]
                    if outside:
                        ignored.append(f"{dotted} {', '.join(outside)} — outside the project")
                elif key == "metrics" and sub == "dbt" and isinstance(item, list):
                    chosen = []
                    for entry in item:
                        where = _inside(folder, entry.get("project")) if isinstance(entry, dict) else None
                        if where is None:
                            ignored.append(f"{dotted} {entry!r:.80} — the dbt project is outside the project")
                        else:
                            chosen.append({**entry, "project": where})
                    kept.setdefault(key, {})[sub] = chosen
                elif key == "metrics" and sub == "demo":
                    kept.setdefault(key, {})[sub] = item
                else:
                    ignored.append(f"{dotted} — needs approval")
        else:
            ignored += [f"{k} — needs approval" for k in _leaves(key, value)]
    return kept, ignored


def _project_database(
    name: str, conf: Any, folder: Path, taken: set[str]
) -> str | tuple[dict[str, Any], list[tuple[str, str]]]:
    """A project's database as it may be served unapproved (with the keys left out and why), or why it is not."""
    if name in taken:
        return "the operator's database of this name is served (a project file cannot replace it)"
    if not isinstance(conf, dict):
        return "not a mapping"
    texts = [conf.get("url"), *((conf.get("options") or {}).values() if isinstance(conf.get("options"), dict) else [])]
    if any(isinstance(t, str) and "${" in t for t in texts):
        return "it reads environment variables (${…}), which only the operator's configuration or an approval allows"
    out = {k: v for k, v in conf.items() if k in _PROJECT_DATABASE_KEYS}
    left = [(k, "needs approval") for k in conf if k not in _PROJECT_DATABASE_KEYS]
    if "path" in out and out["path"] is not None:
        inside = _inside(folder, out["path"])
        if inside is None:
            return f"its file {out['path']} is outside the project"
        out["path"] = inside
    driver = out.get("driver")
    if driver is not None and not (isinstance(driver, str) and _PACKAGE_NAME.match(driver)):
        return "its driver is not a package name (a driver manifest or library path needs approval)"
    url = out.get("url")
    if isinstance(url, str):
        served, judged = _project_url(url, driver, folder)
        if not served:
            return judged
        out["url"] = judged
    return out, left


def _project_url(url: str, driver: str | None, folder: Path) -> tuple[bool, str]:
    """(True, a project's database URL as it will be served — a file engine's (``LocalEngine``: SQLite, a folder
    engine) rewritten to the absolute path of the file inside the project it opens) or (False, why it is refused).
    The file is judged by what the engine will open (``registry.local_path``: ``~`` expanded, percent-decoding
    undone, symbolic links resolved), a relative one relative to the project."""
    from urllib.parse import quote, urlsplit

    from ba_mcp.errors import ToolFailure

    if registry.info(registry.kind_of(url, driver)).files:
        try:
            target = registry.local_path(url, folder)
        except ToolFailure as failure:
            return False, f"its URL {failure.message}: {failure.hint}"
        inside = _inside(folder, target)
        if inside is None:
            return False, f"its URL names a file outside the project ({str(target)[:120]})"
        scheme, _, rest = url.partition(":")
        query = "?" + rest.split("?", 1)[1] if "?" in rest else ""
        return True, f"{scheme}:///{quote(str(inside))}{query}"
    if not urlsplit(url).netloc:  # no engine of files, no server: nothing the project may name unapproved
        return False, "its URL names no server (a database file must be inside the project)"
    return True, url


def _read_source(path: Path) -> tuple[dict[str, Any], str]:
    """A YAML file's mapping and the digest of the very bytes it was parsed from."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {path.name}: {exc.strerror}") from None
    return _parse_yaml(data.decode("utf-8", errors="replace"), path), _digest(data)


def variables_needed(
    user_config: Path | list[Path] | None,
    environ: Mapping[str, str] | None = None,
    project: Path | None = None,
) -> list[str]:
    """The environment variables the configuration's databases name (``${VAR}`` in a url or an option): what a
    host's entry must carry for the server to start there. Only the operator's sources (and an approved project
    file) name variables."""
    values = _operator_values(user_config)
    if project is not None:
        data, digest = _read_source(project)
        if _approvals().get(str(project.absolute())) == digest:
            values = _merge(values, data)
    values = _merge(values, environment_values(os.environ if environ is None else environ)[0])
    found: list[str] = []
    for conf in (values.get("databases") or {}).values():
        if not isinstance(conf, dict):
            continue
        texts = [conf.get("url"), *(conf.get("options") or {}).values()]
        for text in texts:
            for name in _VARIABLE.findall(text) if isinstance(text, str) else []:
                if name not in found:
                    found.append(name)
    return found


def _operator_values(user_config: Path | list[Path] | None) -> dict[str, Any]:
    values = _read_yaml(config_dir() / "default.yaml")
    files = [user_config] if isinstance(user_config, Path) else list(user_config or [])
    for path in files:
        values = _merge(values, _read_yaml(path))
    return values


def load_settings(
    user_config: Path | list[Path] | None = None,
    *,
    project: Path | None = None,
    environ: Mapping[str, str] | None = None,
    tool_models: Mapping[str, type[ToolSettings]] | None = None,
    **overrides: Any,
) -> Settings:
    """Load and validate the configuration: default.yaml < ``user_config`` (the operator's files, in order) <
    ``project`` (a project's ``ba-mcp.yaml``: whole when the user approved its exact content, else only what
    loosens nothing — S-17) < ``BA_MCP_*`` environment (``environ``, default ``os.environ``) < ``overrides``
    (command-line flags, explicit arguments). ``${VAR}`` is expanded only in what the operator's sources (or an
    approved project file) wrote; the expanded values are kept out of every message (``DatabaseSettings``).

    ``tool_models`` names tools beyond the built-in ones (an embedding application's, a test's) with
    the settings model of each; any other ``tools.<name>`` is an error."""
    environ = os.environ if environ is None else environ
    values = _operator_values(user_config)
    env, origin = environment_values(environ)
    # The operator's plug-ins (their sources only: a project file names none) are enabled before the project file
    # is gated: the gate judges a database's URL by the engines they add.
    operator = _merge(_merge(values, env), {k: v for k, v in overrides.items() if v is not None})
    enabled = _enable_plugins(operator, origin)
    state: ProjectFile | None = None
    if project is not None:
        project = project.absolute()
        data, digest = _read_source(project)
        data, refused = _operator_only(data)
        approved = _approvals().get(str(project))
        if approved == digest:
            state = ProjectFile(project, digest, True, False, [], refused)
        else:
            taken = set(values.get("databases") or {}) | set(env.get("databases") or {})
            data, ignored = _gate_project(data, project.parent, taken)
            state = ProjectFile(project, digest, False, approved is not None, ignored, refused)
        values = _merge(values, data)
    values = _merge(values, env)
    values = _merge(values, {k: v for k, v in overrides.items() if v is not None})
    values = _with_skill_folders(values, enabled)
    written = _expand_database_variables(values, environ, origin)
    moved = _moved_keys(values, origin)
    if moved:
        raise ConfigError("invalid configuration: " + "; ".join(moved))
    try:
        settings = Settings(**values)
    except ValidationError as exc:
        raise ConfigError("invalid configuration: " + "; ".join(_problems(exc, origin))) from None
    settings._tool_models.update(tool_models or {})
    problems = []
    for name, raw in (settings.tools.model_extra or {}).items():
        if name not in registry.tool_names() and name not in settings._tool_models:
            tools = ", ".join([*registry.tool_names(), *settings._tool_models])
            offered = [p.name for p in enabled.plugins if not p.enabled and f"tool {name}" in p.provides]
            also = f"; the installed plug-in {offered[0]} has it: add it to plugins:" if offered else ""
            problems.append(_named(f"tools.{name}", origin) + f": not a tool of this server (tools: {tools}){also}")
            continue
        if not isinstance(raw, dict):
            problems.append(_named(f"tools.{name}", origin) + ": a section of keys (enabled, timeout_s, …)")
            continue
        try:
            settings.tool(name)
        except ValidationError as exc:
            problems += _problems(exc, origin, prefix=f"tools.{name}")
    if problems:
        raise ConfigError("invalid configuration: " + "; ".join(problems))
    for name, (texts, expanded) in written.items():
        if name in settings.databases:
            settings.databases[name]._written = texts
            settings.databases[name]._expanded = expanded
    if state is not None and not state.approved:  # the project's own databases: opened beneath it (S-17)
        for name, conf in (data.get("databases") or {}).items():
            served = settings.databases.get(name)
            url = served.url.get_secret_value() if served is not None and served.url is not None else None
            if served is not None and url == conf.get("url") and served.path == conf.get("path"):
                served._beneath = Path(os.path.realpath(project.parent))  # type: ignore[union-attr]
    settings._project = state
    settings._plugins = enabled.plugins
    return settings


def _enable_plugins(values: dict[str, Any], origin: Mapping[str, str]) -> Loaded:
    """The operator's plug-ins (``plugins:`` of the operator's ``values``: a project file's are refused) read into
    the registry's tables before the project file is gated and the settings are validated — their engines' URL
    schemes and their tools' ``tools.<name>`` are known then."""
    names = values.get("plugins") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"invalid configuration: {_named('plugins', origin)}: a list of installed packages' names")
    return enable_plugins(names)


def _with_skill_folders(values: dict[str, Any], enabled: Loaded) -> dict[str, Any]:
    """``values`` with the loaded plug-ins' skill folders added to ``skills.paths``."""
    if enabled.skill_folders:
        skills = dict(values.get("skills") or {})
        skills["paths"] = [*(skills.get("paths") or []), *enabled.skill_folders]
        values = {**values, "skills": skills}
    return values


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _expand_database_variables(
    values: dict[str, Any], environ: Mapping[str, str], origin: Mapping[str, str]
) -> dict[str, tuple[dict[str, str], list[str]]]:
    """``${VAR}`` in a database's ``url`` and ``options`` is read from the environment now, so no secret need sit
    in a file. A variable that is not set stops the start, naming the key and the variable (never a value). Per
    database: its texts as written (``url``, ``options.<k>``) and the values the variables gave, so that no
    message shows them (S-1, S-11)."""
    problems = []
    written: dict[str, tuple[dict[str, str], list[str]]] = {}
    for name, conf in (values.get("databases") or {}).items():
        if not isinstance(conf, dict):
            continue
        keys: list[tuple[dict[str, Any], str, str]] = [(conf, "url", f"databases.{name}.url")]
        if isinstance(conf.get("options"), dict):
            keys += [(conf["options"], k, f"databases.{name}.options.{k}") for k in conf["options"]]
        for holder, key, dotted in keys:
            text = holder.get(key)
            if not isinstance(text, str) or not _VARIABLE.search(text):
                continue
            missing = [v for v in _VARIABLE.findall(text) if v not in environ]
            if missing:
                problems.append(f"{_named(dotted, origin)}: the environment variable {missing[0]} is not set")
                continue
            texts, expanded = written.setdefault(str(name), ({}, []))
            texts[dotted.removeprefix(f"databases.{name}.")] = text
            expanded += [environ[v] for v in _VARIABLE.findall(text) if environ[v]]
            holder[key] = _VARIABLE.sub(lambda m: environ[m.group(1)], text)
    if problems:
        raise ConfigError("invalid configuration: " + "; ".join(problems))
    return written


def _problems(exc: ValidationError, origin: Mapping[str, str], prefix: str = "") -> list[str]:
    out = []
    for err in exc.errors():
        key = ".".join([prefix, *(str(p) for p in err["loc"])] if prefix else [str(p) for p in err["loc"]])
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        out.append(f"{_named(key or '(root)', origin)}: {msg}")
    return out


def _named(key: str, origin: Mapping[str, str]) -> str:
    """A dotted key, with the environment variable that set it when one did."""
    for dotted, variable in origin.items():
        if key == dotted or key.startswith(dotted + ".") or dotted.startswith(key + "."):
            return f"{key} (from {variable})"
    return key
