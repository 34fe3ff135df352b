"""Fuzzing the HTTP API: no input makes the proxy answer 5xx, hang, skip its log line or
brick a tenant.

A real proxy on loopback (``make_proxy``) in front of the fake upstream, sent raw bytes
with aiohttp (not the SDK, so bodies can be malformed): arbitrary JSON and near-valid
chat and ingest bodies with wrong types in every field, odd content parts, lone
surrogates (``"\\ud800"`` escapes, or as invalid UTF-8), numbers past every range
(``1e400``, a 5,000-digit integer, ``NaN``, ``Infinity``), nesting thousands of levels
deep, bytes that are not JSON, odd ``Content-Type``; odd query strings and ids on every
``GET /memory/...`` endpoint; odd ``X-Memory``, ``X-Conversation-Id`` and
``Authorization`` values. The properties, checked after every example:

- the proxy never answers 5xx (an error the fake upstream itself answered is excluded;
  models are normal names, so the fake never injects one);
- it never hangs (every request and the post-answer work finish within a bound);
- every ``POST /v1/chat/completions`` produces exactly one ``"event": "chat"`` log line;
- the tenant the example wrote to still answers ``GET /memory/search?q=x`` and a normal
  chat with 200 (nothing stored, however odd, bricks it). Examples share a tenant until
  one bricks it; the next example starts on a fresh tenant, so a failing example is
  shrunk on its own merits.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
from aiohttp import web
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from yarl import URL

from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, Proxy, proxy_config

pytestmark = pytest.mark.fuzz

KEYS = 200
REQUEST_TIMEOUT_S = 20.0
SETTLE_TIMEOUT_S = 20.0
FAKE_UPSTREAM_FAULTS = ("hang", "slow", "die-mid-stream", "gzip")

FUZZ = settings(
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


# --- values --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Raw:
    """JSON text written as is: literals ``json.dumps`` cannot produce, deep nesting."""

    text: str

    def __repr__(self) -> str:
        shown = self.text if len(self.text) <= 40 else f"{self.text[:20]}...{self.text[-10:]}"
        return f"Raw({shown!r}, {len(self.text)} chars)"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # hypothesis's printer
        printer.text(repr(self))


def _mostly(
    valid: st.SearchStrategy[Any], odd: st.SearchStrategy[Any], weight: int = 3
) -> st.SearchStrategy[Any]:
    """``valid`` about ``weight`` times as often as ``odd`` (shrinking towards
    ``valid``): bodies get past validation often enough to reach forwarding, storing
    and retrieval. (``st.one_of`` drops repeated branches, so it cannot weigh them.)"""
    return st.integers(0, weight).flatmap(lambda i: odd if i == weight else valid)


def _field(valid: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """One field of a near-valid body: odd one time in ten (a body has several)."""
    return _mostly(valid, odd, 9)


def _digits(count: int, negative: bool) -> Raw:
    return Raw(("-" if negative else "") + "9" * count)


def _nested(depth: int, kind: str) -> Raw:
    if kind == "array":
        return Raw("[" * depth + "]" * depth)
    return Raw('{"a":' * depth + "1" + "}" * depth)


_RAW_LITERALS = (
    "1e400",
    "-1e400",
    "1e308",
    "-1e308",
    "1.7976931348623157e308",
    "4.9e-324",
    "1e-400",
    "NaN",
    "Infinity",
    "-Infinity",
    '"\\ud800"',
    '"\\udfff"',
    '"a\\udc00b"',
    '"\\ud83d"',
    '"\\u0000"',
    '"\\u202e\\ufeff"',
    "18446744073709551616",
    "-0",
)
_SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, categories=["Cs"])
_TEXT = st.one_of(
    st.text(max_size=24),
    st.text(max_size=24),
    st.text(st.one_of(st.characters(), _SURROGATES), max_size=24),
)
_NUMBERS = st.one_of(
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 10**30, 2**63, -(2**63) - 1, -0.0, 5e-324]),
)
_RAW = st.one_of(
    st.sampled_from(_RAW_LITERALS).map(Raw),
    st.builds(_digits, st.sampled_from([4_300, 4_301, 5_000]), st.booleans()),
    st.builds(
        _nested,
        st.sampled_from([100, 129, 1_000, 5_000, 50_000]),
        st.sampled_from(["array", "object"]),
    ),
)
_NAME = st.text(st.characters(categories=["L", "N", "P", "S", "Zs"]), min_size=1, max_size=40)
_PLAIN = st.one_of(st.none(), st.booleans(), _NUMBERS, _TEXT)
_LEAVES = _mostly(_PLAIN, _RAW, 8)
_ANY = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=10,
)


def _render(value: Any, *, ascii: bool = True) -> str:
    """JSON text of ``value``: ``Raw`` verbatim, NaN and Infinity as literals; with
    ``ascii`` every other character escaped (lone surrogates as ``\\udXXX``)."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        items = (
            f"{json.dumps(k, ensure_ascii=ascii)}:{_render(v, ascii=ascii)}"
            for k, v in value.items()
        )
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_render(v, ascii=ascii) for v in value) + "]"
    return json.dumps(value, ensure_ascii=ascii)


def _model(value: Any) -> Any:
    """A model name that never selects one of the fake upstream's fault injections."""
    if isinstance(value, str) and (value in FAKE_UPSTREAM_FAULTS or value.startswith("fail-")):
        return "echo"
    return value


# --- request bodies -----------------------------------------------------------------------


_ROLES = st.sampled_from(["user", "assistant", "system", "developer", "tool", "function"])
_ODD_PART = st.one_of(
    st.fixed_dictionaries(
        {"type": st.one_of(st.sampled_from(["text", "input_text", "image_url", "refusal"]), _ANY)},
        optional={"text": st.one_of(_TEXT, _ANY), "image_url": _ANY, "extra": _ANY},
    ),
    _ANY,
)
_TOOL_CALLS = st.lists(
    st.fixed_dictionaries(
        {
            "id": _TEXT,
            "type": st.just("function"),
            "function": st.fixed_dictionaries({"name": _TEXT, "arguments": _TEXT}),
        }
    ),
    max_size=2,
)
_PART = _field(st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}), _ODD_PART)
_CONTENT = _field(
    st.one_of(_TEXT, st.lists(_PART, min_size=1, max_size=3)), st.one_of(st.none(), _ANY)
)
_MESSAGE = _field(
    st.fixed_dictionaries(
        {"role": _field(_ROLES, _ANY), "content": _CONTENT},
        optional={
            "name": _field(_TEXT, _ANY),
            "tool_calls": _field(_TOOL_CALLS, _ANY),
            "tool_call_id": _field(_TEXT, _ANY),
            "extra": _ANY,
        },
    ),
    _ANY,
)
_USER_MESSAGE = _field(
    st.fixed_dictionaries({"role": st.just("user"), "content": _CONTENT}), _MESSAGE
)
_HISTORY = st.builds(
    lambda earlier, last: [*earlier, last], st.lists(_MESSAGE, max_size=3), _USER_MESSAGE
)
_CHAT = st.fixed_dictionaries(
    {
        "model": _field(st.just("echo"), st.one_of(_TEXT, _ANY).map(_model)),
        "messages": _field(_HISTORY, _ANY),
        "stream": _field(st.booleans(), _ANY),
    },
    optional={
        "stream_options": _ANY,
        "max_tokens": _field(_NUMBERS, _RAW),
        "temperature": _field(_NUMBERS, _RAW),
        "tools": _ANY,
        "response_format": _ANY,
        "user": _ANY,
    },
)
_TIMESTAMPS = _mostly(
    st.one_of(
        st.floats(0, 4e9),
        st.sampled_from(["2024-01-01T00:00:00Z", "2023-06-30T12:00:00+02:00", "2024-03-01"]),
    ),
    st.one_of(
        _NUMBERS,
        _RAW,
        st.sampled_from(
            [
                "9999-12-31T23:59:59",
                "0001-01-01",
                "2024-02-30",
                "+275760-09-13",
                "1e308",
                "",
                "2024-01-01T00:00:00+25:00",
            ]
        ),
        _ANY,
    ),
    2,
)
_INGEST_MESSAGE = _field(
    st.fixed_dictionaries(
        {"role": _field(_ROLES, _ANY), "content": _CONTENT},
        optional={"timestamp": _TIMESTAMPS, "id": _ANY, "name": _field(_TEXT, _ANY)},
    ),
    _ANY,
)
_INGEST = st.fixed_dictionaries(
    {
        "conversation_id": _field(_NAME, st.one_of(_TEXT, _ANY)),
        "messages": _field(st.lists(_INGEST_MESSAGE, min_size=1, max_size=4), _ANY),
    },
    optional={"extra": _ANY},
)
_CONTENT_TYPES = _mostly(
    st.just("application/json"),
    st.sampled_from(
        [
            None,
            "application/json; charset=utf-8",
            "application/json; charset=latin-1",
            "application/json; charset=bogus",
            "APPLICATION/JSON",
            "text/json",
            "text/plain",
            "",
            "*/*",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/json;;;",
        ]
    ),
)


@dataclass(frozen=True)
class Body:
    """A request body as drawn: a JSON value (rendered), or raw bytes; how it is encoded."""

    value: Any = None
    raw: bytes | None = None
    utf8: bool = False
    prefix: bytes = b""

    def encode(self) -> bytes:
        if self.raw is not None:
            return self.raw
        if self.utf8:  # non-ASCII as UTF-8: a lone surrogate becomes invalid UTF-8
            return self.prefix + _render(self.value, ascii=False).encode("utf-8", "surrogatepass")
        return self.prefix + _render(self.value).encode("ascii")


def _bodies(shaped: st.SearchStrategy[Any]) -> st.SearchStrategy[Body]:
    """Mostly ``shaped`` JSON (as ASCII with escapes or as UTF-8, rarely after a BOM or
    whitespace), else any JSON value, random bytes or a known-bad body."""
    odd = st.one_of(
        st.builds(Body, value=_ANY),
        st.builds(Body, raw=st.binary(max_size=64)),
        st.builds(
            Body,
            raw=st.sampled_from(
                [
                    b"",
                    b"{",
                    b'{"model": "echo", "messages": [',
                    b"null",
                    b'"\xff\xfe"',
                    '{"model":"echo"}'.encode("utf-16"),
                    b'{"model":"echo","messages":[{"role":"user","content":"hi"}]}\x00',
                ]
            ),
        ),
    )
    body = st.builds(
        Body,
        value=shaped,
        utf8=st.booleans(),
        prefix=_field(st.just(b""), st.sampled_from([b"\xef\xbb\xbf", b" \n"])),
    )
    return _mostly(body, odd)


# --- the proxy under test -----------------------------------------------------------------


class CountingUpstream(FakeUpstream):
    """The fake upstream, counting the errors it answers (excluded from the 5xx rule)."""

    errors: int = 0

    def app(self) -> web.Application:
        app = super().app()

        @web.middleware
        async def count(request: web.Request, handler: Any) -> web.StreamResponse:
            try:
                response: web.StreamResponse = await handler(request)
            except Exception:
                self.errors += 1
                raise
            if response.status >= 500:
                self.errors += 1
            return response

        app.middlewares.append(count)
        return app


@dataclass
class Fuzz:
    """The proxy, a raw client, fresh tenant keys, and the count of chat POSTs sent."""

    proxy: Proxy
    upstream: CountingUpstream
    session: aiohttp.ClientSession
    keys: Iterator[str]
    chat_posts: int = 0
    log_offset: int = 0
    current: str = ""

    def __repr__(self) -> str:
        return f"Fuzz({self.proxy.url})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # hypothesis's printer
        printer.text(repr(self))

    def fresh_key(self) -> str:
        return next(self.keys)

    def tenant_key(self) -> str:
        """The tenant examples write to: the same one until an example bricks it, then
        a fresh one, so each failing example (and its shrinking) starts from a tenant
        that still answered."""
        if not self.current:
            self.current = self.fresh_key()
        return self.current

    async def send(
        self,
        method: str,
        url: str | URL,
        *,
        key: str | None,
        body: bytes | None = None,
        content_type: str | None = "application/json",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        sent = dict(headers or {})
        if key is not None:
            sent.setdefault("Authorization", f"Bearer {key}")
        skip: tuple[str, ...] = ()
        if body is not None and content_type is None:
            skip = ("Content-Type",)
        elif body is not None and content_type is not None:
            sent["Content-Type"] = content_type
        target = url if isinstance(url, URL) else URL(self.proxy.url + url)
        if method == "POST" and target.path in ("/v1/chat/completions", "/chat/completions"):
            self.chat_posts += 1
        async with self.session.request(
            method, target, data=body, headers=sent, skip_auto_headers=skip
        ) as resp:
            return resp.status, await resp.read()

    async def settle(self) -> None:
        await asyncio.wait_for(self.proxy.settle(), SETTLE_TIMEOUT_S)

    def skip_log(self) -> None:
        """Start reading the log at its current end."""
        path = self.proxy.data_dir / "logs" / "proxy.jsonl"
        self.log_offset = path.stat().st_size if path.exists() else 0

    def new_log_records(self) -> list[dict[str, Any]]:
        """The log records written since the last call. Read incrementally (a record
        that cannot be read fails the example that wrote it, not every later one) and
        split on ``\\n`` as JSON Lines are; each record must also be one line for
        ``str.splitlines()`` (which ``Proxy.log_records`` and many readers use)."""
        path = self.proxy.data_dir / "logs" / "proxy.jsonl"
        if not path.exists():
            return []
        with path.open("rb") as handle:
            handle.seek(self.log_offset)
            data = handle.read()
        data = data[: data.rfind(b"\n") + 1]
        self.log_offset += len(data)
        records = []
        for line in data.decode("utf-8").split("\n")[:-1]:
            assert len(line.splitlines()) == 1, f"a log record splits into lines: {line!r}"
            records.append(json.loads(line))
        return records


@pytest.fixture
async def fuzz(make_proxy: MakeProxy) -> AsyncIterator[Fuzz]:
    upstream = CountingUpstream()
    await upstream.start()
    keys = {f"sk-fuzz-{i}": f"t{i}" for i in range(KEYS)}
    config = proxy_config(
        upstream.url,
        auth={"mode": "keys", "keys": keys},
        memory={"formation_grace_ms": 0},
        policy={"rules": [{"type": "always"}]},
    )
    proxy = await make_proxy(config)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            yield Fuzz(proxy, upstream, session, itertools.cycle(keys))
    finally:
        await upstream.stop()


async def _example(fuzz: Fuzz, key: str, request: Any) -> None:
    """Send ``request`` (a coroutine function giving status and body), then check every
    property for it."""
    await fuzz.settle()
    fuzz.skip_log()
    posts, upstream_errors = fuzz.chat_posts, fuzz.upstream.errors
    status, body = await request()
    event(f"status {status} {_error_code(body)}".rstrip())  # --hypothesis-show-statistics
    if fuzz.upstream.errors == upstream_errors:
        assert status < 500, f"the proxy answered {status}: {body[:300]!r}"
    await _tenant_still_answers(fuzz, key)
    await fuzz.settle()
    logged = sum(1 for r in fuzz.new_log_records() if r.get("event") == "chat")
    sent = fuzz.chat_posts - posts
    assert logged == sent, f"{sent} chat requests wrote {logged} chat log lines"


def _error_code(body: bytes) -> str:
    try:
        return str(json.loads(body)["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return ""


async def _tenant_still_answers(fuzz: Fuzz, key: str) -> None:
    status, body = await fuzz.send("GET", "/memory/search?q=x", key=key)
    chat = {"model": "echo", "messages": [{"role": "user", "content": "still there?"}]}
    data = json.dumps(chat).encode()
    chat_status, chat_body = await fuzz.send("POST", "/v1/chat/completions", key=key, body=data)
    if (status != 200 or chat_status != 200) and key == fuzz.current:
        fuzz.current = ""  # bricked: the next example starts on a fresh tenant
    assert status == 200, f"GET /memory/search?q=x afterwards: {status} {body[:300]!r}"
    assert chat_status == 200, f"a normal chat afterwards: {chat_status} {chat_body[:300]!r}"
    assert b"echo: still there?" in chat_body


# --- the tests ----------------------------------------------------------------------------


_USER_HI = {"role": "user", "content": "hi"}


@settings(FUZZ, max_examples=150)
@given(body=_bodies(_CHAT), content_type=_CONTENT_TYPES)
@example(Body(raw=b"[" * 5000 + b"]" * 5000), "application/json")
@example(
    Body(value={"model": "echo", "messages": [_USER_HI], "x": _nested(5000, "object")}),
    "application/json",
)
@example(
    Body(value={"model": "echo", "messages": [{"role": "user", "content": "\ud800"}]}),
    "application/json",
)
@example(
    Body(value={"model": "echo", "messages": [_USER_HI], "n": Raw("1e400")}), "application/json"
)
@example(
    Body(value={"model": "echo", "messages": [_USER_HI], "n": _digits(5000, False)}),
    "application/json",
)
@example(
    Body(value={"model": "echo", "messages": [{"role": [], "content": "x"}, _USER_HI]}),
    "application/json",
)
async def test_any_chat_body_is_answered_logged_and_harmless(
    fuzz: Fuzz, body: Body, content_type: str | None
) -> None:
    key = fuzz.tenant_key()
    data = body.encode()

    async def request() -> tuple[int, bytes]:
        return await fuzz.send(
            "POST", "/v1/chat/completions", key=key, body=data, content_type=content_type
        )

    await _example(fuzz, key, request)


@settings(FUZZ, max_examples=120)
@given(body=_bodies(_INGEST), content_type=_CONTENT_TYPES)
@example(
    Body(value={"conversation_id": "c", "messages": [{**_USER_HI, "timestamp": 1e308}]}),
    "application/json",
)
@example(
    Body(value={"conversation_id": "c", "messages": [{**_USER_HI, "timestamp": Raw("1e400")}]}),
    None,
)
@example(
    Body(value={"conversation_id": "c", "messages": [{**_USER_HI, "timestamp": "+275760-09-13"}]}),
    None,
)
@example(Body(value={"conversation_id": "\ud800", "messages": [_USER_HI]}), "application/json")
@example(
    Body(value={"conversation_id": "c", "messages": [{"role": {}, "content": None}]}),
    "application/json",
)
async def test_any_ingest_body_is_answered_and_harmless(
    fuzz: Fuzz, body: Body, content_type: str | None
) -> None:
    key = fuzz.tenant_key()
    data = body.encode()

    async def request() -> tuple[int, bytes]:
        return await fuzz.send(
            "POST", "/memory/ingest", key=key, body=data, content_type=content_type
        )

    await _example(fuzz, key, request)


_LINE_BREAKERS = ["a\x85b", "a\u2028b", "a\u2029b", "a\x1cb", "a\rb", "a\nb"]
"""Characters ``str.splitlines()`` breaks on, besides ``\\n``: a log must escape them."""
_PARAM_NAMES = st.one_of(
    st.sampled_from(["q", "k", "budget", "limit", "name", "entity"]), _TEXT.filter(bool)
)
_PARAM_VALUES = st.one_of(
    _TEXT,
    st.sampled_from(_LINE_BREAKERS),
    st.integers().map(str),
    st.sampled_from(
        ["", "0", "-1", "1e9", "NaN", "inf", " 5", "٣", "0x10", "9" * 5000, "x" * 3000]
    ),
)
_RAW_PIECES = st.sampled_from(
    ["%", "%Z", "%ZZ", "%ED%A0%80", "%00", "%F0%9F", "%C0%AF", "&&", "==", ";", "+", "%2B%26"]
)
_PATHS = st.sampled_from(
    [
        "/memory/search",
        "/memory/area",
        "/memory/entities",
        "/memory/relations",
        "/memory/contexts",
        "/memory/stats",
    ]
)
_RECEIPT_IDS = st.one_of(
    _TEXT.filter(bool),
    st.sampled_from(_LINE_BREAKERS),
    st.sampled_from(
        ["..", "%2F", "%2e%2e%2fetc", "%00", "rcpt_" + "0" * 24, "a" * 3000, "%ED%A0%80"]
    ),
)


def _encoded(text: str) -> str:
    return quote(text, safe="", errors="surrogatepass")


@st.composite
def _queries(draw: st.DrawFn) -> str:
    """A path and query string as sent, percent-encoded or deliberately malformed."""
    if draw(st.integers(0, 4)) == 0:
        ident = draw(_RECEIPT_IDS)
        as_is = ident.startswith(("%", ".")) and ident.isascii() and ident.isprintable()
        raw = ident if as_is else _encoded(ident)
        return f"/memory/receipts/{raw}"
    pieces = []
    for _ in range(draw(st.integers(0, 5))):
        if draw(st.integers(0, 5)) == 0:
            pieces.append(draw(_RAW_PIECES))
        else:
            pieces.append(f"{_encoded(draw(_PARAM_NAMES))}={_encoded(draw(_PARAM_VALUES))}")
    return f"{draw(_PATHS)}?{'&'.join(pieces)}"


@pytest.fixture
async def known_key(fuzz: Fuzz) -> str:
    """A tenant that holds a small, formed memory, so queries find something."""
    key = fuzz.fresh_key()
    messages = [
        {"role": "user", "content": "Ana moved to Lisbon in May; she works as a nurse."},
        {"role": "assistant", "content": "Lisbon in May is lovely. Does Ana like it?"},
        {"role": "user", "content": "Yes, and Marco visits her every month from Porto."},
    ]
    data = json.dumps({"conversation_id": "seed", "messages": messages}).encode()
    status, body = await fuzz.send("POST", "/memory/ingest", key=key, body=data)
    assert status == 200, body
    return key


@settings(FUZZ, max_examples=120)
@given(path=_queries())
@example("/memory/receipts/%C2%85")
@example("/memory/receipts/%E2%80%A8")
@example("/memory/search?q=%ED%A0%80&k=99999999999999999999")
@example("/memory/area?q=%00&k=%D9%A3")
async def test_any_query_string_is_answered(fuzz: Fuzz, known_key: str, path: str) -> None:
    url = URL(fuzz.proxy.url + path, encoded=True)

    async def request() -> tuple[int, bytes]:
        return await fuzz.send("GET", url, key=known_key)

    await _example(fuzz, known_key, request)


_HEADER_TEXT = st.text(
    st.characters(blacklist_categories=["Cs", "Cc"]) | st.just("\t"), max_size=300
)
_LONG_HEADER = st.sampled_from(["x" * 4000, "é" * 1500, "../" * 500])


@settings(FUZZ, max_examples=80)
@given(
    memory=st.one_of(
        st.none(), st.sampled_from(["auto", "force", "off", "OFF", " off ", "on", ""]), _HEADER_TEXT
    ),
    conversation=st.one_of(st.none(), _HEADER_TEXT, _LONG_HEADER),
    authorization=_mostly(
        st.sampled_from([None, "Bearer {key}", "bearer  {key}  "]),
        st.one_of(
            _HEADER_TEXT,
            st.sampled_from(["Bearer", "Bearer ", "Basic c2stZnV6ei0x", "{key}", "Bearer\t{key}"]),
            _HEADER_TEXT.map(lambda junk: "Bearer {key}" + junk),
        ),
        1,
    ),
    stream=st.booleans(),
)
async def test_any_memory_conversation_or_auth_header_is_answered(
    fuzz: Fuzz,
    memory: str | None,
    conversation: str | None,
    authorization: str | None,
    stream: bool,
) -> None:
    key = fuzz.tenant_key()
    headers = {}
    if memory is not None:
        headers["X-Memory"] = memory
    if conversation is not None:
        headers["X-Conversation-Id"] = conversation
    if authorization is not None:
        headers["Authorization"] = authorization.replace("{key}", key)
    chat = {"model": "echo", "stream": stream, "messages": [{"role": "user", "content": "hi"}]}
    data = json.dumps(chat).encode()

    async def request() -> tuple[int, bytes]:
        status, body = await fuzz.send(
            "POST", "/v1/chat/completions", key=key, body=data, headers=headers
        )
        for path in ("/memory/stats", "/memory/search?q=hi"):
            other, answer = await fuzz.send("GET", path, key=key, headers=headers)
            assert other < 500, f"GET {path}: {other} {answer[:300]!r}"
        return status, body

    await _example(fuzz, key, request)
