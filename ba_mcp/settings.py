"""Settings: the shipped ``config/default.yaml``, an optional user YAML, then ``BA_MCP_*`` variables.

``load_settings()`` is the one entry point. It returns a validated, immutable ``Settings`` or raises
``ConfigError`` whose message names the offending key (``tools.file_reader.timeout_s: …``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

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
    preview_rows: int = Field(10, ge=1, le=200)
    inline_limit_tokens: int = Field(8000, ge=100)
    document_window_tokens: int = Field(2000, ge=50)
    json_budget_tokens: int = Field(1500, ge=50)
    table_encoding: Literal["csv", "markdown", "toon", "json"] = "csv"
    max_cell_chars: int = Field(80, ge=8)


class ArtifactSettings(_Section):
    ttl_hours: float = Field(24, gt=0)
    max_bytes: int = Field(2 * 1024**3, ge=1024 * 1024)
    cleanup_interval_s: float = Field(600, gt=0)
    max_artifact_bytes: int = Field(1024**3, ge=1024)


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
    otlp_endpoint: str | None = None


class FileReaderSettings(_Section):
    max_file_bytes: int = Field(256 * 1024**2, ge=1024)
    max_columns: int = Field(5000, ge=1)
    max_line_bytes: int = Field(8 * 1024**2, ge=1024)
    max_cells: int = Field(20_000_000, ge=1000)
    max_decompressed_bytes: int = Field(256 * 1024**2, ge=1024**2)
    partial_rows: int = Field(10000, ge=1)
    partial_text_bytes: int = Field(1024**2, ge=1024)
    encoding_sample_bytes: int = Field(65536, ge=1024)


class DatabaseSettings(_Section):
    # null: the embedded demo database (generated into data/demo.duckdb on first use)
    path: Path | None = None
    description: str = ""


class QueryDatabaseSettings(_Section):
    max_rows_ceiling: int = Field(100_000, ge=1)
    threads: int = Field(2, ge=1, le=64)
    max_concurrent: int = Field(4, ge=1, le=64)
    memory_limit: str = Field("2GB", pattern=r"^\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$")


class RunPythonSettings(_Section):
    memory_mb: int = Field(4096, ge=256)
    disk_mb: int = Field(1024, ge=16)
    uid: int = Field(65534, ge=1)
    gid: int = Field(65534, ge=1)
    max_workers: int = Field(8, ge=1)
    max_transfer_mb: int = Field(256, ge=1)
    code_store_max_bytes: int = Field(64 * 1024**2, ge=1024**2)
    code_ttl_hours: float = Field(168, gt=0)
    max_processes: int = Field(128, ge=8)
    max_file_mb: int = Field(1024, ge=1)
    cpu_seconds: int = Field(3600, ge=10)
    network: bool = False
    env_allowlist: list[str] = ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"]
    # The shipped list is in config/default.yaml (always loaded); without it nothing may be imported.
    allowed_imports: list[str] | Literal["*"] = []
    max_code_chars: int = Field(1_000_000, ge=1000)
    output_head_chars: int = Field(6_000, ge=100)
    output_tail_chars: int = Field(2_000, ge=0)
    interrupt_grace_s: float = Field(3.0, gt=0)
    spare_workers: int = Field(1, ge=0, le=1)
    idle_timeout_s: float = Field(3600, gt=0)
    start_timeout_s: float = Field(60, gt=0)


class ToolSettings(_Section):
    timeout_s: float = Field(30, gt=0)
    max_timeout_s: float = Field(300, gt=0)
    default_level: LevelName | None = None

    @model_validator(mode="after")
    def _ceiling_covers_default(self) -> ToolSettings:
        if self.max_timeout_s < self.timeout_s:
            raise ValueError("max_timeout_s must be at least timeout_s")
        return self


class Settings(BaseSettings):
    """Every key is documented in ``config/default.yaml``."""

    model_config = SettingsConfigDict(env_prefix="BA_MCP_", env_nested_delimiter="__", extra="forbid", frozen=True)

    workspace: Path | None = None
    default_output_level: LevelName = "standard"
    session_token_budget: int = Field(200_000, ge=1000)
    budget_downgrade_ratio: float = Field(0.8, gt=0, le=1)
    model_family: ModelFamily = "claude"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
    observation: ObservationSettings = ObservationSettings()
    artifacts: ArtifactSettings = ArtifactSettings()
    cache: CacheSettings = CacheSettings()
    retry: RetrySettings = RetrySettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    file_reader: FileReaderSettings = FileReaderSettings()
    query_database: QueryDatabaseSettings = QueryDatabaseSettings()
    run_python: RunPythonSettings = RunPythonSettings()
    databases: dict[str, DatabaseSettings] = {"demo": DatabaseSettings()}
    tools: dict[str, ToolSettings] = {}

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Earlier sources win: the environment overrides the YAML passed in as init values.
        return (env_settings, init_settings)

    def tool(self, name: str) -> ToolSettings:
        """The policy settings of one tool (defaults when the tool is not configured)."""
        return self.tools.get(name) or ToolSettings()

    def workspace_root(self) -> Path:
        """Where the workspace lives: the setting, else the platform's user data directory."""
        if self.workspace is not None:
            return self.workspace.expanduser()
        import platformdirs

        return Path(platformdirs.user_data_dir("ba-mcp", appauthor=False))


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {path.name}: {exc.strerror}") from None
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


def load_settings(user_config: Path | None = None, **overrides: Any) -> Settings:
    """Load and validate the configuration; ``overrides`` (e.g. from the CLI) win over YAML."""
    values = _read_yaml(config_dir() / "default.yaml")
    if user_config is not None:
        values = _merge(values, _read_yaml(user_config))
    values = _merge(values, overrides)
    # BA_MCP_WORKSPACE is documented on its own; pydantic-settings reads it as the `workspace` key.
    try:
        return Settings(**values)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"]) or "(root)"
            msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
            problems.append(f"{key}: {msg}")
        raise ConfigError("invalid configuration: " + "; ".join(problems)) from None
