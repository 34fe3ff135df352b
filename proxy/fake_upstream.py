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
  whatever the client's ``Accept-Encoding`` says, as some servers do.

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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from memory_core import message_text

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
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
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
        self.requests.append(Recorded(dict(request.headers), body, raw, request.query_string))
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

    def _token_delay(self) -> float:
        return 1 / self.tokens_per_s if self.tokens_per_s > 0 else 0.0

    def _answer(self, body: dict[str, Any]) -> str:
        """The next scripted answer, or the echo of the last user message."""
        if not self.script:
            return "echo: " + _last_user_text(body.get("messages") or [])
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
            await response.write(b"data: " + json.dumps(_chunk(model, piece)).encode() + b"\n\n")
            if model == "die-mid-stream" and i == 1:
                assert request.transport is not None
                request.transport.abort()
                return response
            if model == "slow":
                await asyncio.sleep(self.slow_delay_s)
            elif i + 1 < len(words):
                await asyncio.sleep(self._token_delay())
        await response.write(b"data: " + json.dumps(_chunk(model, None, "stop")).encode() + b"\n\n")
        if usage:
            final = {**_chunk(model, None), "choices": [], "usage": _usage(text)}
            await response.write(b"data: " + json.dumps(final).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


async def _until_client_leaves(request: web.Request, limit_s: float = 3600) -> None:
    """Hang (answer nothing) until the client gives up, or ``limit_s`` passes."""
    transport = request.transport
    for _ in range(int(limit_s / 0.05)):
        if transport is None or transport.is_closing():
            return
        await asyncio.sleep(0.05)


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
    args = parser.parse_args()
    print(f"fake upstream on http://{args.host}:{args.port}/v1", flush=True)
    server = FakeUpstream(
        args.host,
        args.port,
        first_token_s=args.first_token_ms / 1000,
        tokens_per_s=args.tokens_per_s,
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
