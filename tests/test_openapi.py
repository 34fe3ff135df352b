"""``GET /openapi.json``: a valid OpenAPI 3.1 document describing every route, and every
real response of a real proxy (in front of the fake upstream) fits what it declares."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]  # ships no hints
from openapi_spec_validator import validate as validate_spec
from pydantic import ValidationError

from memory_core.views import AreaExplanation, EntityView
from proxy.api.routes import build_document
from proxy.api.schemas import Receipt
from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, Proxy, proxy_config
from .test_inspection import TRANSCRIPT

pytestmark = pytest.mark.e2e

Json = dict[str, Any]
KEYS = {"sk-alice": "alice"}
QUESTION = "Do you remember where Rui lives?"


@dataclass
class Exchange:
    """One real response: the route it answered and what it sent."""

    path: str
    method: str
    status: int
    content_type: str
    text: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> Any:
        return json.loads(self.text)


class Client:
    """Records every response, keyed by the document's path template."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http, self.url = http, url
        self.seen: list[Exchange] = []

    async def call(
        self, method: str, path: str, template: str | None = None, **kwargs: Any
    ) -> Exchange:
        async with self.http.request(method, self.url + path, **kwargs) as response:
            body = await response.read()
            exchange = Exchange(
                template or path,
                method.lower(),
                response.status,
                response.content_type,
                body.decode("utf-8", "replace"),  # an export is a zip: never read as text
                dict(response.headers),
                body,
            )
        self.seen.append(exchange)
        return exchange


def _media(operation: Json, status: int, content_type: str) -> Json:
    """The media type object the document declares for a status and content type."""
    responses = operation["responses"]
    declared = responses.get(str(status)) or responses.get(f"{status // 100}XX")
    assert declared is not None, f"status {status} not declared"
    for name, media in declared["content"].items():
        if name.split(";")[0].strip() == content_type:
            return dict(media)
    raise AssertionError(f"{content_type} not declared for {status}: {list(declared['content'])}")


def _check(schema: Json, components: Json, value: Any, where: str) -> None:
    """``value`` against ``schema``; ``#/components/...`` refs resolve against the root."""
    validator = Draft202012Validator({**schema, "components": components})
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
    assert not errors, f"{where}: " + "; ".join(
        f"{list(e.absolute_path)}: {e.message[:300]}" for e in errors[:5]
    )


def _conforms(document: Json, exchange: Exchange) -> None:
    operation = document["paths"][exchange.path][exchange.method]
    media = _media(operation, exchange.status, exchange.content_type)
    where = f"{exchange.method.upper()} {exchange.path} {exchange.status}"
    components = document["components"]
    if exchange.content_type == "application/json":
        _check(media["schema"], components, exchange.json(), where)
        return
    _check(media["schema"], components, exchange.text, where)
    if exchange.content_type == "text/event-stream":
        events = [line[6:] for line in exchange.text.splitlines() if line.startswith("data: ")]
        assert events and events[-1] == "[DONE]"
        for event in events[:-1]:
            _check(media["x-sse-data"], components, json.loads(event), where + " event")


def _routes(proxy: Proxy) -> set[tuple[str, str]]:
    """(path, method) of every route the app serves (aiohttp's implicit HEADs aside)."""
    return {
        (route.resource.canonical, route.method.lower())
        for route in proxy.server.runner.app.router.routes()
        if route.resource is not None and route.method != "HEAD"
    }


def test_document_is_valid_openapi_3_1() -> None:
    document = build_document()
    validate_spec(document)
    assert document["openapi"] == "3.1.0"
    for schema in document["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)


async def test_every_route_is_described(proxy: Proxy) -> None:
    document = build_document()
    described = {(path, method) for path, item in document["paths"].items() for method in item}
    assert _routes(proxy) == described


async def test_every_endpoint_answers_as_described(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    # a generous lookup budget: on a loaded test machine the default 250 ms may skip
    # memory, and this test needs a receipt with an area in it
    proxy = await make_proxy(proxy_config(upstream.url, memory={"retrieval_timeout_ms": 30_000}))
    async with aiohttp.ClientSession() as http:
        client = Client(http, proxy.url)
        served = await client.call("GET", "/openapi.json")
        document = served.json()
        validate_spec(document)
        assert document == build_document()
        await _exercise(client)
        await proxy.settle()
        await _inspect(client)
        await _history(client)
    for exchange in client.seen:
        _conforms(document, exchange)
    ok = {(e.path, e.method) for e in client.seen if e.status < 300}
    described = {(path, method) for path, item in document["paths"].items() for method in item}
    assert ok == described  # every operation was seen answering, and checked
    statuses = {(e.path, e.status) for e in client.seen}
    assert {("/v1/chat/completions", 400), ("/memory/receipts/{receipt_id}", 404)} <= statuses


async def _exercise(client: Client) -> None:
    """Every endpoint once (chat with memory, so receipts exist), and error answers."""
    await client.call("GET", "/healthz")
    await client.call("GET", "/readyz")
    await client.call("GET", "/v1/models")
    ingested = await client.call("POST", "/memory/ingest", json=TRANSCRIPT)
    assert ingested.status == 200, ingested.text
    chat = {"model": "echo", "messages": [{"role": "user", "content": QUESTION}]}
    answered = await client.call("POST", "/v1/chat/completions", json=chat)
    streamed = await client.call(
        "POST", "/chat/completions", json={**chat, "stream": True}, headers={"X-Memory": "force"}
    )
    assert streamed.content_type == "text/event-stream"
    for reply in (answered, streamed):
        assert reply.status == 200, reply.text
        receipt = reply.headers["X-Memory-Receipt"]
        shown = await client.call(
            "GET", f"/memory/receipts/{receipt}", "/memory/receipts/{receipt_id}"
        )
        assert shown.status == 200, shown.text
        assert shown.json()["graph_area"]["region"] is not None
    for path, body in (
        ("/v1/messages", {"model": "echo", "max_tokens": 64, "messages": chat["messages"]}),
        ("/v1/responses", {"model": "echo", "input": QUESTION}),
    ):
        door = await client.call("POST", path, json=body, headers={"X-Memory": "force"})
        assert door.status == 200, door.text
        assert door.headers["X-Memory-Receipt"].startswith("rcpt_")
    await _errors(client, chat)


async def _errors(client: Client, chat: Json) -> None:
    bad = await client.call(
        "POST",
        "/v1/chat/completions",
        data=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    assert bad.status == 400 and bad.json()["error"]["code"] == "invalid_request"
    media = await client.call(
        "POST", "/memory/ingest", data=b"x", headers={"Content-Type": "text/plain"}
    )
    assert media.status == 415
    missing = await client.call(
        "GET", "/memory/receipts/rcpt_nope", "/memory/receipts/{receipt_id}"
    )
    assert missing.status == 404 and missing.json()["error"]["code"] == "receipt_not_found"
    assert (await client.call("GET", "/memory/search")).status == 400
    bad_message = await client.call("POST", "/v1/messages", json={"model": "echo"})
    assert bad_message.status == 400 and bad_message.json()["type"] == "error"
    bridged = await client.call(
        "POST", "/v1/responses", json={"model": "echo", "input": "hi", "background": True}
    )
    assert bridged.status == 400 and bridged.json()["error"]["param"] == "background"
    assert (await client.call("GET", "/memory/entities", params={"limit": "0"})).status == 400
    limited = await client.call("POST", "/v1/chat/completions", json={**chat, "model": "fail-429"})
    assert limited.status == 429 and "Retry-After" in limited.headers
    refused = await client.call("POST", "/v1/chat/completions", json={**chat, "model": "fail-401"})
    assert refused.status == 502


async def _inspect(client: Client) -> None:
    for path, params in [
        ("/memory/search", {"q": "Rui"}),
        ("/memory/stats", {}),
        ("/memory/entities", {}),
        ("/memory/entities", {"name": "lisbon"}),
        ("/memory/contexts", {}),
        ("/memory/relations", {"entity": "Rui"}),
        ("/memory/area", {"q": "Where does Rui live now?"}),
        ("/metrics", {}),
        ("/memory/receipts", {}),
        ("/memory/forgets", {}),
        ("/cluster/tenants", {}),
        ("/ui", {}),
    ]:
        answer = await client.call("GET", path, params=params)
        assert answer.status == 200, answer.text
    page = await client.call("GET", "/ui/app.js", "/ui/{file}")
    assert page.status == 200 and page.content_type == "text/javascript"


LATER = {
    "conversation_id": "week-2",
    "messages": [
        {"role": "user", "name": "Rui", "content": "I work at Sonae in Porto now.",
         "timestamp": "2024-03-09T09:00:00"},
        {"role": "assistant", "content": "Congratulations on the new job!",
         "timestamp": "2024-03-09T09:00:05"},
    ],
}  # fmt: skip


async def _history(client: Client) -> None:
    """Cycles, snapshots, a diff, answers as of a snapshot, a rollback, held messages."""
    first = await client.call("POST", "/memory/dream")
    assert first.status == 200, first.text
    assert (await client.call("POST", "/memory/ingest", json=LATER)).status == 200
    second = await client.call("POST", "/memory/dream")
    older, newer = first.json()["snapshot"], second.json()["snapshot"]
    one = "/memory/snapshots/{snapshot}"
    diff = "/memory/snapshots/{a}/diff/{b}"
    for path, template, params in [
        ("/memory/snapshots", None, {}),
        (f"/memory/snapshots/{newer}", one, {}),
        (f"/memory/snapshots/{older}/diff/{newer}", diff, {}),
        ("/memory/search", None, {"q": "Rui", "as_of": str(older)}),
        ("/memory/area", None, {"q": "Where does Rui work?", "as_of": str(older)}),
    ]:
        answer = await client.call("GET", path, template, params=params)
        assert answer.status == 200, answer.text
    chat = {"model": "echo", "messages": [{"role": "user", "content": QUESTION}]}
    as_of = await client.call(
        "POST", "/v1/chat/completions", json=chat,
        headers={"X-Memory": "force", "X-Memory-As-Of": str(older)},
    )  # fmt: skip
    assert as_of.status == 200, as_of.text
    restored = await client.call("POST", "/memory/rollback", json={"snapshot": older})
    assert restored.status == 200, restored.text
    assert restored.json()["held"] >= 2
    assert (await client.call("GET", "/memory/held")).status == 200
    for status, path, template, kwargs in [
        (404, "/memory/snapshots/9999", one, {}),
        (400, "/memory/snapshots/x", one, {}),
        (404, f"/memory/snapshots/{older}/diff/9999", diff, {}),
        (400, "/memory/search", None, {"params": {"q": "Rui", "as_of": "-1"}}),
        (404, "/memory/area", None, {"params": {"q": "Rui", "as_of": "9999"}}),
    ]:
        answer = await client.call("GET", path, template, **kwargs)
        assert answer.status == status, (path, answer.text)
    for body, status in [({"snapshot": 0}, 400), ({"snapshot": 9999}, 404), ({"x": 1}, 400)]:
        answer = await client.call("POST", "/memory/rollback", json=body)
        assert answer.status == status, (body, answer.text)
    unknown = await client.call(
        "POST", "/v1/chat/completions", json=chat, headers={"X-Memory-As-Of": "9999"}
    )
    assert unknown.status == 400 and unknown.json()["error"]["code"] == "snapshot_not_found"
    await _transfer(client)


async def _transfer(client: Client) -> None:
    """An export, loaded back over what the tenant holds; refused without ``replace``."""
    exported = await client.call("GET", "/memory/export")
    assert exported.status == 200 and exported.content_type == "application/zip"
    zipped = {"Content-Type": "application/zip"}
    for query, status in (({}, 409), ({"replace": "true"}, 200)):
        loaded = await client.call(
            "POST", "/memory/import", data=io.BytesIO(exported.body), headers=zipped, params=query
        )
        assert loaded.status == status, loaded.text


async def test_keys_auth_errors_and_empty_memory(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    """401 without a key; an empty tenant's views and area (no activation) fit too."""
    proxy = await make_proxy(proxy_config(upstream.url, auth={"keys": KEYS}))
    document = build_document()
    key = {"Authorization": "Bearer sk-alice"}
    async with aiohttp.ClientSession() as http:
        client = Client(http, proxy.url)
        for path in ("/v1/models", "/memory/stats", "/memory/relations"):
            assert (await client.call("GET", path)).status == 401
        bad_key = await client.call("GET", "/memory/entities", headers={"X-Api-Key": "sk-nobody"})
        assert bad_key.status == 401
        assert (await client.call("GET", "/openapi.json")).status == 200  # open
        empty = await client.call("GET", "/memory/area", params={"q": "anything"}, headers=key)
        assert empty.status == 200 and empty.json()["area"] is None
        for path in ("/memory/entities", "/memory/contexts", "/memory/relations", "/memory/stats"):
            assert (await client.call("GET", path, headers=key)).status == 200
    for exchange in client.seen:
        _conforms(document, exchange)


async def test_bm25_receipt(upstream: FakeUpstream, make_proxy: MakeProxy) -> None:
    """A receipt of BM25 retrieval (no graph area) fits its schema too. The lookup's
    budget is generous: the test is about the receipt, and on a busy machine (a clean
    clone's run) the first lookup of a fresh proxy once came back empty, past the default
    250 ms budget or shed while the event loop ran late (both scale with the budget)."""
    memory = {"retrieval": "bm25", "retrieval_timeout_ms": 10_000}
    proxy = await make_proxy(proxy_config(upstream.url, memory=memory))
    chat = {"model": "echo", "messages": [{"role": "user", "content": QUESTION}]}
    async with aiohttp.ClientSession() as http:
        client = Client(http, proxy.url)
        await client.call("POST", "/memory/ingest", json=TRANSCRIPT)
        answered = await client.call("POST", "/v1/chat/completions", json=chat)
        receipt = answered.headers["X-Memory-Receipt"]
        shown = await client.call(
            "GET", f"/memory/receipts/{receipt}", "/memory/receipts/{receipt_id}"
        )
    body = shown.json()
    assert body["graph_area"] is None and body["area"]["kind"] == "fts5-bm25 fragments"
    assert body["area"]["fragments"], body["memory_error"]
    for exchange in client.seen:
        _conforms(build_document(), exchange)


async def test_served_views_are_the_produced_json(proxy: Proxy) -> None:
    """Validating into the view models changes no byte of what memory produced."""
    async with aiohttp.ClientSession() as http:
        client = Client(http, proxy.url)
        await client.call("POST", "/memory/ingest", json=TRANSCRIPT)
        chat = {"model": "echo", "messages": [{"role": "user", "content": QUESTION}]}
        receipt = (await client.call("POST", "/v1/chat/completions", json=chat)).headers[
            "X-Memory-Receipt"
        ]
        await proxy.settle()
        served = {
            "entities": (await client.call("GET", "/memory/entities")).text,
            "contexts": (await client.call("GET", "/memory/contexts")).text,
            "relations": (await client.call("GET", "/memory/relations")).text,
            "receipt": (await client.call("GET", f"/memory/receipts/{receipt}")).text,
        }
    memory = proxy.services.tenants.get("default")

    def plain(views: list[Any]) -> list[Any]:
        return [view.model_dump(mode="json") for view in views]

    produced = {
        "entities": {"entities": plain(await memory.entities(limit=100, name=None))},
        "contexts": {"contexts": plain(await memory.contexts(limit=100))},
        "relations": {
            "entity": None,
            "relations": plain(await memory.relations(entity=None, limit=100)),
        },
        "receipt": await memory.receipt(receipt),
    }
    for name, value in produced.items():
        assert served[name] == json.dumps(value), name


def test_views_refuse_drift() -> None:
    """A producer that adds or renames a key fails validation, loudly."""
    entity = {
        "id": 1,
        "name": "Rui",
        "label": "PER",
        "is_speaker": True,
        "mentions": 1,
        "first_seen": 1.0,
        "last_seen": None,
        "interpretation": "linking@1",
        "aliases": [],
        "contexts": [],
    }
    assert EntityView.model_validate(entity).model_dump(mode="json") == entity
    with pytest.raises(ValidationError):
        EntityView.model_validate({**entity, "surprise": 1})
    with pytest.raises(ValidationError):
        Receipt.model_validate({"id": "rcpt_x"})
    explained: dict[str, Any] = {
        "graph_version": 0,
        "graph": {"nodes": 0, "edges": 0, "delta_edges": 0, "fragments": 0},
        "foci": [],
        "timings_ms": {},
        "fragments": [{"id": 4, "score": 0.5, "terms": {"bm25": 0.5}, "imputed": False}],
        "area": None,
        "candidates": [],
    }
    defaults = {"kind": "stated", "factor": 1.0, "cosine": None}
    ranked = [{**f, **defaults} for f in explained["fragments"]]
    assert AreaExplanation.model_validate(explained).model_dump(mode="json") == {
        **explained,
        "fragments": ranked,
        "visited": None,
        "bridged": {},
        "named": {},
    }
    with pytest.raises(ValidationError):  # bare ids are no longer a ranked fragment
        AreaExplanation.model_validate({**explained, "fragments": [3]})


async def test_a_receipt_stored_before_the_typed_contract_is_still_served(
    proxy: Proxy,
) -> None:
    """Upgrading keeps what is stored readable: a receipt in the shape the proxy wrote
    before receipts were typed (no per-fragment terms, no ``visited`` without
    activation) is served as stored and conforms to the document."""
    old = {
        "id": "rcpt_before",
        "created_at": 1_700_000_000.5,
        "tenant": "default",
        "model": "echo",
        "conversation_id": "conv-1",
        "decision": {
            "retrieve": True,
            "reason": "forced by header",
            "rule": None,
            "budget_tokens": 600,
            "max_fragments": 8,
        },
        "memory_error": None,
        "area": {"kind": "area (graph + bm25)", "fragments": []},
        "injected_text": "",
        "tokens": 0,
        "timings_ms": {"retrieval_ms": 3.2},
        "upstream_status": 200,
        "graph_version": 4,
        "graph_area": {
            "graph_version": 4,
            "operator": None,
            "foci": ["word:bee"],
            "timings_ms": {"total_ms": 3.0},
            "region": None,
        },
    }
    proxy.services.tenants.get("default").store.save_receipt("rcpt_before", old)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/memory/receipts/rcpt_before") as response:
            assert response.status == 200, await response.text()
            served = await response.json()
    document = build_document()
    schema = document["paths"]["/memory/receipts/{receipt_id}"]["get"]["responses"]["200"]
    _check(schema["content"]["application/json"]["schema"], document["components"], served, "old")
    area = served["graph_area"]
    assert area.pop("fragments") == [] and area.pop("visited") is None
    assert area.pop("bridged") == {} and area.pop("named") == {}
    added: dict[str, Any] = {
        "statements": [], "citations": [], "coverage": None, "tokenizer": "", "as_of": None
    }
    assert {k: served.pop(k) for k in added} == added  # fields receipts gained since: empty
    assert served == old
