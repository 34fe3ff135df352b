"""The LiteLLM hook inside a real LiteLLM proxy (``litellm[proxy]``, a dev dependency).

One LiteLLM proxy per module, started as a subprocess from its own config: one route to
the fake upstream (a real aiohttp server on loopback, on a thread of this process), the
hook loaded by ``litellm_settings.callbacks``, its areamem config named by
``AREAMEM_CONFIG`` (data in the temp folder, inline policy ``always``). The ``openai``
client talks to LiteLLM. LiteLLM keeps per-key metadata, aliases and teams in its
database, which this offline test has none of: the keys are LiteLLM ``custom_auth``
keys (a module written next to the config) whose ``UserAPIKeyAuth`` carries the
metadata, alias or team id a database key would, so the hook reads them exactly where
LiteLLM puts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import openai
import pytest
import yaml
from openai.types.chat import ChatCompletionMessageParam

from memory_core import MemoryStore, StoreStats
from proxy.fake_upstream import FakeUpstream, Recorded
from proxy.litellm_hook import InvalidTenantError, MemoryCallbacks, tenant_of_key

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
MASTER_KEY = "sk-litellm-master"
READY_TIMEOUT_S = 90.0
WAIT_S = 30.0
LOAD_TIMEOUT_S = 240.0
"""The hook's first call loads the formation models in LiteLLM's process: seconds, or a
few minutes on a machine that has not exported areamem's MiniLM yet."""

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(READY_TIMEOUT_S + LOAD_TIMEOUT_S + 60)]
KEYS: dict[str, dict[str, Any]] = {
    MASTER_KEY: {},
    "sk-ana": {"metadata": {"areamem_tenant": "ana"}, "key_alias": "ignored-alias"},
    "sk-boat": {"key_alias": "boat-key"},
    "sk-team": {"team_id": "team-x"},
    "sk-cousin": {"metadata": {"areamem_tenant": "cousin"}},
    "sk-broken": {"metadata": {"areamem_tenant": "broken"}},
    "sk-bad": {"metadata": {"areamem_tenant": "../escape"}},
}
"""LiteLLM keys -> the ``UserAPIKeyAuth`` fields the test's ``custom_auth`` gives them."""
AUTH_MODULE = """
import json
from litellm.proxy._types import UserAPIKeyAuth

KEYS = json.loads({keys!r})


async def user_api_key_auth(request, api_key):
    if api_key not in KEYS:
        raise Exception("unknown key")
    return UserAPIKeyAuth(api_key=api_key, **KEYS[api_key])
"""
CHILD_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_OFFLINE_MODE": "true",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_DISABLE_LATEST_RELEASE_CHECK": "true",
    "LITELLM_MODE": "PRODUCTION",
    "DISABLE_ADMIN_UI": "True",
    "NO_DOCS": "True",
    "NO_REDOC": "True",
    "NO_PROXY": "*",
    "PYTHONUNBUFFERED": "1",
}


class ThreadedUpstream:
    """The fake upstream on its own event loop thread (shared by the module's tests)."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.server: FakeUpstream = self._run(FakeUpstream().start())

    def _run(self, work: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout=30)

    @property
    def requests(self) -> list[Recorded]:
        return self.server.requests

    def stop(self) -> None:
        self._run(self.server.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


@dataclass
class LiteLLM:
    """The running LiteLLM proxy, its folder and the hook's data folder."""

    url: str
    process: subprocess.Popen[bytes]
    output: Path
    data_dir: Path
    upstream: ThreadedUpstream

    def client(self, key: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, timeout=60)

    def records(self) -> list[dict[str, Any]]:
        """The hook's per-call log lines (other events left out)."""
        path = self.data_dir / "logs" / "litellm.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [r for r in map(json.loads, lines) if r.get("event") == "chat"]

    def record(
        self, match: Callable[[dict[str, Any]], bool], timeout_s: float = WAIT_S
    ) -> dict[str, Any]:
        """The first call's line that ``match`` accepts, waited for."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = [r for r in self.records() if match(r)]
            if found:
                return found[0]
            time.sleep(0.05)
        raise AssertionError(f"no such log line within {timeout_s:g} s: {self.records()}")

    def tail(self) -> str:
        return self.output.read_text(errors="replace")[-4000:]


def _wait(done: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"not done within {timeout_s:g} s")
        time.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _write_configs(folder: Path, upstream_url: str) -> tuple[Path, Path]:
    """The areamem config (the hook's) and LiteLLM's config, with the auth module."""
    areamem = folder / "areamem.yaml"
    areamem.write_text(
        yaml.safe_dump(
            {
                "server": {"data_dir": "data"},
                "upstreams": [{"model": "*", "provider": "openai"}],  # required, unused here
                "memory": {"retrieval_timeout_ms": 10_000, "formation_grace_ms": 50},
                "logging": {"stdout": False, "file": True},
                "policy": {"rules": [{"type": "always"}]},
            }
        )
    )
    (folder / "areamem_test_auth.py").write_text(AUTH_MODULE.format(keys=json.dumps(KEYS)))
    route = {"api_base": upstream_url, "api_key": "sk-upstream"}
    litellm = folder / "litellm.yaml"
    litellm.write_text(
        yaml.safe_dump(
            {
                "model_list": [
                    {"model_name": name, "litellm_params": {"model": f"openai/{name}", **route}}
                    for name in ("echo", "fail-500", "recall")
                ],
                "litellm_settings": {
                    "callbacks": ["proxy.litellm_hook.memory_hook"],
                    "num_retries": 0,
                    "telemetry": False,
                },
                "general_settings": {
                    "master_key": MASTER_KEY,
                    "custom_auth": "areamem_test_auth.user_api_key_auth",
                    "disable_spend_logs": True,
                    "store_model_in_db": False,
                    "background_health_checks": False,
                },
            }
        )
    )
    return areamem, litellm


def _child_env(folder: Path, areamem: Path) -> dict[str, str]:
    """PATH and the locale of ours, LiteLLM's offline switches, the hook's config and
    areamem's model cache."""
    kept = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TZ") if k in os.environ}
    return {
        **kept,
        **CHILD_ENV,
        "HOME": str(folder),
        "TMPDIR": str(folder),
        "PYTHONPATH": str(ROOT),
        "AREAMEM_CONFIG": str(areamem),
        # the MiniLM export areamem keeps there (made once per machine, minutes on two cores)
        "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"),
    }


def _wait_ready(proxy: LiteLLM) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proxy.process.poll() is not None:
            raise AssertionError(f"LiteLLM exited ({proxy.process.returncode}):\n{proxy.tail()}")
        with contextlib.suppress(urllib.error.URLError, OSError):
            with opener.open(proxy.url + "/health/liveliness", timeout=1) as answer:
                if answer.status == 200:
                    return
        time.sleep(0.2)
    raise AssertionError(f"LiteLLM was not ready within {READY_TIMEOUT_S:g} s:\n{proxy.tail()}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def litellm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiteLLM]:
    """LiteLLM's proxy with the hook, warmed: one call made and logged, so memory (the
    config, the formation models) is loaded before the tests' calls."""
    folder = tmp_path_factory.mktemp("litellm")
    upstream = ThreadedUpstream()
    areamem, config = _write_configs(folder, upstream.server.url)
    (folder / "data" / "tenants" / "broken.db").mkdir(parents=True)  # a store that cannot open
    port = _free_port()
    output = folder / "litellm.log"
    with output.open("wb") as sink:
        command = ["-m", "litellm.proxy.proxy_cli", "--config", str(config), "--host", HOST]
        process = subprocess.Popen(
            [sys.executable, *command, "--port", str(port)],
            cwd=folder,
            env=_child_env(folder, areamem),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    proxy = LiteLLM(f"http://{HOST}:{port}", process, output, folder / "data", upstream)
    try:
        _wait_ready(proxy)
        _chat(proxy, MASTER_KEY, "warming up")
        proxy.record(lambda r: r["tenant"] == "default", LOAD_TIMEOUT_S)
        yield proxy
    finally:
        _stop(process)
        upstream.stop()


def _chat(proxy: LiteLLM, key: str, text: str, **extra: Any) -> str:
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": text},
    ]
    reply = proxy.client(key).chat.completions.create(model="echo", messages=messages, **extra)
    return reply.choices[0].message.content or ""


@contextlib.contextmanager
def _store(proxy: LiteLLM, tenant: str) -> Iterator[MemoryStore]:
    store = MemoryStore(proxy.data_dir / "tenants" / f"{tenant}.db")
    try:
        yield store
    finally:
        store.close()


def _formed(proxy: LiteLLM, tenant: str, messages: int) -> StoreStats:
    """The tenant's stats once ``messages`` are logged and formation has caught up. Its
    file is opened here once the hook has logged an exchange of it (it exists then)."""
    logged = proxy.record(lambda r: r["tenant"] == tenant and r["ingested"] > 0)
    assert logged["outcome"] == "ok"
    seen: list[StoreStats] = []

    def done() -> bool:
        with _store(proxy, tenant) as store:
            seen.append(store.stats())
        last = seen[-1]
        return last.log_messages >= messages and last.queued == 0 and last.fragments > 0

    _wait(done)
    return seen[-1]


def _injected(recorded: Recorded, sent: Sequence[Mapping[str, object]]) -> str:
    """The memory block the upstream received: one system message just before the last
    user message, every message the client sent unchanged around it."""
    messages = recorded.body["messages"]
    assert len(messages) == len(sent) + 1
    assert messages[:-2] == sent[:-1] and messages[-1] == sent[-1]
    block = messages[-2]
    assert block["role"] == "system" and set(block) == {"role", "content"}
    assert block["content"].startswith("<retrieved_memory>")
    return str(block["content"])


def test_a_fact_said_through_litellm_is_recalled_before_the_last_user_message(
    litellm: LiteLLM,
) -> None:
    told = "Remember this: my sister Marta lives in Coimbra and keeps bees."
    assert _chat(litellm, "sk-ana", told) == "echo: " + told
    stats = _formed(litellm, "ana", messages=3)  # system, user, the answer
    assert stats.log_messages == 3

    question = "Where does my sister Marta live?"
    answer = _chat(litellm, "sk-ana", question, temperature=0.3)
    assert answer == "echo: " + question
    recorded = litellm.upstream.requests[-1]
    sent = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": question}]
    block = _injected(recorded, sent)
    assert "Coimbra" in block and block.rstrip().endswith("</retrieved_memory>")
    assert recorded.body["temperature"] == 0.3
    assert "metadata" not in recorded.body  # the receipt stays in LiteLLM
    line = litellm.record(lambda r: r["tenant"] == "ana" and r["decision"] is True)
    assert line["reason"].startswith("rule 1 'always'") and line["memory_error"] is None
    later = litellm.record(lambda r: r["tenant"] == "ana" and r["fragments_injected"] > 0)
    assert later["memory_tokens"] > 0 and later["outcome"] == "ok"


def test_b_a_streamed_exchange_is_stored_and_recalled(litellm: LiteLLM) -> None:
    client = litellm.client("sk-boat")  # the key's alias names the tenant
    told = "Remember this: the boat is called Gaivota and is moored in Aveiro."
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": told}]
    stream = client.chat.completions.create(model="echo", messages=messages, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "echo: " + told
    stats = _formed(litellm, "boat-key", messages=2)
    assert stats.log_messages == 2  # the user turn and the streamed answer

    question: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "What is the boat called, and where is it moored?"}
    ]
    stream = client.chat.completions.create(model="echo", messages=question, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    block = _injected(litellm.upstream.requests[-1], question)
    assert "Gaivota" in block and "Aveiro" in block
    assert litellm.record(lambda r: r["tenant"] == "boat-key" and r["stream"] is True)


def test_b2_an_answer_that_restates_memory_is_stored_as_a_restatement(
    litellm: LiteLLM,
) -> None:
    """The hook runs the proxy's memory turn: a question is stored as asked, the model's
    answer that restates the block as restated (logged with the fragment it restates),
    and a later lookup ranks the statement above both."""
    client = litellm.client("sk-cousin")
    told = "My cousin Beatriz lives in Coimbra and sells books."
    client.chat.completions.create(model="echo", messages=[{"role": "user", "content": told}])
    _formed(litellm, "cousin", messages=2)
    asked = "Where does my cousin Beatriz live?"
    question: list[ChatCompletionMessageParam] = [{"role": "user", "content": asked}]
    reply = client.chat.completions.create(model="recall", messages=question)
    assert "Coimbra" in (reply.choices[0].message.content or "")

    def ranked() -> list[tuple[str, float]]:
        """The kinds and scores the area ranks for the question (a search shows a
        restatement's sources in its place, so the ranking is where it is seen)."""
        with _store(litellm, "cousin") as store:
            area = store.explain_area(asked, limit=20)
        return [(f.kind, f.score) for f in area.fragments]

    _wait(lambda: {"asked", "restated"} <= {kind for kind, _ in ranked()})
    with _store(litellm, "cousin") as store:
        found = store.recall("Beatriz Coimbra live", limit=10, budget_tokens=4000)
    assert found.hits[0].text == told and found.hits[0].kind == "stated"  # its sources first
    scores = ranked()
    best_stated = max(score for kind, score in scores if kind == "stated")
    assert all(score < best_stated for kind, score in scores if kind != "stated")


def test_c_an_upstream_error_is_not_stored(litellm: LiteLLM) -> None:
    client = litellm.client("sk-team")  # the key's team names the tenant
    failing: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "Remember this: the failed call's secret is 4242."}
    ]
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="fail-500", messages=failing)
    failed = litellm.record(lambda r: r["tenant"] == "team-x")
    assert failed["outcome"] == "error" and failed["ingested"] == 0
    assert _chat(litellm, "sk-team", "A call that works.") == "echo: A call that works."
    stats = _formed(litellm, "team-x", messages=3)
    assert stats.log_messages == 3  # only the call that succeeded


def test_d_memory_failures_never_break_the_call(litellm: LiteLLM) -> None:
    sent: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Is anyone there?"}]
    for key in ("sk-broken", "sk-bad"):
        answer = litellm.client(key).chat.completions.create(model="echo", messages=sent)
        assert answer.choices[0].message.content == "echo: Is anyone there?"
        assert litellm.upstream.requests[-1].body["messages"] == sent  # nothing injected
    broken = litellm.record(lambda r: r["tenant"] == "broken")
    assert broken["outcome"] == "ok" and broken["ingested"] == 0
    # the store could not be opened: said as the proxy says it (one memory turn for both)
    assert broken["memory_error"].startswith("ingestion failed: cannot open memory database")
    refused = litellm.record(lambda r: r["tenant"] is None)
    assert refused["outcome"] == "ok" and refused["memory_error"].startswith("tenant: ")
    assert "'../escape'" in refused["memory_error"]
    tenants = sorted(p.name for p in (litellm.data_dir / "tenants").iterdir())
    assert "escape.db" not in tenants and not (litellm.data_dir / "escape.db").exists()


def test_e_a_key_without_tenant_metadata_alias_or_team_is_the_default_tenant(
    litellm: LiteLLM,
) -> None:
    warm = litellm.record(lambda r: r["tenant"] == "default")
    assert warm["outcome"] == "ok"
    assert (litellm.data_dir / "tenants" / "default.db").exists()


def test_f_headers_and_policy_edits_reach_the_hook(litellm: LiteLLM) -> None:
    client = litellm.client("sk-team")
    sent: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "Not for memory, please."}
    ]
    headers = {"X-Memory": "off", "X-Conversation-Id": "thread-7"}
    client.chat.completions.create(model="echo", messages=sent, extra_headers=headers)
    assert litellm.upstream.requests[-1].body["messages"] == sent
    off = litellm.record(lambda r: r["conversation"] == "thread-7")
    assert off["decision"] is False and off["reason"] == "header X-Memory: off"
    assert off["ingested"] == 0

    config = litellm.data_dir.parent / "areamem.yaml"
    original = config.read_text()
    document = yaml.safe_load(original)
    document["policy"] = {"rules": []}
    config.write_text(yaml.safe_dump(document))
    try:
        time.sleep(1.1)  # the hook looks at the policy file at most once a second
        headers = {"X-Conversation-Id": "thread-8"}
        client.chat.completions.create(model="echo", messages=sent, extra_headers=headers)
        edited = litellm.record(lambda r: r["conversation"] == "thread-8")
        assert edited["decision"] is False and edited["reason"] == "no rules configured"
        assert edited["ingested"] == 2  # not consulted, still stored
    finally:
        config.write_text(original)


def test_g_a_snapshot_header_is_read_by_the_hook_as_by_the_proxy(litellm: LiteLLM) -> None:
    """One memory turn for both: ``X-Memory-As-Of`` naming no snapshot is the proxy's 400;
    inside LiteLLM the call goes on without memory and the log line says why."""
    client = litellm.client("sk-team")
    for value, conversation in (("abc", "thread-9"), ("7", "thread-10")):
        sent: list[ChatCompletionMessageParam] = [
            {"role": "user", "content": "Do you remember my plans?"}
        ]
        headers = {"X-Memory-As-Of": value, "X-Conversation-Id": conversation, "X-Memory": "force"}
        answer = client.chat.completions.create(model="echo", messages=sent, extra_headers=headers)
        assert answer.choices[0].message.content == "echo: Do you remember my plans?"
        assert litellm.upstream.requests[-1].body["messages"] == sent  # nothing injected
        record = litellm.record(_in_conversation(conversation))
        assert record["outcome"] == "ok" and record["memory_error"].startswith("as_of: header")
        assert record["ingested"] == 2  # still stored



def _in_conversation(conversation: str) -> Callable[[dict[str, Any]], bool]:
    """Matches the log lines of ``conversation``."""
    return lambda r: bool(r["conversation"] == conversation)


# -- the tenant of a key, without LiteLLM ----------------------------------------------


def _key(**fields: Any) -> SimpleNamespace:
    return SimpleNamespace(**{"metadata": {}, "key_alias": None, "team_id": None, **fields})


def test_the_tenant_is_the_metadata_then_the_alias_then_the_team_then_default() -> None:
    both = {"metadata": {"areamem_tenant": "ana"}, "key_alias": "a", "team_id": "t"}
    assert tenant_of_key(_key(**both)) == "ana"
    assert tenant_of_key(_key(key_alias="laptop", team_id="t")) == "laptop"
    assert tenant_of_key(_key(metadata={"areamem_tenant": ""}, team_id="t-1")) == "t-1"
    assert tenant_of_key(_key()) == "default"
    assert tenant_of_key(None) == "default"


@pytest.mark.parametrize(
    "fields",
    [
        {"metadata": {"areamem_tenant": "../x"}, "key_alias": "fine"},
        {"key_alias": "Ana's laptop", "team_id": "fine"},
        {"team_id": "." + "a" * 10},
        {"metadata": {"areamem_tenant": 7}},
        {"key_alias": "a" * 65},
    ],
)
def test_an_invalid_tenant_is_refused_never_passed_over(fields: dict[str, Any]) -> None:
    with pytest.raises(InvalidTenantError, match="cannot name a tenant"):
        tenant_of_key(_key(**fields))


async def test_a_config_that_fails_leaves_every_call_as_it_was(tmp_path: Path) -> None:
    hook = MemoryCallbacks(tmp_path / "missing.yaml")
    messages = [{"role": "user", "content": "Hi"}]
    other = {"model": "embed", "input": ["x"], "litellm_call_id": "e"}
    assert await hook.before_call(None, dict(other), "aembedding") == other
    for attempt in range(200):  # the first calls find the config still being read
        data: dict[str, Any] = {
            "model": "echo", "messages": messages, "litellm_call_id": f"c{attempt}"
        }
        data = await hook.before_call(None, data, "acompletion")
        assert data["messages"] is messages
        error = data["metadata"]["areamem"]["memory_error"]
        if error.startswith("memory is off"):
            break
        assert error.startswith("memory is starting")
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the config's failure was never noticed")
    await hook.after_success({"litellm_call_id": f"c{attempt}"}, None)  # nothing to store


def test_importing_the_hook_reads_nothing_and_imports_no_litellm() -> None:
    code = (
        "import os, sys\n"
        "before = dict(os.environ)\n"
        "import proxy.litellm_hook\n"
        "assert dict(os.environ) == before, 'environment changed at import'\n"
        "assert 'litellm' not in sys.modules, 'litellm imported at import'\n"
        "print('ok')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "AREAMEM_CONFIG"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT, env=env
    )
    assert result.stdout.strip() == "ok", result.stderr
