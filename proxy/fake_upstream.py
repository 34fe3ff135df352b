"""A deterministic OpenAI-compatible server for demos, benchmarks and tests.

It answers ``echo: <last user message>`` (JSON or SSE), records every request it
receives, and injects faults chosen by the requested model name, so the proxy's error
paths can be exercised against a real HTTP server. A test can instead script the
answers: while ``script`` is not empty, each chat request pops its first item and
answers with that text, or with what the item returns when called with the request
body (a fake translator, a model that answers badly then well). The fault-injecting
model names below still take precedence:

- ``fail-<status>``: answer that HTTP status with an OpenAI error object;
- ``hang``: never answer (the client's timeout fires);
- ``die-mid-stream``: stream two chunks, then drop the connection;
- ``slow``: wait ``slow_delay_s`` between streamed chunks;
- ``gzip``: answer a non-streamed request gzip-compressed (``Content-Encoding: gzip``)
  whatever the client's ``Accept-Encoding`` says, as some servers do;
- ``call-tool``: answer with a call of the request's first tool (arguments
  ``{"city": "Lisbon"}``), streamed or not;
- ``recall``: a model that answers from the memory it is shown, as people's models do:
  the line of the ``<retrieved_memory>`` block that shares the most words with the
  question, restated without its citation (``From what you told me: …``), or ``I don't
  know.`` when it was shown none (for tests and evaluations of memory in real use).

It also serves Anthropic's ``POST /v1/messages`` and OpenAI's ``POST /v1/responses``
natively (the echo of the last user text, as a message or a response, or their event
streams; ``call-tool`` and ``fail-<status>`` too), recording each request, for tests of
the proxy's native forwarding.

``record``, a path (``--record FILE`` when run alone), also appends each request it
receives to that file as one JSON line (``path``, and ``raw``: the body's exact text), so
a program driving a proxy from outside sees what reached the model byte for byte
(``scripts/bench_prompt_cache.py``).

Realistic pacing for load tests: ``first_token_s`` before the first byte of any answer
and ``tokens_per_s`` for the rest (one word is one token; a non-streamed answer waits
for all of them). Every answer carries the headers a real OpenAI server sends
(``x-request-id``, ``openai-processing-ms``, ``x-ratelimit-*``; ``retry-after`` on 429);
a streamed answer ends with a usage chunk when the request asks for
``stream_options.include_usage``. ``in_flight`` counts requests still being answered, so
a test can see that the proxy gave up an abandoned one.

With ``keep_alive`` False every answer closes its connection, so a client that pools
connections beyond the test (litellm's cached synchronous clients) holds no socket.

Run it alone with ``python -m proxy.fake_upstream --port 9100``.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from memory_core import message_text

from .http import sse

__all__ = ["FakeUpstream", "Recorded", "ScriptedReply"]

ScriptedReply = str | Callable[[dict[str, Any]], str]
"""An answer's text, or a function of the request body that returns it."""


@dataclass(frozen=True)
class Recorded:
    """One request as the fake upstream received it."""

    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes
    query: str = ""


@dataclass
class FakeUpstream:
    """The server; ``start`` binds a loopback port, ``url`` is its ``/v1`` base."""

    host: str = "127.0.0.1"
    port: int = 0
    slow_delay_s: float = 0.05
    requests: list[Recorded] = field(default_factory=list)
    script: list[ScriptedReply] = field(default_factory=list)
    keep_alive: bool = True
    first_token_s: float = 0.0
    tokens_per_s: float = 0.0
    in_flight: int = 0
    served: int = 0
    record: Path | None = None
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/messages", self._native)
        app.router.add_post("/v1/responses", self._native)
        app.router.add_get("/v1/models", self._models)
        app.on_response_prepare.append(self._before_answer)
        return app

    async def start(self) -> FakeUpstream:
        self._runner = web.AppRunner(self.app(), access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _keep(self, request: web.Request, body: dict[str, Any], raw: bytes) -> None:
        """Remember the request (and append it to ``record``, when set)."""
        self.requests.append(Recorded(dict(request.headers), body, raw, request.query_string))
        if self.record is not None:
            line = {"path": request.path, "raw": raw.decode("utf-8", "surrogateescape")}
            with self.record.open("a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")

    async def _before_answer(self, request: web.Request, response: web.StreamResponse) -> None:
        if not self.keep_alive:
            response.force_close()
            response.headers["Connection"] = "close"
        if request.path.endswith("/chat/completions"):
            response.headers.update(_openai_headers(self.served, response.status))

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "echo", "object": "model"}]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.served += 1
        try:
            return await self._answer_chat(request)
        finally:
            self.in_flight -= 1

    async def _answer_chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw)
        self._keep(request, body, raw)
        model = str(body.get("model", ""))
        if model.startswith("fail-"):
            status = int(model.removeprefix("fail-"))
            error = {
                "error": {
                    "message": f"fake upstream failure {status}",
                    "type": "fake_error",
                    "param": None,
                    "code": f"fake_{status}",
                }
            }
            return web.json_response(error, status=status)
        if model == "hang":
            await _until_client_leaves(request)
        if model == "call-tool":
            return await self._call_tool(request, body)
        text = self._answer(body)
        await asyncio.sleep(self.first_token_s)
        if body.get("stream"):
            return await self._stream(request, model, text, _wants_usage(body))
        await asyncio.sleep(self._token_delay() * max(0, len(text.split(" ")) - 1))
        completion = json.dumps(_completion(model, text)).encode()
        if model == "gzip":
            return web.Response(
                body=gzip.compress(completion),
                headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
            )
        return web.Response(body=completion, content_type="application/json")

    async def _native(self, request: web.Request) -> web.StreamResponse:
        """``/v1/messages`` and ``/v1/responses``, answered in their own formats."""
        raw = await request.read()
        body = json.loads(raw)
        self._keep(request, body, raw)
        self.served += 1
        model = str(body.get("model", ""))
        anthropic = request.path.endswith("/messages")
        if model.startswith("fail-"):
            status = int(model.removeprefix("fail-"))
            message = f"fake upstream failure {status}"
            error = (
                {"type": "error", "error": {"type": "api_error", "message": message}}
                if anthropic
                else {"error": {"message": message, "type": "fake_error", "code": None}}
            )
            return web.json_response(error, status=status)
        tool = _first_tool(body) if model == "call-tool" else None
        text = self._native_answer(body, anthropic)
        events = _message_events(model, text, tool) if anthropic else _response_events(
            model, text, tool, f"resp_fake_{self.served}"
        )
        if not body.get("stream"):
            return web.json_response(events[-1][1]["message" if anthropic else "response"])
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for name, data in events[:-1] if anthropic else events:
            await response.write(sse.event(json.dumps(data).encode(), name))
        if anthropic:
            await response.write(sse.event(b'{"type": "message_stop"}', "message_stop"))
        await response.write_eof()
        return response

    def _native_answer(self, body: dict[str, Any], anthropic: bool) -> str:
        if self.script:
            reply = self.script.pop(0)
            return reply if isinstance(reply, str) else reply(body)
        last = _last_anthropic_text(body) if anthropic else _last_input_text(body)
        return "echo: " + last

    def _token_delay(self) -> float:
        return 1 / self.tokens_per_s if self.tokens_per_s > 0 else 0.0

    def _answer(self, body: dict[str, Any]) -> str:
        """The next scripted answer, else the ``recall`` model's or the echo of the last
        user message."""
        messages = body.get("messages") or []
        if not self.script and body.get("model") == "recall":
            return recalled(messages)
        if not self.script:
            return "echo: " + _last_user_text(messages)
        reply = self.script.pop(0)
        return reply if isinstance(reply, str) else reply(body)

    async def _stream(
        self, request: web.Request, model: str, text: str, usage: bool
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        words = text.split(" ")
        for i, word in enumerate(words):
            piece = word if i == 0 else " " + word
            await response.write(sse.event(json.dumps(_chunk(model, piece)).encode()))
            if model == "die-mid-stream" and i == 1:
                assert request.transport is not None
                request.transport.abort()
                return response
            if model == "slow":
                await asyncio.sleep(self.slow_delay_s)
            elif i + 1 < len(words):
                await asyncio.sleep(self._token_delay())
        await response.write(sse.event(json.dumps(_chunk(model, None, "stop")).encode()))
        if usage:
            final = {**_chunk(model, None), "choices": [], "usage": _usage(text)}
            await response.write(sse.event(json.dumps(final).encode()))
        await response.write(sse.DONE)
        await response.write_eof()
        return response


    async def _call_tool(self, request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        """A chat answer that calls the request's first tool."""
        name, arguments = _first_tool(body) or ("none", {})
        encoded = json.dumps(arguments)
        call: dict[str, Any] = {"id": "call_fake", "type": "function",
                                "function": {"name": name, "arguments": encoded}}  # fmt: skip
        if not body.get("stream"):
            completion = _completion("call-tool", "")
            completion["choices"][0]["message"] = {
                "role": "assistant", "content": None, "tool_calls": [call]
            }  # fmt: skip
            completion["choices"][0]["finish_reason"] = "tool_calls"
            return web.json_response(completion)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        first = {**_chunk("call-tool", None), "choices": [{"index": 0, "finish_reason": None,
                 "delta": {"role": "assistant", "tool_calls": [{"index": 0, **call,
                 "function": {"name": name, "arguments": ""}}]}}]}  # fmt: skip
        rest = {**_chunk("call-tool", None), "choices": [{"index": 0, "finish_reason": None,
                "delta": {"tool_calls": [{"index": 0, "function": {
                    "arguments": encoded}}]}}]}  # fmt: skip
        for chunk in (first, rest, _chunk("call-tool", None, "tool_calls")):
            await response.write(sse.event(json.dumps(chunk).encode()))
        await response.write(sse.DONE)
        await response.write_eof()
        return response


def _first_tool(body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The name of the request's first tool (chat, Messages or Responses shape) and the
    arguments the fake calls it with."""
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, dict) else tool.get("name")
            if isinstance(name, str):
                return name, {"city": "Lisbon"}
    return None


def _last_anthropic_text(body: dict[str, Any]) -> str:
    """The last text block of the last user turn (what the user wrote, after any memory
    block the proxy put before it)."""
    for turn in reversed(body.get("messages") or []):
        if isinstance(turn, dict) and turn.get("role") == "user":
            content = turn.get("content")
            if isinstance(content, str):
                return content
            texts = [b.get("text") for b in content or [] if isinstance(b, dict)
                     and b.get("type") == "text"]  # fmt: skip
            return str(texts[-1]) if texts else ""
    return ""


def _last_input_text(body: dict[str, Any]) -> str:
    items = body.get("input")
    if isinstance(items, str):
        return items
    for item in reversed(items if isinstance(items, list) else []):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            texts = [p.get("text") for p in content or [] if isinstance(p, dict)
                     and isinstance(p.get("text"), str)]  # fmt: skip
            return str(texts[-1]) if texts else ""
    return ""


def _message_events(
    model: str, text: str, tool: tuple[str, dict[str, Any]] | None
) -> list[tuple[str, dict[str, Any]]]:
    """A Messages answer as its event sequence; the last item carries the whole message."""
    usage = {"input_tokens": 10, "output_tokens": len(text.split())}
    block: dict[str, Any] = (
        {"type": "tool_use", "id": "toolu_fake", "name": tool[0], "input": {}}
        if tool else {"type": "text", "text": ""}
    )  # fmt: skip
    delta = (
        {"type": "input_json_delta", "partial_json": json.dumps(tool[1])}
        if tool else {"type": "text_delta", "text": text}
    )  # fmt: skip
    whole = {**block, "input": tool[1]} if tool else {"type": "text", "text": text}
    stop = "tool_use" if tool else "end_turn"
    message = {"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
               "content": [whole], "stop_reason": stop, "stop_sequence": None, "usage": usage}
    start = {**message, "content": [], "stop_reason": None,
             "usage": {"input_tokens": 10, "output_tokens": 0}}  # fmt: skip
    return [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop,
                           "stop_sequence": None}, "usage": {"output_tokens": usage[
                               "output_tokens"]}}),
        ("message_stop", {"type": "message_stop", "message": message}),
    ]  # fmt: skip


def _response_events(
    model: str, text: str, tool: tuple[str, dict[str, Any]] | None, response_id: str
) -> list[tuple[str, dict[str, Any]]]:
    """A Responses answer as its event sequence; the last carries the whole response
    (``response_id``: each answer its own, as a later request may name it)."""
    item: dict[str, Any] = (
        {"type": "function_call", "id": "fc_fake", "call_id": "call_fake", "name": tool[0],
         "arguments": json.dumps(tool[1]), "status": "completed"}
        if tool else
        {"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": text, "annotations": []}]}
    )  # fmt: skip
    usage = {"input_tokens": 10, "output_tokens": len(text.split()),
             "total_tokens": 10 + len(text.split())}  # fmt: skip
    response = {"id": response_id, "object": "response", "created_at": int(time.time()),
                "model": model, "status": "completed", "output": [item], "usage": usage}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created",
                              "response": {**response, "status": "in_progress", "output": []}}),
        ("response.output_item.added", {"type": "response.output_item.added",
                                        "output_index": 0, "item": item}),
    ]  # fmt: skip
    if not tool:
        events.append(("response.output_text.delta", {
            "type": "response.output_text.delta", "item_id": "msg_fake", "output_index": 0,
            "content_index": 0, "delta": text}))  # fmt: skip
    events.append(("response.output_item.done", {"type": "response.output_item.done",
                                                 "output_index": 0, "item": item}))  # fmt: skip
    events.append(("response.completed", {"type": "response.completed", "response": response}))
    return events


async def _until_client_leaves(request: web.Request, limit_s: float = 3600) -> None:
    """Hang (answer nothing) until the client gives up, or ``limit_s`` passes."""
    transport = request.transport
    for _ in range(int(limit_s / 0.05)):
        if transport is None or transport.is_closing():
            return
        await asyncio.sleep(0.05)


_MEMORY = re.compile(r"<retrieved_memory>(.*?)</retrieved_memory>", re.DOTALL)
_LEAD = re.compile(r"^(?:- |\[\d+\] )?(?:[^:\[\]]{1,64}: )?")
_CITATIONS = re.compile(r"\s*(?:\[\d+(?:,\s*\d+)*\]|\(corrected by [^)]*\))")
_WORD = re.compile(r"[^\W_]+")
_SUFFIXES = ("ing", "ed", "s")


def recalled(messages: list[Any]) -> str:
    """What a model that answers from memory says: the line of the memory block shown
    before the last user message that shares the most words with it (a statement or a
    fragment that is neither a question nor corrected by a later one; speaker label and
    citations left out; of a change, what holds now), else that it does not know.
    Words are compared lowercased, less a plural or verb ending, so "live" meets
    "lives"."""
    question = _last_user_text(messages)
    shown = "\n".join(message_text(m.get("content")) for m in messages if isinstance(m, dict))
    block = _MEMORY.search(shown)
    if block is None:
        return "I don't know."
    asked = _stems(question)
    best, overlap = "", 0
    for line in block.group(1).splitlines():
        line = line.strip()
        if not line.startswith(("- ", "[")) and ": " not in line:
            continue  # the header, a heading, a date
        if line.startswith("[") and line.endswith("]"):
            continue  # a conversation heading
        if "(corrected by" in line:
            continue  # what a later turn corrected is not the answer
        text = _CITATIONS.sub("", _LEAD.sub("", line, count=1)).strip()
        text = text.split("; superseded:")[0]  # a change: what holds now
        if not text or text.endswith("?"):
            continue
        shared = len(asked & _stems(text))
        if shared > overlap:
            best, overlap = text, shared
    return f"From what you told me: {best}" if best else "I don't know."


def _stems(text: str) -> set[str]:
    out = set()
    for word in _WORD.findall(text.lower()):
        if len(word) <= 2:
            continue
        for suffix in _SUFFIXES:
            if len(word) > len(suffix) + 2 and word.endswith(suffix):
                word = word[: -len(suffix)]
                break
        out.add(word[:-1] if len(word) > 3 and word.endswith("e") else word)
    return out


def _last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return message_text(message.get("content"))
    return ""


def _completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        ],
        "usage": _usage(text),
    }


def _usage(text: str) -> dict[str, int]:
    words = len(text.split())
    return {"prompt_tokens": 10, "completion_tokens": words, "total_tokens": 10 + words}


def _wants_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _openai_headers(number: int, status: int) -> dict[str, str]:
    """What an OpenAI server adds to every answer (a client may read any of them)."""
    headers = {
        "x-request-id": f"req_fake_{number}",
        "openai-processing-ms": "1",
        "x-ratelimit-limit-requests": "10000",
        "x-ratelimit-remaining-requests": "9999",
    }
    if status == 429:
        headers["retry-after"] = "1"
    return headers


def _chunk(model: str, piece: str | None, finish: str | None = None) -> dict[str, Any]:
    delta = {"content": piece} if piece is not None else {}
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="fake OpenAI-compatible echo upstream")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument(
        "--first-token-ms", type=float, default=0.0, help="delay before any answer's first byte"
    )
    parser.add_argument(
        "--tokens-per-s", type=float, default=0.0, help="pace of the answer's words (0: at once)"
    )
    parser.add_argument(
        "--record", type=Path, help="append each request received to FILE (a JSON line each)"
    )
    args = parser.parse_args()
    print(f"fake upstream on http://{args.host}:{args.port}/v1", flush=True)
    server = FakeUpstream(
        args.host,
        args.port,
        first_token_s=args.first_token_ms / 1000,
        tokens_per_s=args.tokens_per_s,
        record=args.record,
    )
    web.run_app(
        server.app(),
        host=args.host,
        port=args.port,
        print=None,
        access_log=None,
        handler_cancellation=True,
    )


if __name__ == "__main__":
    main()
