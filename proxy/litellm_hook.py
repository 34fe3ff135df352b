"""Memory inside a LiteLLM proxy: a callback that LiteLLM loads from its own config.

LiteLLM's proxy config names it (``AREAMEM_CONFIG`` names an areamem ``config.yaml``)::

    litellm_settings:
      callbacks: ["proxy.litellm_hook.memory_hook"]

For each chat completion the hook runs the memory turn areamem's own proxy runs
(:mod:`proxy.chat.turn`: decide, recall, inject, ingest), in LiteLLM's process: the
tenant comes from LiteLLM's key (:func:`tenant_of_key`), the trigger policy decides
(hot-reloaded, checked at most once a second), memory is recalled on a reader thread
within ``memory.retrieval_timeout_ms`` (less what LiteLLM's event loop runs late by) and
injected as one message immediately before the last user message
(:func:`proxy.doors.chat_wire.inject`); after a successful answer, streamed or not, the
request's messages and the answer are appended to the tenant's log (``source="litellm"``)
and formed in the background (:class:`proxy.tenants.memory.Tenants`: one store per
tenant, opened once and kept; formation on the tenant's formation thread, in this
process: ``memory.formation_workers`` is not used). A failed call stores nothing. Memory
never breaks a call: any failure (configuration, tenant, store, lookup, timeout, a header
naming no snapshot) is logged and the call goes on without memory.

What the areamem config provides here: ``server.data_dir`` (tenant databases in
``<data_dir>/tenants/<tenant>.db``, the log in ``<data_dir>/logs/litellm.jsonl``),
``memory``, ``formation``, ``retrieval``, ``reconstruction``, ``dream``, ``logging`` and the
policy; ``auth`` and ``upstreams`` are LiteLLM's business (the format still requires one
upstream entry). It is read on the first call, not at import, and the formation models
load then on a worker thread: calls that come before they are ready go on without memory
(their exchanges are still stored).

Unlike areamem's proxy, the exchange is logged just *after* LiteLLM has answered (its
success event), not before the answer completes: a process killed in between loses it.

Importing this module reads nothing and imports no litellm: ``memory_hook`` (the
``CustomLogger`` instance) is built on first access (PEP 562), when LiteLLM loads it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_core import build_backends, conversation_id
from policies import PolicyEngine, PolicyError, PolicyStore

from .api.json_io import snapshot_id
from .chat.ingest import store_turn
from .chat.turn import AS_OF_HEADER, MEMORY_HEADER, MemoryTurn, TurnServices
from .config import TENANT_NAME, Config, load_config
from .doors.chat_wire import ChatRequest, answer_from_json, inject
from .errors import ApiError
from .http.body import check_conversation_id
from .http.lag import LoopLag
from .http.request_log import RequestLog
from .tenants.pool import Tenants, tenants_of

__all__ = [
    "CONFIG_ENV",
    "TENANT_METADATA_KEY",
    "InvalidTenantError",
    "MemoryCallbacks",
    "tenant_of_key",
]

CONFIG_ENV = "AREAMEM_CONFIG"
"""The environment variable naming the areamem ``config.yaml`` (read on the first call)."""
TENANT_METADATA_KEY = "areamem_tenant"
"""The key of a LiteLLM key's metadata that names its tenant."""
LOG_FILE = "litellm.jsonl"
"""The hook's per-call log, in ``<data_dir>/logs/`` (areamem's proxy writes proxy.jsonl)."""

_CHAT_CALLS = frozenset({"completion", "acompletion"})
_POLICY_CHECK_S = 1.0
_MAX_PENDING = 10_000
"""Calls between the pre-call hook and their success or failure event that are kept; the
oldest is forgotten past it (a call LiteLLM never reported back, say)."""
_HEADERS = ("proxy_server_request", "metadata")

logger = logging.getLogger(__name__)


class InvalidTenantError(ValueError):
    """The tenant a LiteLLM key names cannot name a database file."""


def tenant_of_key(key: object) -> str:
    """The tenant of a LiteLLM key (``UserAPIKeyAuth``): the first of these that is set
    wins: its metadata's ``areamem_tenant``, its alias, its team id; else ``default``.

    The winner must be 1-64 ASCII letters, digits, ``-``, ``_``, ``.`` (not starting with
    ``.`` or ``-``), as tenants in ``config.yaml``: it names the tenant's file. An invalid
    one raises :class:`InvalidTenantError`; it never falls through to the next source,
    which would put the key's memory in another tenant's file.
    """
    metadata = getattr(key, "metadata", None)
    named = metadata.get(TENANT_METADATA_KEY) if isinstance(metadata, Mapping) else None
    sources = (
        (f"metadata {TENANT_METADATA_KEY}", named),
        ("key alias", getattr(key, "key_alias", None)),
        ("team id", getattr(key, "team_id", None)),
    )
    for source, value in sources:
        if value is None or value == "":
            continue
        if isinstance(value, str) and TENANT_NAME.fullmatch(value):
            return value
        shown = value[:80] if isinstance(value, str) else type(value).__name__
        raise InvalidTenantError(
            f"the key's {source} {shown!r} cannot name a tenant: 1-64 ASCII letters, digits,"
            f" - _ . (not starting with . or -); set {TENANT_METADATA_KEY} in its metadata"
        )
    return "default"


@dataclass
class _Memory:
    """What the hook needs once the config is read: built on a worker thread."""

    config: Config
    tenants: Tenants
    policies: PolicyStore
    engine: PolicyEngine
    log: RequestLog
    lag: LoopLag = field(default_factory=LoopLag)
    """How late LiteLLM's event loop runs (sampled once memory is ready)."""
    checked: float = 0.0

    def check_policy(self) -> None:
        """Hot reload: at most one ``stat`` of the policy file per second."""
        now = time.monotonic()
        if now - self.checked >= _POLICY_CHECK_S:
            self.checked = now
            self.policies.check()

    def turns(self, keep: Callable[[Awaitable[Any]], None]) -> TurnServices:
        """What each call's memory turn uses here: no metrics (LiteLLM has its own),
        failures logged by the turn's caller, background work kept by ``keep``."""

        def spawn(work: Coroutine[Any, Any, Any]) -> None:
            keep(work)

        def watch(tenant: str, pending: asyncio.Future[int]) -> None:
            keep(_formation(tenant, pending))

        return TurnServices(
            tenants=self.tenants,
            engine=self.engine,
            settings=self.config.memory,
            lag=self.lag,
            log=self.log.write,
            spawn=spawn,
            watch_formation=watch,
            source="litellm",
        )


def _build(path: str) -> _Memory:
    """Read the config and open what memory needs (slow: loads the formation models)."""
    config = load_config(path)
    config.server.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    log_file = config.server.data_dir / "logs" / LOG_FILE
    log = RequestLog(log_file if config.logging.file else None, stdout=config.logging.stdout)

    def policy_failed(error: PolicyError) -> None:
        logger.error("areamem policy reload failed, previous policy kept: %s", error)
        log.write({"event": "policy_reload_failed", "file": error.file, "line": error.line,
                   "error": error.message, "kept": "previous policy"})  # fmt: skip

    policies = PolicyStore(str(config.policy_path), root_key=config.policy_key,
                           on_error=policy_failed)  # fmt: skip
    tenants = tenants_of(config, build_backends(config.formation), events=log.write)
    tenants.warm_up(())  # the encoder and tokenizers, before a question waits for them
    return _Memory(config, tenants, policies, PolicyEngine(lambda: policies.current), log)


@dataclass
class _Call:
    """One chat call between its pre-call hook and its success or failure event."""

    began: float
    model: str
    stream: bool
    chat: ChatRequest
    headers: Mapping[str, str]
    tenant: str | None = None
    ingest: bool = False
    turn: MemoryTurn | None = None
    memory_error: str | None = None
    """Why memory was left out before the call had a turn (starting, tenant, setup)."""
    stages: dict[str, float] = field(default_factory=dict)

    def fail(self, stage: str, exc: BaseException | str) -> None:
        """Note a memory failure (the call goes on without memory) and log it."""
        text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        error = f"{stage}: {text}"
        if self.turn is not None:
            self.turn.memory_error = error
        else:
            self.memory_error = error
        logger.warning("areamem memory skipped (tenant %s): %s", self.tenant, error)

    def summary(self) -> dict[str, Any]:
        """The decision and what was injected: the log line's and the receipt's fields."""
        if self.turn is not None:
            return self.turn.summary()
        return {"tenant": self.tenant, "decision": None, "reason": None, "rule": None,
                "fragments_injected": 0, "fragments_cited": 0, "memory_tokens": 0,
                "memory_error": self.memory_error}  # fmt: skip


class MemoryCallbacks:
    """The hook's work, free of litellm's types: LiteLLM's ``CustomLogger`` adapter
    (``memory_hook``) calls :meth:`before_call`, :meth:`after_success` and
    :meth:`after_failure` from its event loop. Never raises.

    ``config_path`` defaults to the ``AREAMEM_CONFIG`` environment variable, read on the
    first call.
    """

    def __init__(self, config_path: str | Path | None = None) -> None:
        self._config_path = str(config_path) if config_path is not None else None
        self._setup: Future[_Memory] | None = None
        self._turns: TurnServices | None = None
        self._calls: OrderedDict[str, _Call] = OrderedDict()
        self._background: set[asyncio.Future[Any]] = set()

    # -- before the call -------------------------------------------------------------

    async def before_call(
        self, key: object, data: dict[str, Any], call_type: str
    ) -> dict[str, Any]:
        """Decide, recall and inject for a chat call; ``data`` with its messages replaced
        when memory is injected. Other calls, and any failure, leave ``data`` as it was."""
        if call_type not in _CHAT_CALLS:
            return data
        try:
            return await self._before_chat(key, data)
        except Exception as exc:  # memory never breaks a call
            logger.exception("areamem pre-call hook failed: %s", exc)
            return data

    async def _before_chat(self, key: object, data: dict[str, Any]) -> dict[str, Any]:
        chat = _chat_request(data)
        call_id = data.get("litellm_call_id")
        if chat is None or not isinstance(call_id, str):
            return data
        call = _Call(time.perf_counter(), chat.model, chat.stream, chat, _headers(data))
        self._remember(call_id, call)
        try:
            await self._consult(call, data, key)
        finally:
            _receipt(data, call)
        return data

    async def _consult(self, call: _Call, data: dict[str, Any], key: object) -> None:
        """Tenant, then the memory turn: policy, recall and injection into ``data``."""
        try:
            call.tenant = tenant_of_key(key)
        except InvalidTenantError as exc:
            call.fail("tenant", str(exc))
            return
        call.ingest = (call.headers.get(MEMORY_HEADER.lower()) or "").strip().lower() != "off"
        memory = self._ready(call)
        if memory is None:
            return  # still stored, once memory is ready
        turn = call.turn = self._turn(memory, call)
        opened = await turn.open()
        if opened is not None:
            opened.note_request()
        memory.check_policy()
        decision = turn.decide()
        try:
            await turn.read_as_of(call.headers.get(AS_OF_HEADER.lower()), _snapshot_header)
        except ApiError as exc:
            call.fail("as_of", exc.message)
            return
        began = time.perf_counter()
        if decision.retrieve:
            await turn.recall_memory()
            call.stages["retrieval_ms"] = _ms(began)
        if turn.memory_error is not None:
            logger.warning("areamem memory skipped (tenant %s): %s", call.tenant,
                           turn.memory_error)  # fmt: skip
        block = turn.block
        if block is not None:
            data["messages"] = inject(call.chat, block, memory.config.memory.role)

    def _turn(self, memory: _Memory, call: _Call) -> MemoryTurn:
        """The call's memory turn (its conversation as the whole history names it)."""
        assert call.tenant is not None
        if self._turns is None:
            self._turns = memory.turns(self._keep)
            self._keep(memory.lag.watch())
        settings = memory.config.memory
        explicit = _conversation(call.headers, settings.conversation_header)
        turn = MemoryTurn(
            self._turns,
            call.tenant,
            call.chat,
            conversation_id(call.chat.messages, explicit),
            explicit,
            call.headers.get(MEMORY_HEADER.lower()),
        )
        turn.ingest = call.ingest and settings.ingest
        return turn

    def _remember(self, call_id: str, call: _Call) -> None:
        self._calls[call_id] = call
        while len(self._calls) > _MAX_PENDING:
            self._calls.popitem(last=False)

    def _ready(self, call: _Call) -> _Memory | None:
        """Memory once the config is read and the models loaded (begun by the first call,
        on a worker thread); None while that is under way or when it failed (logged)."""
        setup = self._start()
        if not setup.done():
            call.memory_error = "memory is starting: the formation models are loading"
            return None
        if setup.exception() is not None:
            call.memory_error = "memory is off: the areamem configuration failed (see log)"
            return None
        return setup.result()

    def _start(self) -> Future[_Memory]:
        if self._setup is None:
            path = self._config_path or os.environ.get(CONFIG_ENV, "")
            self._setup = Future()
            self._setup.add_done_callback(_report_setup)
            if not path:
                self._setup.set_exception(LookupError(f"{CONFIG_ENV} is not set"))
            else:
                threading.Thread(
                    target=_settle, args=(self._setup, path), name="areamem-setup", daemon=True
                ).start()
        return self._setup

    # -- after the call --------------------------------------------------------------

    async def after_success(self, kwargs: Mapping[str, Any], response: object) -> None:
        """Store the call's messages and its answer, then form them, in the background:
        LiteLLM gives its success callbacks 20 s, and a call made while memory was
        loading waits for it before it is stored."""
        call = self._calls.pop(str(kwargs.get("litellm_call_id")), None)
        if call is not None:
            self._keep(self._store(call, response))

    async def _store(self, call: _Call, response: object) -> None:
        ingested = 0
        try:
            ingested = await self._ingest(call, response)
        except Exception as exc:  # never raised into LiteLLM's logging
            call.fail("ingest", exc)
        self._log(call, "ok", ingested)

    async def after_failure(self, kwargs: Mapping[str, Any]) -> None:
        """A failed call: nothing is stored; its line is logged."""
        call = self._calls.pop(str(kwargs.get("litellm_call_id")), None)
        if call is not None:
            self._log(call, "error", 0)

    async def _ingest(self, call: _Call, response: object) -> int:
        if not call.ingest or call.tenant is None or self._setup is None:
            return 0
        try:  # a call made while memory was loading waits for it here
            memory = await asyncio.shield(asyncio.wrap_future(self._setup))
        except Exception:  # memory is off, said once when its setup failed
            return 0
        turn = call.turn or self._turn(memory, call)  # made while memory was loading
        return await store_turn(turn, turn.history(_answer(response)))

    def _keep(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _log(self, call: _Call, outcome: str, ingested: int) -> None:
        call.stages["total_ms"] = _ms(call.began)
        conversation = call.turn.conversation if call.turn is not None else None
        record = {"event": "chat", "source": "litellm", **call.summary(),
                  "model": call.model, "stream": call.stream, "conversation": conversation,
                  "outcome": outcome, "stages_ms": call.stages, "ingested": ingested}  # fmt: skip
        setup = self._setup
        if setup is not None and setup.done() and setup.exception() is None:
            setup.result().log.write(record)
        else:
            logger.info("areamem %s", json.dumps(record, default=str))


def _settle(target: Future[_Memory], path: str) -> None:
    if not target.set_running_or_notify_cancel():
        return
    try:
        target.set_result(_build(path))
    except BaseException as exc:
        target.set_exception(exc)


def _report_setup(setup: Future[_Memory]) -> None:
    exc = setup.exception() if not setup.cancelled() else None
    if exc is not None:
        logger.error("areamem memory is off for this process: %s: %s", type(exc).__name__, exc)


async def _formation(tenant: str, pending: asyncio.Future[int]) -> None:
    """Wait for a background formation pass; a failure is logged (its rows stay queued
    and the next pass retries them)."""
    try:
        await pending
    except Exception as exc:
        logger.warning("areamem formation failed for tenant %s: %s", tenant, exc)


def _chat_request(data: Mapping[str, Any]) -> ChatRequest | None:
    """The call as :mod:`proxy.doors.chat_wire` sees a chat request, or None when its messages are
    not a list of role-bearing objects with a user message (then memory keeps out)."""
    messages, model = data.get("messages"), data.get("model")
    if not isinstance(messages, list) or not isinstance(model, str):
        return None
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        return None
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    if last_user < 0:
        return None
    return ChatRequest(dict(data), model, data.get("stream") is True, messages, last_user)


def _headers(data: Mapping[str, Any]) -> dict[str, str]:
    """The client's request headers as LiteLLM keeps them, names lower-cased."""
    for holder in _HEADERS:
        section = data.get(holder)
        headers = section.get("headers") if isinstance(section, Mapping) else None
        if isinstance(headers, Mapping):
            return {str(k).lower(): str(v) for k, v in headers.items()}
    return {}


def _conversation(headers: Mapping[str, str], name: str) -> str | None:
    """The client's explicit conversation id (``memory.conversation_header``), or None
    when absent or not one (the call goes on; its conversation is then derived)."""
    value = headers.get(name.lower(), "").strip()
    if not value:
        return None
    try:
        return check_conversation_id(value, f"header {name}")
    except ApiError:
        logger.warning("areamem ignored an invalid %s header", name)
        return None


def _snapshot_header(value: str) -> int:
    return snapshot_id(value, f"header {AS_OF_HEADER}", AS_OF_HEADER)


def _answer(response: object) -> dict[str, Any] | None:
    """The assistant message (choice 0) of LiteLLM's response (a ``ModelResponse``, the
    whole of a stream assembled), as :func:`proxy.doors.chat_wire.answer_from_json` reads it."""
    dump = getattr(response, "model_dump", None)
    body = dump() if callable(dump) else response
    if not isinstance(body, Mapping):
        return None
    return answer_from_json(json.dumps(body, default=str).encode())[0]


def _receipt(data: dict[str, Any], call: _Call) -> None:
    """The decision in the call's LiteLLM metadata (``metadata.areamem``), where other
    callbacks and LiteLLM's logs see it."""
    name = "litellm_metadata" if "litellm_metadata" in data else "metadata"
    metadata = data.get(name)
    if metadata is None:
        metadata = data[name] = {}
    if isinstance(metadata, dict):
        metadata["areamem"] = call.summary()


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)


@functools.cache
def _hook() -> object:
    """The ``CustomLogger`` LiteLLM loads (litellm imported here, on first access)."""
    from litellm.integrations.custom_logger import CustomLogger

    class MemoryHook(CustomLogger):
        """areamem's memory in LiteLLM's proxy: see :mod:`proxy.litellm_hook`."""

        def __init__(self, callbacks: MemoryCallbacks) -> None:
            super().__init__()
            self.callbacks = callbacks

        async def async_pre_call_hook(
            self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
        ) -> dict[str, Any]:
            return await self.callbacks.before_call(user_api_key_dict, data, str(call_type))

        async def async_log_success_event(
            self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
        ) -> None:
            await self.callbacks.after_success(kwargs, response_obj)

        async def async_log_failure_event(
            self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
        ) -> None:
            await self.callbacks.after_failure(kwargs)

    return MemoryHook(MemoryCallbacks())


def __getattr__(name: str) -> object:
    """``memory_hook``: the instance LiteLLM's ``callbacks:`` names, built on first access."""
    if name == "memory_hook":
        return _hook()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
