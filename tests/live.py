"""Memory in real use, for the tests: a proxy with the project's default trigger policy in
front of the fake upstream's ``recall`` model (it answers from the memory it is shown),
and a user who tells it things, asks it things and runs ``/memory`` commands, each in a
conversation of its own unless told otherwise, as a person with a chat client does.

Every call goes through the real proxy on loopback with the real ``openai`` client;
each returns once the exchange is formed (``Proxy.settle``), so the next one finds it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, cast

import aiohttp
from openai.types.chat import ChatCompletionMessageParam

from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, Proxy, proxy_config

__all__ = ["Live", "Turn", "live"]

_COUNTER = itertools.count(1)


@dataclass(frozen=True)
class Turn:
    """What one chat turn got: the model's answer, the receipt (empty when memory was
    not consulted) and the memory block the model was shown (empty when none)."""

    answer: str
    receipt: dict[str, Any]

    @property
    def block(self) -> str:
        return str(self.receipt.get("injected_text") or "")

    @property
    def consulted(self) -> bool:
        return bool((self.receipt.get("decision") or {}).get("retrieve"))


class Live:
    """A user of one proxy (see the module docstring)."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy

    async def chat(
        self,
        text: str,
        *,
        conversation: str | None = None,
        history: list[dict[str, Any]] | None = None,
        stream: bool = False,
        named: bool = True,
    ) -> Turn:
        """Send ``text`` as the latest user message after ``history``; the answer and
        the turn's receipt, once the exchange is formed. ``named``: the conversation is
        named by ``X-Conversation-Id`` (``conversation``, else a new ``chat-<n>``); else
        the proxy derives its id from its first messages, as for most clients."""
        conversation = conversation or f"chat-{next(_COUNTER)}"
        # The history's turns are chat messages as the tests write them (plain dicts);
        # the SDK's message TypedDicts describe exactly such dicts.
        messages = cast(
            "list[ChatCompletionMessageParam]",
            [*(history or []), {"role": "user", "content": text}],
        )
        headers = {"X-Conversation-Id": conversation} if named else {}
        async with self.proxy.client() as client:
            if stream:
                chunks = await client.chat.completions.create(
                    model="recall", messages=messages, stream=True, extra_headers=headers
                )
                parts = [c.choices[0].delta.content or "" async for c in chunks if c.choices]
                answer, receipt_id = "".join(parts), None
            else:
                raw = await client.chat.completions.with_raw_response.create(
                    model="recall", messages=messages, extra_headers=headers
                )
                answer = raw.parse().choices[0].message.content or ""
                receipt_id = raw.headers.get("X-Memory-Receipt")
        await self.proxy.settle()
        if stream:
            receipt_id = await self._latest_receipt(conversation if named else None)
        receipt = await self.receipt(receipt_id) if receipt_id else {}
        return Turn(answer, receipt)

    async def say(self, text: str, **kwargs: Any) -> Turn:
        """Tell memory something (a turn of its own, answered like any other)."""
        return await self.chat(text, **kwargs)

    async def command(self, text: str, *, conversation: str = "commands") -> str:
        """A ``/memory`` command's reply."""
        return (await self.chat(text, conversation=conversation)).answer

    async def get(self, path: str, **params: str) -> dict[str, Any]:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{self.proxy.url}{path}", params=params) as response:
                assert response.status == 200, await response.text()
                return dict(await response.json())

    async def receipt(self, receipt_id: str) -> dict[str, Any]:
        return await self.get(f"/memory/receipts/{receipt_id}")

    async def search(self, query: str, k: int = 10) -> list[dict[str, Any]]:
        return list((await self.get("/memory/search", q=query, k=str(k)))["hits"])

    async def entities(self) -> list[dict[str, Any]]:
        return list((await self.get("/memory/entities"))["entities"])

    async def _latest_receipt(self, conversation: str | None) -> str | None:
        """The newest receipt of ``conversation`` (None: the newest of all)."""
        listed = (await self.get("/memory/receipts"))["receipts"]
        mine = [r for r in listed if conversation in (None, r["conversation_id"])]
        return str(mine[0]["id"]) if mine else None


async def live(make_proxy: MakeProxy, upstream: FakeUpstream, **memory: Any) -> Live:
    """A user of a new proxy with the default policy (``policy:`` left out) whose
    formation runs in the proxy process, at once after each answer."""
    config = proxy_config(upstream.url)
    del config["policy"]
    config["memory"] = {
        "retrieval_timeout_ms": 60_000,
        "formation_workers": 0,
        "formation_grace_ms": 0,
        **memory,
    }
    return Live(await make_proxy(config))
