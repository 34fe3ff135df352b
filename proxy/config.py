"""The proxy's configuration: ``config.yaml`` read once into typed, frozen objects.

Every key is checked; an invalid file stops startup with the file, the key (a dotted
path such as ``upstreams[0].provider``) and the reason. Relative paths are resolved
against the config file's folder. Environment variables are read only for upstream keys,
and only when a request needs them (see :meth:`UpstreamConfig.api_key`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from memory_core.formation import FormationConfig, FormationConfigError, parse_formation
from memory_core.graph import GraphConfigError, GraphSettings, parse_graph_settings
from policies import DEFAULT_POLICY_PATH

from .errors import ConfigError

__all__ = [
    "AuthConfig",
    "Config",
    "LoggingConfig",
    "MemoryConfig",
    "ServerConfig",
    "UpstreamConfig",
    "load_config",
]

DEFAULT_PORT = 8787
DEFAULT_MAX_BODY = 8 * 1024 * 1024
_TENANT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class ServerConfig:
    """Where the proxy listens and keeps its data."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    data_dir: Path = Path("data")
    max_body_bytes: int = DEFAULT_MAX_BODY
    header_timeout_s: float = 15.0
    """A connection that has not sent a complete request head within this time (or sits
    idle this long between requests) is closed: slow-header clients hold no socket."""
    body_timeout_s: float = 30.0
    """The body must arrive within this time once the head has (else 408)."""
    write_timeout_s: float = 30.0
    """A streamed answer's client must take each chunk within this time, else the
    connection is dropped (a client that stops reading holds nothing)."""
    shutdown_grace_s: float = 10.0
    """On SIGTERM, in-flight requests and work get this long before the process exits."""


@dataclass(frozen=True)
class AuthConfig:
    """``open``: every request is tenant ``default``; ``keys``: proxy key -> tenant."""

    mode: Literal["open", "keys"] = "open"
    keys: Mapping[str, str] = field(default_factory=dict)
    metrics: Literal["open", "keys"] = "open"
    """``keys``: ``/metrics`` needs one of the proxy keys (a scraper's bearer token)."""


@dataclass(frozen=True)
class UpstreamConfig:
    """One upstream route: a glob on the requested model name, first match wins."""

    model: str
    provider: str
    api_base: str | None = None
    api_key_env: str | None = None
    fast_path: bool = True
    timeout_s: float = 600.0
    connect_timeout_s: float = 10.0
    advertise: tuple[str, ...] = ()

    @property
    def uses_fast_path(self) -> bool:
        """Raw aiohttp forwarding: only for OpenAI-compatible upstreams with a base URL."""
        return self.fast_path and self.provider == "openai" and self.api_base is not None

    def api_key(self) -> str | None:
        """The upstream key from the environment (never logged)."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None


@dataclass(frozen=True)
class MemoryConfig:
    """How memory is consulted and stored."""

    role: Literal["system", "user"] = "system"
    retrieval_timeout_ms: float = 250.0
    ingest: bool = True
    conversation_header: str = "X-Conversation-Id"
    retrieval: Literal["bm25", "area"] = "area"
    formation_grace_ms: float = 250.0
    context_turns: int = 0
    formation_max_defer_ms: float = 5000.0
    max_concurrent_retrievals: int = 4
    """Memory lookups queued or running at once (also the reader threads); a request
    past it goes on without memory at once instead of queueing past its budget."""
    ingest_wait_ms: float = 2000.0
    """How long the end of an answer waits for its exchange to be durably logged (the
    client sees the answer complete only once it is stored); past this it is sent anyway
    and the write goes on."""


@dataclass(frozen=True)
class LoggingConfig:
    """Request log destinations: stdout and ``<data_dir>/logs/proxy.jsonl``."""

    stdout: bool = True
    file: bool = True


@dataclass(frozen=True)
class Config:
    """The whole configuration. ``policy_path`` + ``policy_key`` locate the policy YAML."""

    source: Path
    server: ServerConfig
    auth: AuthConfig
    upstreams: tuple[UpstreamConfig, ...]
    memory: MemoryConfig
    logging: LoggingConfig
    policy_path: Path
    policy_key: str | None
    formation: FormationConfig = field(default_factory=FormationConfig)
    retrieval: GraphSettings = field(default_factory=GraphSettings)

    @property
    def log_file(self) -> Path:
        """The JSON-lines request log."""
        return self.server.data_dir / "logs" / "proxy.jsonl"


def load_config(
    path: str | Path,
    *,
    host: str | None = None,
    port: int | None = None,
    data_dir: str | Path | None = None,
) -> Config:
    """Read and validate ``path``; command-line values override the file's."""
    source = Path(path).resolve()
    try:
        doc = yaml.safe_load(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(str(source), "", f"cannot read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(str(source), "", f"invalid YAML: {exc}") from exc
    reader = _Reader(str(source), source.parent)
    root = reader.mapping(doc if doc is not None else {}, "")
    reader.only(
        root,
        "",
        {"server", "auth", "upstreams", "memory", "logging", "policy", "formation", "retrieval"},
    )
    server = reader.server(root.get("server"), host, port, data_dir)
    policy_path, policy_key = reader.policy(root.get("policy"), source)
    return Config(
        source=source,
        server=server,
        auth=reader.auth(root.get("auth")),
        upstreams=reader.upstreams(root.get("upstreams")),
        memory=reader.memory(root.get("memory")),
        logging=reader.logging(root.get("logging")),
        policy_path=policy_path,
        policy_key=policy_key,
        formation=reader.formation(root.get("formation")),
        retrieval=reader.retrieval(root.get("retrieval")),
    )


class _Reader:
    """Typed reads from parsed YAML that fail with the file, dotted key and reason."""

    def __init__(self, file: str, base: Path) -> None:
        self.file, self.base = file, base

    def fail(self, key: str, reason: str) -> ConfigError:
        return ConfigError(self.file, key or "(top level)", reason)

    def mapping(self, value: Any, key: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(key, f"must be a mapping, got {type(value).__name__}")
        return value

    def only(self, value: Mapping[str, Any], key: str, allowed: set[str]) -> None:
        unknown = sorted(set(map(str, value)) - allowed)
        if unknown:
            where = f"{key}." if key else ""
            raise self.fail(
                f"{where}{unknown[0]}", f"unknown key (allowed: {', '.join(sorted(allowed))})"
            )

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, "must be a non-empty string")
        return value

    def number(self, value: Any, key: str, *, minimum: float, integer: bool = False) -> Any:
        kinds = (int,) if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds) or value < minimum:
            kind = "an integer" if integer else "a number"
            raise self.fail(key, f"must be {kind} >= {minimum}, got {value!r}")
        return value

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {value!r}")
        return value

    def path(self, value: Any, key: str) -> Path:
        candidate = Path(self.string(value, key)).expanduser()
        return candidate if candidate.is_absolute() else (self.base / candidate).resolve()

    def server(self, value: Any, host: str | None, port: int | None, data_dir: Any) -> ServerConfig:
        raw = self.mapping(value, "server")
        self.only(
            raw,
            "server",
            {
                "host",
                "port",
                "data_dir",
                "max_body_bytes",
                "header_timeout_s",
                "body_timeout_s",
                "shutdown_grace_s",
                "write_timeout_s",
            },
        )
        default = ServerConfig()
        port_value = port if port is not None else raw.get("port", default.port)
        return ServerConfig(
            host=host or self.string(raw.get("host", default.host), "server.host"),
            port=self.number(port_value, "server.port", minimum=0, integer=True),
            data_dir=Path(data_dir).resolve()
            if data_dir is not None
            else self.path(raw.get("data_dir", str(default.data_dir)), "server.data_dir"),
            max_body_bytes=self.number(
                raw.get("max_body_bytes", default.max_body_bytes),
                "server.max_body_bytes",
                minimum=1024,
                integer=True,
            ),
            header_timeout_s=self._seconds(raw, "header_timeout_s", default.header_timeout_s),
            body_timeout_s=self._seconds(raw, "body_timeout_s", default.body_timeout_s),
            shutdown_grace_s=self._seconds(raw, "shutdown_grace_s", default.shutdown_grace_s),
            write_timeout_s=self._seconds(raw, "write_timeout_s", default.write_timeout_s),
        )

    def _seconds(self, raw: Mapping[str, Any], name: str, default: float) -> float:
        return float(self.number(raw.get(name, default), f"server.{name}", minimum=0.01))

    def auth(self, value: Any) -> AuthConfig:
        raw = self.mapping(value, "auth")
        self.only(raw, "auth", {"mode", "keys", "metrics"})
        mode = raw.get("mode", "keys" if "keys" in raw else "open")
        if mode not in ("open", "keys"):
            raise self.fail("auth.mode", f"must be 'open' or 'keys', got {mode!r}")
        metrics = raw.get("metrics", "open")
        if metrics not in ("open", "keys") or (metrics == "keys" and mode != "keys"):
            raise self.fail(
                "auth.metrics", f"must be 'open' or (with mode keys) 'keys', got {metrics!r}"
            )
        keys = self.mapping(raw.get("keys"), "auth.keys")
        if mode == "keys" and not keys:
            raise self.fail("auth.keys", "mode 'keys' needs at least one key: tenant pair")
        tenants = {}
        for key, tenant in keys.items():
            name = self.string(tenant, "auth.keys.<key>")
            if not _TENANT.fullmatch(name):
                raise self.fail(
                    "auth.keys.<key>",
                    f"tenant {name[:80]!r} must be 1-64 ASCII letters, digits, - _ . "
                    "(not starting with . or -): it names the tenant's database file",
                )
            tenants[self.string(key, "auth.keys")] = name
        return AuthConfig(mode=mode, keys=tenants, metrics=metrics)

    def upstreams(self, value: Any) -> tuple[UpstreamConfig, ...]:
        if not isinstance(value, list) or not value:
            raise self.fail("upstreams", "must be a non-empty list of upstream routes")
        return tuple(self.upstream(item, f"upstreams[{i}]") for i, item in enumerate(value))

    def upstream(self, value: Any, key: str) -> UpstreamConfig:
        raw = self.mapping(value, key)
        allowed = {
            "model",
            "provider",
            "api_base",
            "api_key_env",
            "fast_path",
            "timeout_s",
            "connect_timeout_s",
            "advertise",
        }
        self.only(raw, key, allowed)
        default = UpstreamConfig(model="*", provider="openai")
        advertise = raw.get("advertise", [])
        if not isinstance(advertise, list):
            raise self.fail(f"{key}.advertise", "must be a list of model names")
        api_base = raw.get("api_base")
        return UpstreamConfig(
            model=self.string(raw.get("model"), f"{key}.model"),
            provider=self.string(raw.get("provider"), f"{key}.provider"),
            api_base=None
            if api_base is None
            else self.string(api_base, f"{key}.api_base").rstrip("/"),
            api_key_env=None
            if raw.get("api_key_env") is None
            else self.string(raw["api_key_env"], f"{key}.api_key_env"),
            fast_path=self.boolean(raw.get("fast_path", default.fast_path), f"{key}.fast_path"),
            timeout_s=self.number(
                raw.get("timeout_s", default.timeout_s), f"{key}.timeout_s", minimum=0.001
            ),
            connect_timeout_s=self.number(
                raw.get("connect_timeout_s", default.connect_timeout_s),
                f"{key}.connect_timeout_s",
                minimum=0.001,
            ),
            advertise=tuple(self.string(m, f"{key}.advertise") for m in advertise),
        )

    def memory(self, value: Any) -> MemoryConfig:
        raw = self.mapping(value, "memory")
        self.only(
            raw,
            "memory",
            {
                "role",
                "retrieval_timeout_ms",
                "ingest",
                "conversation_header",
                "retrieval",
                "formation_grace_ms",
                "formation_max_defer_ms",
                "context_turns",
                "ingest_wait_ms",
                "max_concurrent_retrievals",
            },
        )
        default = MemoryConfig()
        role = raw.get("role", default.role)
        if role not in ("system", "user"):
            raise self.fail("memory.role", f"must be 'system' or 'user', got {role!r}")
        retrieval = raw.get("retrieval", default.retrieval)
        if retrieval not in ("bm25", "area"):
            raise self.fail("memory.retrieval", f"must be 'bm25' or 'area', got {retrieval!r}")
        return MemoryConfig(
            role=role,
            retrieval=retrieval,
            retrieval_timeout_ms=self.number(
                raw.get("retrieval_timeout_ms", default.retrieval_timeout_ms),
                "memory.retrieval_timeout_ms",
                minimum=1,
            ),
            ingest=self.boolean(raw.get("ingest", default.ingest), "memory.ingest"),
            context_turns=self.number(
                raw.get("context_turns", default.context_turns),
                "memory.context_turns",
                minimum=0,
                integer=True,
            ),
            formation_grace_ms=self.number(
                raw.get("formation_grace_ms", default.formation_grace_ms),
                "memory.formation_grace_ms",
                minimum=0,
            ),
            formation_max_defer_ms=self.number(
                raw.get("formation_max_defer_ms", default.formation_max_defer_ms),
                "memory.formation_max_defer_ms",
                minimum=0,
            ),
            max_concurrent_retrievals=self.number(
                raw.get("max_concurrent_retrievals", default.max_concurrent_retrievals),
                "memory.max_concurrent_retrievals",
                minimum=1,
                integer=True,
            ),
            ingest_wait_ms=self.number(
                raw.get("ingest_wait_ms", default.ingest_wait_ms),
                "memory.ingest_wait_ms",
                minimum=0,
            ),
            conversation_header=self.string(
                raw.get("conversation_header", default.conversation_header),
                "memory.conversation_header",
            ),
        )

    def logging(self, value: Any) -> LoggingConfig:
        raw = self.mapping(value, "logging")
        self.only(raw, "logging", {"stdout", "file"})
        return LoggingConfig(
            stdout=self.boolean(raw.get("stdout", True), "logging.stdout"),
            file=self.boolean(raw.get("file", True), "logging.file"),
        )

    def formation(self, value: Any) -> FormationConfig:
        try:
            return parse_formation(value)
        except FormationConfigError as exc:
            raise self.fail(exc.key, exc.reason) from exc

    def retrieval(self, value: Any) -> GraphSettings:
        try:
            return parse_graph_settings(self.mapping(value, "retrieval"), "retrieval")
        except GraphConfigError as exc:
            raise self.fail(exc.key, exc.reason) from exc

    def policy(self, value: Any, source: Path) -> tuple[Path, str | None]:
        if value is None:
            return Path(DEFAULT_POLICY_PATH), None
        if isinstance(value, str):
            path = self.path(value, "policy")
            if not path.is_file():
                raise self.fail("policy", f"policy file {path} does not exist")
            return path, None
        self.mapping(value, "policy")
        return source, "policy"
