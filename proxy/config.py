"""The proxy's configuration: ``config.yaml`` read once into typed, frozen objects.

Every section is a pydantic model on the shared
:class:`~memory_core.configuration.ConfigModel` (:class:`Config` is the whole file's
schema and what the proxy reads); an invalid file stops startup with one
:class:`ConfigError` reading ``<file>:<line>: <dotted.key>: <reason>``
(``upstreams[0].provider``), the trigger policy included, inline or in its own file.
Relative paths are resolved against the config file's folder. Environment variables are
read only for upstream keys, and only when a request needs them (see
:meth:`UpstreamConfig.api_key`).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from memory_core import (
    DEFAULT_RECONSTRUCTION,
    STRATEGIES,
    DreamConfig,
    FormationConfig,
    FormationSection,
    GraphSettings,
    ReconstructionConfig,
)
from memory_core.configuration import (
    ConfigModel,
    ConfigurationError,
    Document,
    ListOf,
    Name,
    describe,
    read_yaml_file,
    validate,
)
from policies import DEFAULT_POLICY_PATH, load_policy

from .errors import ConfigError

__all__ = [
    "TENANT_NAME",
    "AuthConfig",
    "ClusterConfig",
    "Config",
    "LoggingConfig",
    "MemoryConfig",
    "ServerConfig",
    "UpstreamConfig",
    "load_config",
]

DEFAULT_PORT = 8787
ANTHROPIC_BASE = "https://api.anthropic.com/v1"
"""Where an ``anthropic`` upstream without ``api_base`` is reached natively."""
DEFAULT_MAX_BODY = 8 * 1024 * 1024
TENANT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


def _path(value: object, info: ValidationInfo) -> object:
    """A string path, resolved against the config file's folder (``context["base"]``)."""
    if not isinstance(value, str):
        return value
    if not value.strip():
        raise ValueError("must be a non-empty path")
    candidate = Path(value).expanduser()
    base = Path(str((info.context or {}).get("base", ".")))
    return candidate if candidate.is_absolute() else (base / candidate).resolve()


def _strategy(name: str) -> str:
    return STRATEGIES.check(name)


def _tenants(value: object, info: ValidationInfo) -> object:
    """Proxy key -> tenant. Errors never quote a key (it is a secret), only the tenant."""
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise ValueError(f"must be a mapping of proxy key: tenant, got {describe(value)}")
    for key, tenant in value.items():
        if not isinstance(key, str) or not key.strip():
            raise ValueError("every proxy key must be a non-empty string")
        if not isinstance(tenant, str) or not TENANT_NAME.fullmatch(tenant):
            shown = tenant[:80] if isinstance(tenant, str) else tenant
            raise ValueError(
                f"tenant {shown!r} must be 1-64 ASCII letters, digits, - _ . "
                "(not starting with . or -): it names the tenant's database file"
            )
    _check_case_distinct(value.values())
    if info.data.get("mode") == "keys" and not value:
        raise ValueError("mode 'keys' needs at least one key: tenant pair")
    return dict(value)


def _check_case_distinct(tenants: Iterable[str]) -> None:
    """Refuse two tenants whose names differ only in case: a tenant's name names its files
    (database, spool folder, lease folder, replica path), which a case-insensitive
    filesystem would make one, each tenant then reading and writing the other's memory."""
    seen: dict[str, str] = {}
    for tenant in sorted(set(tenants)):
        other = seen.setdefault(tenant.casefold(), tenant)
        if other != tenant:
            raise ValueError(
                f"tenants {other!r} and {tenant!r} differ only in case: their files would be "
                "one on a case-insensitive filesystem"
            )


def _policy_location(value: object) -> object:
    if value is None or isinstance(value, str | Mapping):
        return value
    raise ValueError(f"must be a file path or the policy itself (a mapping), got {describe(value)}")


Seconds = Annotated[float, Field(ge=0.01)]


class ServerConfig(ConfigModel):
    """Where the proxy listens and keeps its data."""

    host: Name = "127.0.0.1"
    port: int = Field(DEFAULT_PORT, ge=0, le=65535)
    data_dir: Annotated[Path, BeforeValidator(_path)] = Path("data")
    max_body_bytes: int = Field(DEFAULT_MAX_BODY, ge=1024)
    header_timeout_s: Seconds = 15.0
    """A connection that has not sent a complete request head within this time (or sits
    idle this long between requests) is closed: slow-header clients hold no socket."""
    body_timeout_s: Seconds = 30.0
    """The body must arrive within this time once the head has (else 408)."""
    write_timeout_s: Seconds = 30.0
    """A streamed answer's client must take each chunk within this time, else the
    connection is dropped (a client that stops reading holds nothing)."""
    shutdown_grace_s: Seconds = 10.0
    """On SIGTERM, in-flight requests and work get this long before the process exits."""
    switch_interval_ms: float = Field(0.5, ge=0.01, le=100)
    """How long a thread may hold the interpreter before one that waits gets it
    (``sys.setswitchinterval``; Python's default is 5 ms). The event loop relays answers
    while the lookup, encoding and post-answer threads run Python: at 0.5 ms, memory-on
    streamed requests were 0.6 ms faster at p50 (median of 26 paired rounds of
    ``scripts/bench_overhead.py`` on dev5, 19 of them faster), non-streamed and memory
    off the same."""


class AuthConfig(ConfigModel):
    """``open``: every request is tenant ``default``; ``keys``: proxy key -> tenant."""

    mode: Literal["open", "keys"] = "open"
    keys: Annotated[Mapping[str, str], BeforeValidator(_tenants)] = Field(
        default_factory=dict, validate_default=True
    )
    metrics: Literal["open", "keys"] = "open"
    """``keys``: ``/metrics`` needs one of the proxy keys (a scraper's bearer token)."""

    @model_validator(mode="before")
    @classmethod
    def _keys_imply_mode(cls, value: object) -> object:
        if isinstance(value, Mapping) and "keys" in value and "mode" not in value:
            return {**value, "mode": "keys"}
        return value

    @field_validator("metrics")
    @classmethod
    def _metrics_need_keys(cls, metrics: str, info: ValidationInfo) -> str:
        if metrics == "keys" and info.data.get("mode") != "keys":
            raise ValueError("'keys' needs auth.mode 'keys' (the keys it accepts)")
        return metrics


class UpstreamConfig(ConfigModel):
    """One upstream route: a glob on the requested model name, first match wins."""

    model: Name
    provider: Name
    api_base: Annotated[Name, AfterValidator(lambda url: url.rstrip("/"))] | None = None
    api_key_env: Name | None = None
    fast_path: bool = True
    timeout_s: float = Field(600.0, ge=0.001)
    connect_timeout_s: float = Field(10.0, ge=0.001)
    advertise: ListOf[Name] = ()
    serves: ListOf[Literal["responses", "messages"]] | None = None
    """The APIs besides chat completions the upstream serves itself: a request of one of
    them is forwarded raw (``<api_base>/responses``, ``<api_base>/messages``), any other
    is bridged through chat completions. Default: ``messages`` for provider
    ``anthropic``, none otherwise."""

    @property
    def native_apis(self) -> frozenset[str]:
        """:attr:`serves`, with its default."""
        if self.serves is not None:
            return frozenset(self.serves)
        return frozenset({"messages"}) if self.provider == "anthropic" else frozenset()

    @property
    def native_base(self) -> str | None:
        """The base URL native requests go to: ``api_base``, or Anthropic's own."""
        if self.api_base is not None:
            return self.api_base
        return ANTHROPIC_BASE if self.provider == "anthropic" else None

    @property
    def uses_fast_path(self) -> bool:
        """Raw aiohttp forwarding: only for OpenAI-compatible upstreams with a base URL."""
        return self.fast_path and self.provider == "openai" and self.api_base is not None

    def api_key(self) -> str | None:
        """The upstream key from the environment (never logged)."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None


class MemoryConfig(ConfigModel):
    """How memory is consulted and stored."""

    role: Literal["system", "user"] = "system"
    retrieval_timeout_ms: float = Field(250.0, ge=1)
    ingest: bool = True
    conversation_header: Name = "X-Conversation-Id"
    retrieval: Annotated[str, AfterValidator(_strategy)] = "area"
    """A name in :data:`memory_core.retrieval.strategies.STRATEGIES` (``area`` or ``bm25``)."""
    receipts_keep_days: float = Field(30.0, gt=0, le=36_500)
    """How long a tenant keeps each receipt (pruned as new ones are saved)."""
    formation_grace_ms: float = Field(250.0, ge=0)
    context_turns: int = Field(0, ge=0)
    formation_max_defer_ms: float = Field(5000.0, ge=0)
    max_concurrent_retrievals: int = Field(8, ge=1, le=256)
    """Memory lookups queued or running at once (also the reader threads); a request
    past it goes on without memory at once instead of queueing past its budget. 8: with
    4, 14% of a 50-client load's requests found the gate full (86% served), with 8
    99% (``scripts/load.py --clients 50``), each well inside its 250 ms budget. At most
    256: each is a reader thread."""
    formation_workers: int = Field(0, ge=0, le=64)
    """Formation worker processes (see :mod:`proxy.tenants.workers`); 0 forms in this
    process, on each tenant's formation thread, after a quiet moment (the grace keys)."""
    ingest_wait_ms: float = Field(2000.0, ge=0)
    """How long the end of an answer waits for its exchange to be durably logged (the
    client sees the answer complete only once it is stored); past this it is sent anyway
    and the write goes on."""


class LoggingConfig(ConfigModel):
    """Request log destinations: stdout and ``<data_dir>/logs/proxy.jsonl`` (always JSON
    lines); ``format`` is stdout's (see :data:`proxy.http.request_log.LogFormat`)."""

    stdout: bool = True
    file: bool = True
    format: Literal["auto", "text", "json"] = "auto"


def _replica_root(url: str) -> str:
    """A replica root: ``file:///absolute/path`` (a folder every node mounts) or
    ``s3://bucket/prefix``; leases need ``file://`` (see :mod:`proxy.cluster.leases`)."""
    url = url.rstrip("/")
    if url.startswith("file://"):
        if not url.startswith("file:///"):
            raise ValueError(f"must be file:///absolute/path, got {url!r}")
        return url
    if re.fullmatch(r"s3://[a-z0-9][a-z0-9.-]{1,62}(/[^\s]*)?", url):
        return url
    raise ValueError(f"must be file:///absolute/path or s3://bucket/prefix, got {url!r}")


class ClusterConfig(ConfigModel):
    """This node's place in a cluster (see ``docs/scaling.md``): absent, one node with
    local tenant databases. Present, a tenant is served only under a lease held in the
    replica store, restored from its replica when the node does not hold it, and
    replicated continuously by Litestream."""

    node: Annotated[str, AfterValidator(lambda n: _node_name(n))]
    replica: Annotated[str, AfterValidator(_replica_root)]
    sync_interval_s: float = Field(1.0, gt=0, le=1.0)
    """How often a held tenant's changes are uploaded: what a node's crash can lose at
    most. Litestream uploads a database registered at run time every second; shorter
    intervals are paced by the node (:class:`~proxy.cluster.replication.Litestream`)."""
    lease_ttl_s: float = Field(4.0, gt=0, le=3600)
    """A lease not renewed for this long may be taken: a dead node's tenants move then."""
    lease_renew_s: float = Field(1.0, gt=0, le=600)
    idle_release_s: float = Field(10.0, gt=0)
    """A tenant not served this long has its lease released (the node it hashes to now
    can take it without waiting for an expiry)."""
    litestream_socket: Annotated[Path, BeforeValidator(_path)] | None = None
    """An external Litestream daemon's control socket; none: the node runs its own."""
    restore_timeout_s: float = Field(120.0, gt=0)
    claim_wait_s: float = Field(30.0, gt=0, le=3600)
    """How long a write that must not be lost (``/memory/ingest``, ``/memory/import``)
    waits for this node to hold its tenant before answering 503 ``memory_moving`` with
    ``Retry-After``: another node keeps a tenant it serves until it has been idle for
    its ``idle_release_s``, so the wait had no end while that node was in use."""
    spool_retry_min_s: float = Field(1.0, gt=0, le=3600)
    """How long after a failed replay of a tenant's spooled exchanges (its claim failed or
    waited past ``claim_wait_s``) the node tries again by itself; each further failure
    doubles the wait, up to :attr:`spool_retry_max_s` (:mod:`~proxy.cluster.replays`)."""
    spool_retry_max_s: float = Field(60.0, gt=0, le=3600)
    """The longest wait between two retries of a tenant's spooled exchanges."""
    leases: Annotated[str, AfterValidator(_replica_root)] | None = None
    """Where the leases are: a ``file://`` folder every node mounts (compare-and-swap by
    exclusive create); default: :attr:`replica` when that is a ``file://`` root."""

    @model_validator(mode="after")
    def _timings(self) -> ClusterConfig:
        if self.lease_renew_s * 2 > self.lease_ttl_s:
            raise ValueError("lease_renew_s must be at most half of lease_ttl_s")
        if self.spool_retry_min_s > self.spool_retry_max_s:
            raise ValueError(
                f"spool_retry_min_s ({self.spool_retry_min_s:g}) must be at most "
                f"spool_retry_max_s ({self.spool_retry_max_s:g})"
            )
        if not self.lease_root.startswith("file://"):
            raise ValueError(
                "leases need a file:// folder every node mounts: set cluster.leases"
            )
        return self

    @property
    def lease_root(self) -> str:
        return self.leases or self.replica


def _node_name(name: str) -> str:
    if not TENANT_NAME.fullmatch(name):
        raise ValueError(f"must be 1-64 of A-Z a-z 0-9 _ . -, got {name!r}")
    return name


class Config(ConfigModel):
    """The whole configuration: ``config.yaml`` as written is what the proxy reads
    (``policy``: a file path or the policy itself). :func:`load_config` reads it and sets
    where it came from (:attr:`source`) and where its policy is (:attr:`policy_path`,
    :attr:`policy_key`), which no file can set."""

    server: ServerConfig = ServerConfig()
    auth: AuthConfig = AuthConfig()
    upstreams: ListOf[UpstreamConfig] = Field(min_length=1)
    memory: MemoryConfig = MemoryConfig()
    logging: LoggingConfig = LoggingConfig()
    formation_section: FormationSection = Field(FormationSection(), alias="formation")
    retrieval: GraphSettings = GraphSettings()
    reconstruction: ReconstructionConfig = DEFAULT_RECONSTRUCTION
    dream: DreamConfig = DreamConfig()
    cluster: ClusterConfig | None = None
    policy: Annotated[str | dict[str, Any] | None, BeforeValidator(_policy_location)] = None
    _source: Path = PrivateAttr(default_factory=Path)
    _policy_path: Path = PrivateAttr(default_factory=lambda: Path(DEFAULT_POLICY_PATH))
    _policy_key: str | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _cluster_forms_in_process(self) -> Config:
        """A node that loses a tenant closes its store at once; a worker process forming
        it could not be stopped as surely, so a cluster node forms in its own process."""
        if self.cluster is not None and self.memory.formation_workers:
            raise ValueError(
                "a cluster node forms in its own process: memory.formation_workers must be 0"
            )
        return self

    @functools.cached_property
    def formation(self) -> FormationConfig:
        """The formation settings the ``formation:`` section describes."""
        return self.formation_section.config()

    @property
    def source(self) -> Path:
        """The file this configuration was read from."""
        return self._source

    @property
    def policy_path(self) -> Path:
        """The file the trigger policy is read from (this one with :attr:`policy_key`)."""
        return self._policy_path

    @property
    def policy_key(self) -> str | None:
        """The key of :attr:`policy_path` that holds the policy (None: the whole file)."""
        return self._policy_key

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
    log_format: str | None = None,
) -> Config:
    """Read and validate ``path`` (and the policy it names); command-line values override
    the file's. Every problem is a :class:`ConfigError` with its file, line and key."""
    source = Path(path).resolve()
    try:
        document = read_yaml_file(str(source))
        raw = _overridden(document.value, host, port, data_dir, log_format)
        config = validate(Config, raw, document, context={"base": source.parent})
        policy_path, policy_key = _policy(config.policy, document, source)
        load_policy(str(policy_path), root_key=policy_key)
    except ConfigurationError as exc:
        raise ConfigError(exc.file or str(source), exc.key, exc.reason, line=exc.line) from exc
    config._source, config._policy_path, config._policy_key = source, policy_path, policy_key
    return config


def _overridden(
    value: object,
    host: str | None,
    port: int | None,
    data_dir: str | Path | None,
    log_format: str | None = None,
) -> object:
    """The document with the command line's server values in place of the file's."""
    if value is None:
        value = {}
    if not isinstance(value, Mapping) or not isinstance(value.get("server") or {}, Mapping):
        return value
    server = dict(value.get("server") or {})
    overrides = {"host": host, "port": port}
    server.update({key: v for key, v in overrides.items() if v is not None})
    if data_dir is not None:  # a blank one is left for the check that refuses it
        blank = isinstance(data_dir, str) and not data_dir.strip()
        server["data_dir"] = data_dir if blank else Path(data_dir).resolve()
    logging = value.get("logging")
    if log_format is not None and isinstance(logging or {}, Mapping):
        return {**value, "server": server, "logging": {**(logging or {}), "format": log_format}}
    return {**value, "server": server}


def _policy(location: object, document: Document, source: Path) -> tuple[Path, str | None]:
    """Where the policy is: its own file, or the ``policy`` key of this one."""
    if location is None:
        return Path(DEFAULT_POLICY_PATH), None
    if isinstance(location, str):
        candidate = Path(location).expanduser()
        path = candidate if candidate.is_absolute() else (source.parent / candidate).resolve()
        if not path.is_file():
            raise document.error(("policy",), f"policy file {path} does not exist")
        return path, None
    return source, "policy"
