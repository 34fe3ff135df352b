"""How much of each prompt an upstream's prompt cache can reuse, with memory injected.

Providers cache a prompt's prefix: a request whose beginning is byte-identical to an
earlier request's is served partly from cache (cheaper, faster). areamem places memory
immediately before the latest user message, so everything before it (system prompt and
history) is what the client sent, and what the previous turn sent. This bench measures
that over a replayed conversation, for every front door.

What it does: the fake upstream (``proxy.fake_upstream --record``: every request it
receives appended to a file, byte for byte) and the proxy run as child processes on
loopback. The other conversations of the LoCoMo file are first ingested into memory
(``/memory/ingest``, formation waited for); then one conversation (``--conversation``)
is replayed as a growing chat, the way a chat client does: at each of its first
speaker's turns (the user) a request carries the system prompt, the whole history so
far (the second speaker's turns as the assistant's replies) and the new user message,
with ``X-Memory: force`` (memory at every turn). Each door replays it against a fresh
proxy serving a copy of the same preloaded store: chat completions, and the Responses
and Messages APIs both *native* (the upstream serves them: the memory goes into the
request in that API's own shape) and *bridged* (the upstream serves chat completions
only). The same requests are also sent straight to the upstream, without memory.

For each turn after the first, the cacheable share is the longest common prefix of the
upstream request's prompt and the previous turn's, divided by the prompt's length. The
prompt is the request's message content (chat: ``messages``; Responses:
``instructions`` and ``input``; Messages: ``system`` and ``messages``), as the upstream
received it, serialized as compact JSON with its keys in the received order; its length
is counted in UTF-8 bytes and in tokens (:func:`memory_core.counter_for`, the tokenizer
the proxy would use for the model: o200k_base here). Three placements per door:

- ``direct, no memory``: what the client sent, straight to the upstream (the ceiling:
  each prompt extends the previous one);
- ``areamem``: what the proxy sent upstream (measured);
- ``naive (simulated)``: the same memory block prepended to the system prompt of the
  client's request, as memory layers that rewrite the system message do; computed here
  from the block the proxy injected at that turn, not sent anywhere.

Usage (from the project root, with the project's virtual environment)::

    python scripts/bench_prompt_cache.py                        # conv-26, every turn
    python scripts/bench_prompt_cache.py --turns 40 --preload 1  # quicker
    python scripts/bench_prompt_cache.py --json cache.json

Nothing leaves the machine; the temporary folder is removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from _common import api_error_message, percentile, render_table, sigterm_as_interrupt
from bench_overhead import (
    HOST,
    BenchError,
    LocalStack,
    copy_store,
    fragments_stored,
    replay_worker,
)
from replay import Conversation, InputError, ProxyClient, Totals, load_file
from tqdm import tqdm

from memory_core import TokenCounter
from memory_core.text.tokens import counter_for

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev5.json"
MODEL = "bench-echo"
SYSTEM = (
    "You are a friendly assistant. Answer briefly, in the user's language, and use what you "
    "remember of earlier conversations when it helps."
)
MEMORY_MARK = "<retrieved_memory>"
REQUEST_TIMEOUT_S = 60.0
RETRIEVAL_TIMEOUT_MS = 60_000
"""Generous: a lookup shed or cut short (fail-open) would be a turn without memory, and
this bench is about where memory goes, not how fast it comes."""
PLACEMENTS = ("direct, no memory", "areamem", "naive (simulated)")


# --- the doors and their requests ---------------------------------------------------------


Message = dict[str, str]


@dataclass(frozen=True)
class Door:
    """A front door: its path, the request a client sends through it, the prompt part of
    a request body, and a request with memory prepended to its system prompt."""

    name: str
    path: str
    request: Callable[[Sequence[Message]], dict[str, Any]]
    prompt: Callable[[Mapping[str, Any]], Any]
    naive: Callable[[dict[str, Any], str], dict[str, Any]]
    native: bool = True


def chat_request(messages: Sequence[Message]) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "system", "content": SYSTEM}, *messages]}


def responses_request(messages: Sequence[Message]) -> dict[str, Any]:
    return {"model": MODEL, "instructions": SYSTEM, "input": list(messages)}


def messages_request(messages: Sequence[Message]) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 256, "system": SYSTEM, "messages": list(messages)}


def chat_prompt(body: Mapping[str, Any]) -> Any:
    return body.get("messages")


def responses_prompt(body: Mapping[str, Any]) -> Any:
    return [body.get("instructions"), body.get("input")]


def messages_prompt(body: Mapping[str, Any]) -> Any:
    return [body.get("system"), body.get("messages")]


def chat_naive(body: dict[str, Any], memory: str) -> dict[str, Any]:
    first, *rest = body["messages"]
    return {**body, "messages": [{**first, "content": f"{memory}\n\n{first['content']}"}, *rest]}


def with_naive_system(key: str) -> Callable[[dict[str, Any], str], dict[str, Any]]:
    def naive(body: dict[str, Any], memory: str) -> dict[str, Any]:
        return {**body, key: f"{memory}\n\n{body[key]}"}

    return naive


CHAT = Door("chat", "/v1/chat/completions", chat_request, chat_prompt, chat_naive)
RESPONSES = Door("responses", "/v1/responses", responses_request, responses_prompt,
                 with_naive_system("instructions"))
MESSAGES = Door("messages", "/v1/messages", messages_request, messages_prompt,
                with_naive_system("system"))
DOORS: dict[str, Door] = {
    "chat": CHAT,
    "responses": RESPONSES,
    "messages": MESSAGES,
    "responses (bridged)": dataclasses.replace(RESPONSES, name="responses (bridged)",
                                               native=False),
    "messages (bridged)": dataclasses.replace(MESSAGES, name="messages (bridged)", native=False),
}


def upstream_prompt(door: Door, body: Mapping[str, Any]) -> Any:
    """The prompt of what the proxy sent upstream for ``door`` (a bridged door's request
    arrives as a chat completion)."""
    return door.prompt(body) if door.native else chat_prompt(body)


# --- measuring ----------------------------------------------------------------------------


def serialized(prompt: Any) -> str:
    """The prompt as compact JSON, keys in the order received, non-ASCII as is."""
    return json.dumps(prompt, ensure_ascii=False, separators=(",", ":"))


def common_prefix(a: str, b: str) -> str:
    """The longest common prefix of two strings (a binary search over slices)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return a[:low]


@dataclass
class Shares:
    """Per turn after the first: the share of the prompt the previous turn's prompt
    covers, in bytes and in tokens."""

    bytes: list[float] = field(default_factory=list)
    tokens: list[float] = field(default_factory=list)
    previous: str | None = None

    def add(self, prompt: str, counter: TokenCounter) -> None:
        if self.previous is not None:
            shared = common_prefix(self.previous, prompt)
            self.bytes.append(len(shared.encode()) / max(1, len(prompt.encode())))
            self.tokens.append(counter.count(shared) / max(1, counter.count(prompt)))
        self.previous = prompt


def memory_of(value: Any) -> str | None:
    """The memory block in a request body: the first string holding its delimiter."""
    if isinstance(value, str):
        return value if MEMORY_MARK in value else None
    children = value.values() if isinstance(value, dict) else value if isinstance(
        value, list) else ()
    for child in children:
        found = memory_of(child)
        if found is not None:
            return found
    return None


# --- the replayed conversation ------------------------------------------------------------


def turns_of(conversation: Conversation) -> list[Message]:
    """Every turn of every session, in order, as a plain role and text."""
    return [{"role": m["role"], "content": m["content"]}
            for session in conversation.sessions for m in session]


def requests_of(turns: Sequence[Message], limit: int) -> list[list[Message]]:
    """At each user turn (the first ``limit``; 0: all), the messages a client sends."""
    out = []
    for index, turn in enumerate(turns):
        if turn["role"] == "user":
            out.append(list(turns[: index + 1]))
    return out[:limit] if limit > 0 else out


class Recording:
    """The fake upstream's record file, read as it grows."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0

    def take(self) -> dict[str, Any]:
        """The one request received since the last call."""
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            lines = handle.read().splitlines()
            self.offset = handle.tell()
        if len(lines) != 1:
            raise BenchError(f"expected one upstream request, {len(lines)} arrived")
        line = json.loads(lines[0])
        return dict(json.loads(line["raw"]))


async def post(session: aiohttp.ClientSession, url: str, body: Mapping[str, Any],
               headers: Mapping[str, str]) -> None:
    async with session.post(url, json=body, headers=dict(headers)) as response:
        answer = await response.read()
    if response.status != 200:
        raise BenchError(f"{url}: {api_error_message(response.status, answer)}")


@dataclass
class DoorRun:
    """One door's replay: the shares per placement, and the injected blocks."""

    door: str
    shares: dict[str, Shares] = field(default_factory=lambda: {p: Shares() for p in PLACEMENTS})
    turns: int = 0
    with_memory: int = 0
    memory_bytes: list[int] = field(default_factory=list)


async def replay_door(stack: LocalStack, door: Door, requests: Sequence[list[Message]],
                      counter: TokenCounter) -> DoorRun:
    run, recording = DoorRun(door.name), Recording(stack.record or Path())
    headers = {"Authorization": "Bearer sk-bench", "anthropic-version": "2023-06-01"}
    proxy_headers = {**headers, "X-Memory": "force", "X-Conversation-Id": "cache-bench"}
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for messages in tqdm(requests, desc=door.name, unit="turn", leave=False):
            body = door.request(messages)
            await post(session, stack.upstream_url + door.path, body, headers)
            direct = recording.take()
            await post(session, stack.proxy_url + door.path, body, proxy_headers)
            sent = recording.take()
            memory = memory_of(upstream_prompt(door, sent))
            naive = door.naive(direct, memory) if memory is not None else direct
            for placement, prompt in zip(PLACEMENTS, (door.prompt(direct),
                                                      upstream_prompt(door, sent),
                                                      door.prompt(naive)), strict=True):
                run.shares[placement].add(serialized(prompt), counter)
            run.turns += 1
            if memory is not None:
                run.with_memory += 1
                run.memory_bytes.append(len(memory.encode()))
    return run


# --- the stacks ---------------------------------------------------------------------------


class CacheStack(LocalStack):
    """bench_overhead's stack with a retrieval budget no slow machine runs past."""

    def config(self) -> Path:
        path = super().config()
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        config["memory"]["retrieval_timeout_ms"] = RETRIEVAL_TIMEOUT_MS
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return path


@dataclass(frozen=True)
class Settings:
    data: Path
    conversation: str | None
    turns: int
    preload: int
    doors: tuple[str, ...]
    encoder: str | None
    retrieval: str
    json: Path | None = None


def pick(conversations: list[Conversation], wanted: str | None) -> Conversation:
    if wanted is None:
        return conversations[0]
    for conversation in conversations:
        if wanted in (conversation.label, conversation.conversation_id):
            return conversation
    raise BenchError(f"no conversation {wanted!r} in the file")


def preload_store(workdir: Path, settings: Settings, others: Sequence[Conversation]) -> int:
    """Ingest ``others`` through a proxy of its own; the store stays in ``workdir``."""
    workdir.mkdir()
    with CacheStack(workdir, settings.retrieval, encoder=settings.encoder) as stack:
        return asyncio.run(_ingest(stack, others))


async def _ingest(stack: LocalStack, others: Sequence[Conversation]) -> int:
    async with aiohttp.ClientSession(stack.proxy_url) as session:
        client, totals = ProxyClient(session, ""), Totals()
        turns = sum(len(s) for c in others for s in c.sessions)
        pending = iter(others)
        with tqdm(total=turns, desc="preload", unit="turn", leave=False) as bar:
            await asyncio.gather(*(replay_worker(client, pending, totals, bar) for _ in range(2)))
        if totals.errors:
            raise BenchError(f"{totals.errors} of {totals.requests} ingest calls failed")
        return await fragments_stored(session)


def run_door(workdir: Path, store: Path, settings: Settings, door: Door,
             requests: Sequence[list[Message]], counter: TokenCounter) -> DoorRun:
    """The door's replay against a fresh proxy serving a copy of the preloaded store."""
    folder = workdir / door.name.replace(" ", "_").strip("()")
    folder.mkdir()
    copy_store(store, folder)
    serves = ("responses", "messages") if door.native else ()
    with CacheStack(folder, settings.retrieval, serves=serves, encoder=settings.encoder,
                    record=folder / "upstream.jsonl") as stack:
        return asyncio.run(replay_door(stack, door, requests, counter))


# --- report -------------------------------------------------------------------------------


def percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def p50(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def p10(values: Sequence[float]) -> float:
    return percentile(values, 10)


def door_table(run: DoorRun) -> str:
    rows = []
    for placement in PLACEMENTS:
        shares = run.shares[placement]
        figures = [f(values) for values in (shares.bytes, shares.tokens) for f in (p50, p10)]
        rows.append([placement, str(len(shares.bytes)), *map(percent, figures)])
    headers = ["placement", "turns", "bytes p50", "bytes p10", "tokens p50", "tokens p10"]
    return render_table(headers, rows)


def summary(run: DoorRun) -> dict[str, Any]:
    return {
        "turns": run.turns,
        "turns_with_memory": run.with_memory,
        "memory_bytes_median": statistics.median(run.memory_bytes) if run.memory_bytes else 0,
        "placements": {
            p: {"bytes_p50": p50(s.bytes), "bytes_p10": p10(s.bytes),
                "tokens_p50": p50(s.tokens), "tokens_p10": p10(s.tokens)}
            for p, s in run.shares.items()
        },
    }


def print_run(run: DoorRun) -> None:
    block = statistics.median(run.memory_bytes) if run.memory_bytes else 0
    print(f"\n{run.door}: {run.turns} requests, memory injected in {run.with_memory} "
          f"(median block {block:.0f} bytes); cacheable share of each prompt after the first")
    print(door_table(run), flush=True)


# --- main ---------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> Settings:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help=f"LoCoMo file (default: {DEFAULT_DATA})")
    parser.add_argument("--conversation", help="sample id to replay (default: the first)")
    parser.add_argument("--turns", type=int, default=0,
                        help="user turns to replay (default 0: all of them)")
    parser.add_argument("--preload", type=int, default=-1,
                        help="other conversations preloaded into memory (default: all)")
    parser.add_argument("--doors", default=",".join(DOORS),
                        help=f"doors to replay, comma-separated (default: {','.join(DOORS)})")
    parser.add_argument("--encoder", help="formation.encoder.model (default: the config's)")
    parser.add_argument("--retrieval", default="bm25", choices=("bm25", "area"))
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    doors = tuple(d.strip() for d in args.doors.split(",") if d.strip())
    unknown = [d for d in doors if d not in DOORS]
    if unknown or not doors:
        parser.error(f"unknown door(s) {unknown}; choose among {', '.join(DOORS)}")
    return Settings(args.data, args.conversation, args.turns, args.preload, doors,
                    args.encoder, args.retrieval, args.json)


def bench(settings: Settings, workdir: Path) -> list[DoorRun]:
    try:
        conversations = load_file(settings.data)
    except InputError as exc:
        raise BenchError(str(exc)) from exc
    replayed = pick(conversations, settings.conversation)
    others = [c for c in conversations if c is not replayed]
    others = others if settings.preload < 0 else others[: settings.preload]
    requests = requests_of(turns_of(replayed), settings.turns)
    began = time.perf_counter()
    fragments = preload_store(workdir / "preload", settings, others)
    print(f"memory: {len(others)} other conversation(s) of {settings.data.name} preloaded, "
          f"{fragments} fragments ({time.perf_counter() - began:.0f} s); replaying "
          f"{replayed.label}: {len(requests)} user turns, on {HOST}", flush=True)
    counter = counter_for(MODEL)
    runs = []
    for name in settings.doors:
        run = run_door(workdir, workdir / "preload", settings, DOORS[name], requests, counter)
        print_run(run)
        runs.append(run)
    print(f"\ntokens: {counter.name}; naive = the same blocks prepended to the system "
          "prompt (simulated, not sent)")
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    sigterm_as_interrupt()
    try:
        with tempfile.TemporaryDirectory(prefix="areamem-cache-") as folder:
            runs = bench(settings, Path(folder))
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    if settings.json is not None:
        settings.json.write_text(json.dumps({r.door: summary(r) for r in runs}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
