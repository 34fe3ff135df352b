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
- ``slow``: wait ``slow_delay_s`` between streamed chunks.

With ``keep_alive`` False every answer closes its connection, so a client that pools
connections beyond the test (litellm's cached synchronous clients) holds no socket.

Run it alone with ``python -m proxy.fake_upstream --port 9100``.
"""

from __future__ import annotations

import argparse
import asyncio
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


@dataclass
class FakeUpstream:
    """The server; ``start`` binds a loopback port, ``url`` is its ``/v1`` base."""

    host: str = "127.0.0.1"
    port: int = 0
    slow_delay_s: float = 0.05
    requests: list[Recorded] = field(default_factory=list)
    script: list[ScriptedReply] = field(default_factory=list)
    keep_alive: bool = True
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
        self._runner = web.AppRunner(self.app(), access_log=None)
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

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "echo", "object": "model"}]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw)
        self.requests.append(Recorded(dict(request.headers), body, raw))
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
        if body.get("stream"):
            return await self._stream(request, model, text)
        return web.json_response(_completion(model, text))

    def _answer(self, body: dict[str, Any]) -> str:
        """The next scripted answer, or the echo of the last user message."""
        if not self.script:
            return "echo: " + _last_user_text(body.get("messages") or [])
        reply = self.script.pop(0)
        return reply if isinstance(reply, str) else reply(body)

    async def _stream(self, request: web.Request, model: str, text: str) -> web.StreamResponse:
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
        await response.write(b"data: " + json.dumps(_chunk(model, None, "stop")).encode() + b"\n\n")
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
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": len(text.split()),
            "total_tokens": 10 + len(text.split()),
        },
    }


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
    args = parser.parse_args()
    print(f"fake upstream on http://{args.host}:{args.port}/v1", flush=True)
    web.run_app(
        FakeUpstream(args.host, args.port).app(),
        host=args.host,
        port=args.port,
        print=None,
        access_log=None,
    )


if __name__ == "__main__":
    main()
