"""Replay recorded conversations through a running areamem proxy.

Two modes:

- ``--ingest`` stores each conversation with ``POST /memory/ingest``, one call per
  session. Every call sends the whole history so far under the same conversation id:
  the log identifies a message by the hash chain of its prefix (memory_core/log/messages/chain.py),
  so a call carrying only the new session would start a second branch at the root and
  supersede the earlier sessions. Turns already stored are skipped by the proxy; the
  summary's "already stored" counts only this session's turns, not the resent history.
- ``--live`` walks the user turns and sends each through ``POST /v1/chat/completions``
  with the recorded history before it (the recorded assistant turns, never the model's
  answers) and ``X-Conversation-Id``. It counts the answers that consulted memory (the
  ``X-Memory-Receipt`` header) and reports the latency of each request.

FILE is LoCoMo JSON (a list of samples whose ``conversation`` holds ``session_<n>`` turn
lists, see shared/data/README.md) or OpenAI-style JSON lines (one ``{"messages": [...]}``
a line, optional ``"conversation_id"``; lines sharing an id are successive sessions of
one conversation). The format is read from the content, not from the file name. In
LoCoMo, speaker_a speaks as ``user`` and speaker_b as ``assistant``; each turn keeps its
speaker (``name``), its ``dia_id`` (``id``) and its session's date, one second apart per
turn so that order survives.

Usage, against a proxy started with ``python -m proxy serve --config config.yaml``::

    python scripts/replay.py --proxy http://127.0.0.1:8787 --ingest \\
        --conversations 0 ../shared/data/locomo/locomo_dev5.json
    python scripts/replay.py --proxy http://127.0.0.1:8787 --live --model gpt-4o-mini \\
        --conversations 0 --limit-sessions 1 ../shared/data/locomo/locomo_dev5.json

Exit status: 0 when every call succeeded, 1 when some failed or the proxy could not be
reached, 2 for a malformed FILE or bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import sys
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from _common import api_error_message, base_url, format_ms, percentile, render_table, select_indices
from evaluation.locomo import Conversation as LocomoConversation
from evaluation.locomo import LocomoError, Turn, as_message, parse_locomo
from tqdm import tqdm

Message = dict[str, Any]

RECEIPT_HEADER = "X-Memory-Receipt"
ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


class InputError(Exception):
    """FILE or an argument cannot be replayed; the message says where and why."""


class ProxyUnreachable(Exception):
    """The proxy refused the connection, so nothing more can be sent."""


class RequestFailed(Exception):
    """One call failed (HTTP error, timeout, dropped connection): counted, not fatal."""


@dataclass(frozen=True)
class Conversation:
    """A conversation to replay; ``conversation_id`` None lets the proxy derive it."""

    conversation_id: str | None
    label: str
    sessions: tuple[tuple[Message, ...], ...]


@dataclass
class Totals:
    """What the replay did, for the closing summary."""

    conversations: int = 0
    sessions: int = 0
    turns: int = 0
    appended: int = 0
    already_stored: int = 0
    superseded: int = 0
    fragments_formed: int = 0
    requests: int = 0
    memory_used: int = 0
    fragments_shown: int = 0
    """Fragments the injected blocks showed (each block's lines), summed over requests."""
    fragments_cited: int = 0
    """Fragments the injected blocks cited by number (``[n]``), summed over requests."""
    receipts: list[str] = field(default_factory=list)
    errors: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    stopped: str | None = None


@dataclass(frozen=True)
class Reply:
    """A successful answer of the proxy."""

    elapsed_ms: float
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> dict[str, Any]:
        try:
            data = json.loads(self.body)
        except ValueError as exc:
            raise RequestFailed(f"the proxy answered invalid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise RequestFailed("the proxy answered JSON that is not an object")
        return data


# --- reading FILE -------------------------------------------------------------------------


def load_file(path: Path) -> list[Conversation]:
    """The conversations of ``path``, LoCoMo JSON or JSON lines, told apart by content."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from exc
    head = text.lstrip()[:1]
    if not head:
        raise InputError(f"{path}: the file is empty")
    if head == "[":
        return from_array(path, decode_json(path, text))
    if head != "{":
        raise InputError(f"{path}: line 1: neither JSON nor JSON lines (starts with {head!r})")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        return group_records(path, jsonl_records(path, text))
    except UNDECODABLE as exc:
        raise InputError(f"{path}: invalid JSON: {exc}") from exc
    if isinstance(whole, dict) and "conversation" in whole:
        return locomo_samples(path, [whole])
    return group_records(path, [("line 1", whole)])


UNDECODABLE = (ValueError, RecursionError)
"""What json.loads raises, beside JSONDecodeError, on text it cannot decode: a plain
ValueError for an integer of over 4300 digits, RecursionError for arrays or objects
nested too deep (both escaped as tracebacks)."""


def decode_json(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from exc
    except UNDECODABLE as exc:
        raise InputError(f"{path}: invalid JSON: {exc}") from exc


def from_array(path: Path, items: list[Any]) -> list[Conversation]:
    """A JSON array: LoCoMo samples, or chat records like the lines of a JSONL file."""
    if not items:
        raise InputError(f"{path}: the JSON array is empty")
    first = items[0]
    if isinstance(first, dict) and "conversation" in first:
        return locomo_samples(path, items)
    if isinstance(first, dict) and "messages" in first:
        return group_records(path, [(f"item {i}", item) for i, item in enumerate(items)])
    raise InputError(f"{path}: sample 0: neither a LoCoMo sample (no 'conversation') "
                     "nor a chat record (no 'messages')")


def jsonl_records(path: Path, text: str) -> list[tuple[str, Any]]:
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append((f"line {number}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: line {number}: invalid JSON: {exc.msg} "
                             f"(column {exc.colno})") from exc
        except UNDECODABLE as exc:
            raise InputError(f"{path}: line {number}: invalid JSON: {exc}") from exc
    return records


def group_records(path: Path, records: Sequence[tuple[str, Any]]) -> list[Conversation]:
    """Chat records in file order; records sharing a conversation_id become its sessions."""
    grouped: dict[str, tuple[str | None, str, list[tuple[Message, ...]]]] = {}
    for location, item in records:
        conversation_id, messages = chat_record(f"{path}: {location}", item)
        key = conversation_id if conversation_id is not None else "\x00" + location
        grouped.setdefault(key, (conversation_id, conversation_id or location, []))[2].append(
            messages
        )
    return [Conversation(cid, label, tuple(sessions)) for cid, label, sessions in grouped.values()]


def chat_record(where: str, item: Any) -> tuple[str | None, tuple[Message, ...]]:
    if not isinstance(item, dict):
        raise InputError(f"{where}: must be a JSON object, got {type(item).__name__}")
    messages = item.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InputError(f"{where}: 'messages' must be a non-empty list")
    for i, message in enumerate(messages):
        check_message(f"{where}: messages[{i}]", message)
    conversation_id = item.get("conversation_id")
    if conversation_id is not None and (not isinstance(conversation_id, str)
                                        or not conversation_id):
        raise InputError(f"{where}: 'conversation_id' must be a non-empty string")
    return conversation_id, tuple(messages)


def check_message(where: str, message: Any) -> None:
    if not isinstance(message, dict):
        raise InputError(f"{where}: must be an object")
    if message.get("role") not in ROLES:
        raise InputError(f"{where}: 'role' must be one of {', '.join(sorted(ROLES))}, "
                         f"got {message.get('role')!r}")
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise InputError(f"{where}: 'content' must be a string, a list of parts or null")


def locomo_samples(path: Path, items: list[Any]) -> list[Conversation]:
    """LoCoMo samples, read by the project's loader, as chat messages per session."""
    try:
        samples = parse_locomo(items, str(path))
    except LocomoError as exc:
        raise InputError(str(exc)) from exc
    return [
        Conversation(sample.sample_id, sample.sample_id, tuple(
            tuple(locomo_message(sample, turn) for turn in session)
            for session in sample.sessions()
        ))
        for sample in samples
    ]


def locomo_message(sample: LocomoConversation, turn: Turn) -> Message:
    message: Message = {**as_message(sample, turn), "id": turn.dia_id,
                        "timestamp": turn.ts.isoformat()}
    return message


# --- choosing what to replay --------------------------------------------------------------


def select(conversations: list[Conversation], spec: str, limit: int | None) -> list[Conversation]:
    """The conversations ``spec`` names, each cut to its first ``limit`` sessions."""
    try:
        indices = select_indices(spec, len(conversations))
    except ValueError as exc:
        raise InputError(str(exc)) from exc
    chosen = [conversations[i] for i in indices]
    if limit is None:
        return chosen
    return [dataclasses.replace(c, sessions=c.sessions[:limit]) for c in chosen]


# --- talking to the proxy -----------------------------------------------------------------


class ProxyClient:
    """The proxy's HTTP API; aiohttp's failures are translated here and nowhere else."""

    def __init__(self, session: aiohttp.ClientSession, root: str) -> None:
        self.session, self.root = session, root

    async def get(self, path: str) -> Reply:
        return await self._call("GET", path, None, None)

    async def post(
        self, path: str, payload: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> Reply:
        return await self._call("POST", path, payload, headers)

    async def _call(self, method: str, path: str, payload: Mapping[str, Any] | None,
                    headers: Mapping[str, str] | None) -> Reply:
        began = time.perf_counter()
        try:
            async with self.session.request(method, self.root + path, json=payload,
                                            headers=headers) as resp:
                body = await resp.read()
                status, reply_headers = resp.status, resp.headers
        except aiohttp.ClientConnectorError as exc:
            raise ProxyUnreachable(f"cannot connect to the proxy at {self.root} "
                                   f"({exc.os_error})") from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise RequestFailed(f"{type(exc).__name__}: {exc}") from exc
        if status >= 400:
            raise RequestFailed(api_error_message(status, body))
        return Reply((time.perf_counter() - began) * 1000, reply_headers, body)


async def ingest_conversation(client: ProxyClient, conv: Conversation, totals: Totals,
                              bar: tqdm) -> None:
    """One ingest call per session, each with the whole history so far."""
    history: list[Message] = []
    for number, session in enumerate(conv.sessions, start=1):
        history.extend(session)
        if session:
            where = f"{conv.label} session {number}"
            await ingest_session(client, conv, history, len(session), totals, where)
        totals.sessions += 1
        totals.turns += len(session)
        bar.update(len(session))


async def ingest_session(client: ProxyClient, conv: Conversation, history: list[Message],
                         new: int, totals: Totals, where: str) -> None:
    """Send ``history`` whose last ``new`` turns are this session's."""
    payload: dict[str, Any] = {"messages": history}
    if conv.conversation_id is not None:
        payload["conversation_id"] = conv.conversation_id
    totals.requests += 1
    try:
        result = (await client.post("/memory/ingest", payload)).json()
    except RequestFailed as exc:
        totals.errors += 1
        tqdm.write(inert(f"{where}: {exc}"), file=sys.stderr)
        return
    appended = int(result.get("appended", 0))
    totals.appended += appended
    totals.already_stored += max(0, new - appended)
    totals.superseded += int(result.get("superseded", 0))
    totals.fragments_formed += int(result.get("fragments_formed", 0))


async def live_conversation(client: ProxyClient, conv: Conversation, args: argparse.Namespace,
                            totals: Totals, bar: tqdm) -> None:
    """Each user turn as a chat request carrying the recorded history before it."""
    recorded = [m for session in conv.sessions for m in session]
    history = [openai_message(m) for m in recorded]
    headers = {"X-Memory": args.memory}
    if conv.conversation_id is not None:
        headers["X-Conversation-Id"] = conv.conversation_id
    for i, message in enumerate(recorded):
        if message["role"] != "user":
            continue
        payload = {"model": args.model, "messages": history[: i + 1]}
        where = f"{conv.label} {message.get('id') or f'message {i}'}"
        await live_turn(client, payload, headers, totals, where)
        totals.turns += 1
        bar.update(1)
    totals.sessions += len(conv.sessions)


async def live_turn(client: ProxyClient, payload: Mapping[str, Any], headers: Mapping[str, str],
                    totals: Totals, where: str) -> None:
    totals.requests += 1
    try:
        reply = await client.post("/v1/chat/completions", payload, headers)
    except RequestFailed as exc:
        totals.errors += 1
        tqdm.write(inert(f"{where}: {exc}"), file=sys.stderr)
        return
    totals.latencies_ms.append(reply.elapsed_ms)
    receipt_id = reply.headers.get(RECEIPT_HEADER)
    if receipt_id is not None:
        totals.memory_used += 1
        totals.receipts.append(receipt_id)


async def count_shown(client: ProxyClient, totals: Totals) -> None:
    """What the injected blocks showed and cited, read from their receipts once the
    replay is done (a receipt is written just after its answer)."""
    for receipt_id in totals.receipts:
        try:
            receipt = (await client.get(f"/memory/receipts/{receipt_id}")).json()
        except RequestFailed as exc:
            tqdm.write(inert(f"receipt {receipt_id}: {exc}"), file=sys.stderr)
            continue
        found = (receipt.get("area") or {}).get("fragments") or []
        totals.fragments_shown += sum(1 for f in found if f.get("shown"))
        totals.fragments_cited += len(receipt.get("citations") or ())


def openai_message(message: Mapping[str, Any]) -> Message:
    """The message as the chat API takes it (without our ``timestamp`` and ``id``)."""
    return {k: v for k, v in message.items() if k not in ("timestamp", "id")}


def work_units(conversations: Sequence[Conversation], live: bool) -> int:
    """Progress bar total: user turns (live) or all turns (ingest)."""
    turns = [m for c in conversations for s in c.sessions for m in s]
    return sum(m["role"] == "user" for m in turns) if live else len(turns)


async def replay(args: argparse.Namespace, conversations: list[Conversation]) -> Totals:
    totals = Totals()
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    timeout = aiohttp.ClientTimeout(total=args.timeout)
    root = base_url(args.proxy)
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session:
        client = ProxyClient(session, root)
        total = work_units(conversations, args.live)
        with tqdm(total=total, unit="turn", desc="live" if args.live else "ingest") as bar:
            try:
                for conv in conversations:
                    if args.live:
                        await live_conversation(client, conv, args, totals, bar)
                    else:
                        await ingest_conversation(client, conv, totals, bar)
                    totals.conversations += 1
                if args.live:
                    await count_shown(client, totals)
            except ProxyUnreachable as exc:
                totals.stopped = str(exc)
    return totals


# --- report and command line --------------------------------------------------------------


def summary(totals: Totals, live: bool, elapsed_s: float) -> str:
    rows = [
        ("conversations", str(totals.conversations)),
        ("sessions", str(totals.sessions)),
        ("turns sent", str(totals.turns)),
    ]
    if live:
        lat = totals.latencies_ms
        rows += [
            ("requests", str(totals.requests)),
            ("memory consulted (receipt)", f"{totals.memory_used} of {len(lat)}"),
            ("fragments shown", str(totals.fragments_shown)),
            ("fragments cited [n]", str(totals.fragments_cited)),
            ("latency p50 ms", format_ms(percentile(lat, 50))),
            ("latency p95 ms", format_ms(percentile(lat, 95))),
        ]
    else:
        rows += [
            ("ingest calls", str(totals.requests)),
            ("appended", str(totals.appended)),
            ("already stored", str(totals.already_stored)),
            ("superseded", str(totals.superseded)),
            ("fragments formed", str(totals.fragments_formed)),
        ]
    rows += [("errors", str(totals.errors)), ("elapsed s", f"{elapsed_s:.2f}")]
    return render_table(("replay " + ("--live" if live else "--ingest"), "value"), rows)


def inert(text: str) -> str:
    """``text`` for a terminal: a conversation id or label from FILE, or a message from
    the proxy, may hold escape sequences or line breaks; every non-printable character is
    written as its escape (``\\u001b``)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def seconds(text: str) -> float:
    """A timeout: a positive finite number of seconds (aiohttp reads ``inf`` as an
    OverflowError mid-run, and ``nan`` or ``0`` as no timeout at all)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def api_key(text: str) -> str:
    """A proxy key: printable ASCII (it is sent as a header, where aiohttp refuses a
    control character mid-run, and a line break could add a header of its own)."""
    if not text or not all(" " < c <= "~" for c in text):
        raise argparse.ArgumentTypeError("must be printable ASCII without spaces")
    return text


def proxy_url(text: str) -> str:
    """The proxy's address: an http or https URL naming a host."""
    try:
        parts = urllib.parse.urlsplit(text.strip())
        host = parts.hostname
    except ValueError:
        host = None
    if host is None or parts.scheme not in ("http", "https"):
        raise argparse.ArgumentTypeError(f"must be an http(s) URL with a host, got {text!r}")
    return text


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Replay LoCoMo JSON or chat JSONL through the areamem proxy.")
    parser.add_argument("file", type=Path, metavar="FILE", help="LoCoMo JSON or chat JSONL")
    parser.add_argument("--proxy", type=proxy_url, default="http://127.0.0.1:8787",
                        help="proxy root URL (default: http://127.0.0.1:8787)")
    parser.add_argument("--api-key", type=api_key,
                        help="proxy API key, sent as Authorization: Bearer")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--ingest", action="store_true", help="store via POST /memory/ingest")
    mode.add_argument("--live", action="store_true", help="send user turns as chat requests")
    parser.add_argument("--model", default="gpt-4o-mini", help="model name for --live")
    parser.add_argument("--memory", choices=("auto", "force", "off"), default="auto",
                        help="X-Memory header for --live (default: auto)")
    parser.add_argument("--conversations", default="all",
                        help="which conversations, 0-based: all, N, N-M, or a comma list")
    parser.add_argument("--limit-sessions", type=positive_int, metavar="N",
                        help="replay only the first N sessions of each conversation")
    parser.add_argument("--timeout", type=seconds, default=600.0,
                        help="seconds allowed per call (default: 600)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        conversations = select(load_file(args.file), args.conversations, args.limit_sessions)
    except InputError as exc:
        print(inert(f"replay: {exc}"), file=sys.stderr)
        return 2
    began = time.perf_counter()
    try:
        totals = asyncio.run(replay(args, conversations))
    except KeyboardInterrupt:
        print("replay: interrupted", file=sys.stderr)
        return 130
    print(summary(totals, args.live, time.perf_counter() - began))
    if totals.stopped:
        print(f"replay: stopped: {totals.stopped} (is `python -m proxy serve` running?)",
              file=sys.stderr)
    return 1 if totals.errors or totals.stopped else 0


if __name__ == "__main__":
    sys.exit(main())
