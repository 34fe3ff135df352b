"""Wire fidelity: headers both ways, the query, content-coding, byte-exact bodies with
memory injected, streamed usage, and an upstream 401 that does not blame the client."""

from __future__ import annotations

import gzip
import json
import random
import zlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs

import aiohttp
import openai
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionMessageParam

from proxy.doors.chat_wire import inject, message_offset, parse_chat, splice_memory
from proxy.fake_upstream import FakeUpstream
from proxy.http.headers import relayed, to_upstream

from .conftest import MakeProxy, Proxy, proxy_config

pytestmark = pytest.mark.e2e

USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello"}]
OPENAI_HEADERS = ("x-request-id", "openai-processing-ms", "x-ratelimit-remaining-requests")


def _litellm(upstream_url: str) -> dict[str, Any]:
    config = proxy_config(upstream_url)
    config["upstreams"][0]["fast_path"] = False
    return config


def _lower(headers: dict[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def _chat_records(proxy: Proxy) -> list[dict[str, Any]]:
    return [r for r in proxy.log_records() if r.get("event") == "chat"]


# --- response headers -------------------------------------------------------------


@pytest.mark.parametrize("fast_path", [True, False])
async def test_upstream_response_headers_reach_the_sdk(
    upstream: FakeUpstream, make_proxy: MakeProxy, fast_path: bool
) -> None:
    config = proxy_config(upstream.url) if fast_path else _litellm(upstream.url)
    proxy = await make_proxy(config)
    async with proxy.client() as client:
        plain = await client.chat.completions.with_raw_response.create(
            model="echo", messages=[{"role": "user", "content": "remember the bees?"}]
        )
        streamed = await client.chat.completions.with_raw_response.create(
            model="echo", messages=USER, stream=True
        )
        text = "".join([c.choices[0].delta.content or "" async for c in streamed.parse()])
    assert plain.parse().choices[0].message.content == "echo: remember the bees?"
    assert text == "echo: hello"
    assert plain.headers["x-request-id"] == "req_fake_1"
    assert streamed.headers["x-request-id"] == "req_fake_2"
    for name in OPENAI_HEADERS:
        assert name in plain.headers and name in streamed.headers
    assert plain.headers["X-Memory-Receipt"].startswith("rcpt_")  # ours, alongside
    assert streamed.headers["content-type"] == "text/event-stream"
    assert "content-encoding" not in plain.headers


@pytest.mark.parametrize("fast_path", [True, False])
async def test_retry_after_on_429_reaches_the_sdk(
    upstream: FakeUpstream, make_proxy: MakeProxy, fast_path: bool
) -> None:
    config = proxy_config(upstream.url) if fast_path else _litellm(upstream.url)
    proxy = await make_proxy(config)
    async with proxy.client() as client:
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(model="fail-429", messages=USER)
    headers = caught.value.response.headers
    assert headers["retry-after"] == "1"
    assert headers["x-request-id"] == "req_fake_1"
    assert caught.value.status_code == 429


# --- request headers and query ----------------------------------------------------


@pytest.mark.parametrize("fast_path", [True, False])
async def test_client_headers_are_forwarded_and_its_credentials_are_not(
    upstream: FakeUpstream, make_proxy: MakeProxy, fast_path: bool
) -> None:
    config = proxy_config(upstream.url) if fast_path else _litellm(upstream.url)
    proxy = await make_proxy(config)
    client = openai.AsyncOpenAI(
        base_url=proxy.base_url,
        api_key="sk-client-secret",
        organization="org-acme",
        project="proj_42",
        max_retries=0,
    )
    async with client:
        await client.chat.completions.create(
            model="echo",
            messages=USER,
            extra_headers={
                "OpenAI-Beta": "assistants=v2",
                "X-Memory": "off",
                "X-Conversation-Id": "conv-1",
                "X-Api-Key": "sk-client-secret",
                "Cookie": "session=1",
                "X-Custom-Gateway": "tag",
            },
        )
    sent = _lower(upstream.requests[0].headers)
    assert sent["openai-organization"] == "org-acme"
    assert sent["openai-project"] == "proj_42"
    assert sent["openai-beta"] == "assistants=v2"
    assert sent["x-custom-gateway"] == "tag"
    assert "sk-client-secret" not in json.dumps(sent)
    for dropped in ("x-memory", "x-conversation-id", "x-api-key", "cookie"):
        assert dropped not in sent
    if fast_path:
        assert "authorization" not in sent  # no upstream key configured: none sent
        assert sent["user-agent"].startswith("AsyncOpenAI/Python")  # the client's own
        assert sent["accept-encoding"] == "identity"


async def test_upstream_key_replaces_the_client_key(
    upstream: FakeUpstream, make_proxy: MakeProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AREAMEM_TEST_UPSTREAM_KEY", "sk-upstream")
    config = proxy_config(upstream.url)
    config["upstreams"][0]["api_key_env"] = "AREAMEM_TEST_UPSTREAM_KEY"
    proxy = await make_proxy(config)
    async with proxy.client("sk-client-secret") as client:
        await client.chat.completions.create(
            model="echo",
            messages=USER,
            extra_headers={"authorization": "Bearer sk-client-secret"},  # lower case too
        )
    sent = upstream.requests[0].headers
    assert [v for k, v in sent.items() if k.lower() == "authorization"] == ["Bearer sk-upstream"]


async def test_query_parameters_reach_the_upstream(proxy: Proxy, upstream: FakeUpstream) -> None:
    client = openai.AsyncOpenAI(
        base_url=proxy.base_url,
        api_key="x",
        max_retries=0,
        default_query={"api-version": "2024-06-01", "tag": "a/b c"},
    )
    async with client:
        await client.chat.completions.create(model="echo", messages=USER, stream=False)
        stream = await client.chat.completions.create(model="echo", messages=USER, stream=True)
        assert [c async for c in stream]
    for recorded in upstream.requests:
        assert parse_qs(recorded.query) == {"api-version": ["2024-06-01"], "tag": ["a/b c"]}


async def test_api_version_reaches_litellm(
    upstream: FakeUpstream, make_proxy: MakeProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = await make_proxy(_litellm(upstream.url))
    seen: list[dict[str, Any]] = []
    litellm_upstream = proxy.services.router.upstreams[0]
    original = litellm_upstream._kwargs  # type: ignore[attr-defined]

    def spy(*args: Any, **named: Any) -> dict[str, Any]:
        kwargs: dict[str, Any] = original(*args, **named)
        seen.append(kwargs)
        return kwargs

    monkeypatch.setattr(litellm_upstream, "_kwargs", spy)
    client = openai.AsyncOpenAI(
        base_url=proxy.base_url, api_key="x", max_retries=0, default_query={"api-version": "v9"}
    )
    async with client:
        await client.chat.completions.create(model="echo", messages=USER)
    assert seen[0]["api_version"] == "v9"


def test_request_header_policy() -> None:
    sent = to_upstream(
        [
            ("Host", "proxy"),
            ("Connection", "keep-alive, X-Hop"),
            ("X-Hop", "1"),
            ("Keep-Alive", "5"),
            ("TE", "trailers"),
            ("Proxy-Authorization", "Basic x"),
            ("Content-Length", "10"),
            ("Content-Type", "application/json"),
            ("Accept-Encoding", "gzip"),
            ("Authorization", "Bearer sk"),
            ("api-key", "k"),
            ("X-Memory", "off"),
            ("X-Memory-Whatever", "1"),
            ("X-Thread", "t1"),
            ("OpenAI-Organization", "org"),
            ("X-Stainless-Lang", "python"),
            ("Accept", "application/json"),
            ("Accept", "text/event-stream"),
        ],
        conversation_header="X-Thread",
    )
    assert sent == {
        "OpenAI-Organization": "org",
        "X-Stainless-Lang": "python",
        "Accept": "application/json, text/event-stream",
    }


def test_response_header_policy() -> None:
    kept = relayed(
        [
            ("Content-Length", "10"),
            ("Content-Type", "application/json"),
            ("Content-Encoding", "gzip"),
            ("Transfer-Encoding", "chunked"),
            ("Date", "today"),
            ("Server", "upstream"),
            ("Set-Cookie", "a=1"),
            ("WWW-Authenticate", "Bearer"),
            ("Access-Control-Allow-Origin", "*"),
            ("X-Memory-Receipt", "rcpt_other"),
            ("x-request-id", "req_1"),
            ("retry-after-ms", "20"),
            ("x-should-retry", "true"),
            ("openai-version", "2020-10-01"),
            ("cf-ray", "abc"),
        ]
    )
    assert kept == {
        "x-request-id": "req_1",
        "retry-after-ms": "20",
        "x-should-retry": "true",
        "openai-version": "2020-10-01",
        "cf-ray": "abc",
    }


# --- content-coding ---------------------------------------------------------------


async def test_gzip_answer_reaches_the_sdk_readable(proxy: Proxy, upstream: FakeUpstream) -> None:
    async with proxy.client() as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="gzip", messages=[{"role": "user", "content": "squeezed"}]
        )
    assert raw.parse().choices[0].message.content == "echo: squeezed"
    assert "content-encoding" not in raw.headers  # decoded by the proxy
    await proxy.settle()
    assert _chat_records(proxy)[0]["usage"]["completion_tokens"] == 2  # the proxy read it too


@pytest.fixture
async def coded_upstream() -> AsyncIterator[str]:
    """An upstream that encodes its answers whatever the request's Accept-Encoding."""
    app = web.Application()
    app.router.add_post("/v1/chat/completions", _coded_answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    await runner.cleanup()


_ANSWER = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}
    ],
}


def _deflate(data: bytes, wbits: int) -> bytes:
    packer = zlib.compressobj(wbits=wbits)
    return packer.compress(data) + packer.flush()


async def _coded_answer(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    model = body["model"]
    if body.get("stream"):
        return await _gzip_stream(request)
    data = json.dumps(_ANSWER).encode()
    coded = {
        "gzip": gzip.compress(data),
        "deflate": _deflate(data, zlib.MAX_WBITS),
        "deflate-raw": _deflate(data, -zlib.MAX_WBITS),
        "br": b"\x8b\x02\x80opaque-brotli-bytes",
        "gzip-401": gzip.compress(b'{"error": {"message": "bad key", "code": "invalid_api_key"}}'),
    }[model]
    coding = model.partition("-")[0]
    status = 401 if model.endswith("401") else 200
    headers = {"Content-Type": "application/json", "Content-Encoding": coding}
    return web.Response(body=coded, status=status, headers=headers)


async def _gzip_stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Content-Encoding": "gzip"}
    )
    await response.prepare(request)
    packer = zlib.compressobj(wbits=31)
    for word in ("one", " two", " three"):
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
        chunk["choices"] = [{"index": 0, "delta": {"content": word}, "finish_reason": None}]
        event = b"data: " + json.dumps(chunk).encode() + b"\n\n"
        await response.write(packer.compress(event) + packer.flush(zlib.Z_SYNC_FLUSH))
    await response.write(packer.compress(b"data: [DONE]\n\n") + packer.flush())
    await response.write_eof()
    return response


@pytest.mark.parametrize("model", ["gzip", "deflate", "deflate-raw"])
async def test_compressed_answers_are_decoded(
    coded_upstream: str, make_proxy: MakeProxy, model: str
) -> None:
    proxy = await make_proxy(proxy_config(coded_upstream))
    async with aiohttp.ClientSession(auto_decompress=False) as http:
        body = {"model": model, "messages": USER}
        async with http.post(f"{proxy.base_url}/chat/completions", json=body) as response:
            assert "Content-Encoding" not in response.headers
            assert json.loads(await response.read()) == _ANSWER


async def test_an_encoding_the_proxy_cannot_decode_travels_with_its_header(
    coded_upstream: str, make_proxy: MakeProxy
) -> None:
    proxy = await make_proxy(proxy_config(coded_upstream))
    async with aiohttp.ClientSession(auto_decompress=False) as http:
        body = {"model": "br", "messages": USER}
        async with http.post(f"{proxy.base_url}/chat/completions", json=body) as response:
            assert response.headers["Content-Encoding"] == "br"
            assert await response.read() == b"\x8b\x02\x80opaque-brotli-bytes"


async def test_a_gzip_stream_is_decoded_as_it_arrives(
    coded_upstream: str, make_proxy: MakeProxy
) -> None:
    proxy = await make_proxy(proxy_config(coded_upstream))
    async with proxy.client() as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="m", messages=USER, stream=True
        )
        text = "".join([c.choices[0].delta.content or "" async for c in raw.parse()])
    assert text == "one two three"
    assert "content-encoding" not in raw.headers


async def test_a_gzip_error_body_is_read(coded_upstream: str, make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(proxy_config(coded_upstream))
    async with proxy.client() as client:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(model="gzip-401", messages=USER)
    assert caught.value.code == "upstream_auth_failed"
    assert "invalid_api_key" in caught.value.message  # the upstream's code, decoded


# --- byte-exact bodies with memory injected ---------------------------------------


async def test_injected_memory_leaves_every_other_byte_alone(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo",
            messages=[{"role": "user", "content": "My sister Ana keeps bees in Porto."}],
        )
    await proxy.settle()
    question = b'{"role" :"user","content":"Do you remember what my sister keeps?"}'
    raw = (
        b'{ "model":"echo" ,\n  "temperature": 1E2, "logit_bias": {"50256": -1e999},\n'
        b'  "messages": [\n    {"role": "system", "content": "caf\\u00e9 \\"q\\" \\/"},\n    '
        + question
        + b'\n  ],\n  "custom": [1.0e-5, 0E0, 123456789012345678901234567890, -0.0]\n}'
    )
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{proxy.base_url}/chat/completions",
            data=raw,
            headers={"Content-Type": "application/json"},
        ) as response:
            assert response.status == 200
            assert response.headers.get("X-Memory-Receipt")
    sent = upstream.requests[-1].raw
    k = raw.index(question)
    inserted = sent[k : k + len(sent) - len(raw)]
    assert sent == raw[:k] + inserted + raw[k:]  # the client's bytes plus exactly one message
    assert inserted.endswith(b",")
    memory = json.loads(inserted[:-1])
    assert memory["role"] == "system" and "Ana keeps bees in Porto" in memory["content"]


_JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
)
_JSON = st.recursive(
    _JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
_CONTENT = st.text(max_size=30) | st.lists(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=10)), min_size=1, max_size=2
)
_MESSAGE = st.builds(
    lambda role, content: {"role": role, "content": content},
    st.sampled_from(["system", "user", "assistant"]),
    _CONTENT,
)


def _dump(value: Any, rnd: random.Random) -> str:
    """JSON text of ``value`` with random whitespace, escapes and number spellings."""
    if isinstance(value, dict):
        return _object(list(value.items()), rnd)
    if isinstance(value, list):
        items = [_ws(rnd) + _dump(v, rnd) + _ws(rnd) for v in value]
        return "[" + (",".join(items) if items else _ws(rnd)) + "]"
    if isinstance(value, str):
        return _string(value, rnd)
    if isinstance(value, float):
        return _float(value, rnd)
    return json.dumps(value)


def _object(pairs: list[tuple[str, Any]], rnd: random.Random) -> str:
    items = [
        f"{_ws(rnd)}{_string(k, rnd)}{_ws(rnd)}:{_ws(rnd)}{_dump(v, rnd)}{_ws(rnd)}"
        for k, v in pairs
    ]
    return "{" + (",".join(items) if items else _ws(rnd)) + "}"


def _ws(rnd: random.Random) -> str:
    return rnd.choice(["", "", " ", "\n  ", "\t", "\r\n"])


def _float(value: float, rnd: random.Random) -> str:
    if value in (float("inf"), float("-inf")):
        return ("-" if value < 0 else "") + rnd.choice(["1e999", "1E400", "9e+999"])
    text = repr(value)
    return text.upper() if rnd.random() < 0.5 else text  # 1e-05 or 1E-05


def _string(text: str, rnd: random.Random) -> str:
    """A JSON string; some characters escaped (``\\"``, ``\\/``, ``\\u00e9``, pairs)."""
    every = rnd.random() < 0.2
    out = []
    for ch in text:
        if ch == "/" and rnd.random() < 0.5:
            out.append("\\/")
        elif (every or rnd.random() < 0.3) and ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        elif rnd.random() < 0.3 or ch in '"\\' or ord(ch) < 0x20:
            out.append(json.dumps(ch)[1:-1])  # \", \\, \n, or a surrogate pair
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


@st.composite
def _bodies(draw: st.DrawFn) -> bytes:
    messages = draw(st.lists(_MESSAGE, min_size=1, max_size=5))
    if not any(m["role"] == "user" for m in messages):
        messages.append({"role": "user", "content": draw(st.text(max_size=10))})
    extra = draw(
        st.dictionaries(
            st.text(max_size=6).filter(lambda k: k not in ("model", "messages", "stream")),
            _JSON,
            max_size=3,
        )
    )
    real = ("messages", messages)
    pairs: list[tuple[str, Any]] = [("model", "gpt-x"), real, *extra.items()]
    rnd = draw(st.randoms(use_true_random=False))
    rnd.shuffle(pairs)
    if draw(st.booleans()):  # a decoy before it: json.loads keeps the last "messages"
        pairs.insert(rnd.randint(0, pairs.index(real)), ("messages", draw(_JSON)))
    prefix = draw(st.sampled_from(["", " \n", "\ufeff"]))
    return (prefix + _object(pairs, rnd) + _ws(rnd)).encode()


@settings(max_examples=200, deadline=None)
@given(raw=_bodies(), text=st.text(max_size=40), role=st.sampled_from(["system", "user"]))
def test_splice_equals_inject_and_changes_nothing_else(raw: bytes, text: str, role: str) -> None:
    chat = parse_chat(raw)
    out = splice_memory(raw, chat, text, role)
    assert json.loads(out) == {**chat.body, "messages": inject(chat, text, role)}
    k = message_offset(raw, chat.last_user_index)
    assert k is not None
    inserted = out[k : k + len(out) - len(raw)]
    assert out == raw[:k] + inserted + raw[k:]
    assert json.loads(inserted.removesuffix(b",")) == {"role": role, "content": text}


def test_message_offset_does_not_recurse_and_skips_long_strings() -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    escapes = b'"' + b'\\"\\\\' * 500_000 + b'"'
    raw = b'{"a": ' + deep + b', "b": ' + escapes + b', "messages": [{"x": "]"}, {"role": "user"}]}'
    k = message_offset(raw, 1)
    assert k is not None and raw[k:].startswith(b'{"role": "user"}')
    assert message_offset(raw, 2) is None
    assert message_offset("{}".encode("utf-16"), 0) is None


# --- streamed usage and upstream credentials --------------------------------------


# litellm reads pydantic attributes deprecated since 2.11 when it strips a usage chunk
_LITELLM_USAGE_WARNING = r"ignore:Accessing the 'model_\w+' attribute on the instance"


@pytest.mark.parametrize(
    "fast_path",
    [True, pytest.param(False, marks=pytest.mark.filterwarnings(_LITELLM_USAGE_WARNING))],
)
async def test_streamed_usage_is_logged(
    upstream: FakeUpstream, make_proxy: MakeProxy, fast_path: bool
) -> None:
    config = proxy_config(upstream.url) if fast_path else _litellm(upstream.url)
    proxy = await make_proxy(config)
    async with proxy.client() as client:
        stream = await client.chat.completions.create(
            model="echo",
            messages=[{"role": "user", "content": "count these words"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        usage = [c.usage async for c in stream if c.usage]
    assert usage and usage[0].total_tokens == 14
    await proxy.settle()
    record = _chat_records(proxy)[0]
    assert record["usage"]["prompt_tokens"] == 10
    assert record["usage"]["completion_tokens"] == 4


@pytest.mark.parametrize("fast_path", [True, False])
@pytest.mark.parametrize(
    ("status", "code"), [(401, "upstream_auth_failed"), (403, "upstream_permission_denied")]
)
async def test_upstream_refusing_the_proxys_key_is_not_the_clients_fault(
    upstream: FakeUpstream, make_proxy: MakeProxy, fast_path: bool, status: int, code: str
) -> None:
    config = proxy_config(upstream.url) if fast_path else _litellm(upstream.url)
    proxy = await make_proxy(config)
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-client", max_retries=2)
    async with client:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(model=f"fail-{status}", messages=USER)
    error = caught.value
    assert error.status_code == 502 and error.code == code
    assert "the proxy's upstream credentials" in error.message
    assert "Your key to this proxy was accepted" in error.message
    assert error.response.headers["x-should-retry"] == "false"
    assert error.response.headers["x-request-id"] == "req_fake_1"
    assert len(upstream.requests) == 1  # the SDK did not retry
