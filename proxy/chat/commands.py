"""In-chat commands: a user message that starts with ``/memory`` is answered by the proxy
itself, in the client's own format, and never reaches the model.

``/memory why`` (what memory did in this conversation's last turn, from its receipt),
``/memory search <words>``, ``/memory forget <words | fragment ids>`` (forgotten fragments
are left out of retrieval until ``/memory unforget [forget id]``; each forget recorded),
``/memory off`` and ``/memory on`` (for this conversation: off, memory is neither
consulted nor written), ``/memory help``.

A command turn stays in the client's history; the proxy reads every history without its
command turns (the command and the proxy's answer right after it: :func:`command_turns`),
so they are never forwarded, never read by the policy or retrieval and never stored; and
it stores nothing said between ``/memory off`` and ``/memory on`` (:func:`off_turns`).
Which conversation a command acts on is the conversation of its request (the explicit
conversation header, else the first messages of the history, commands included).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memory_core import MAX_FORGET, ForgetRow, Forgotten, Hit, MemoryCoreError, message_text

from ..tenants.memory import TenantMemory

__all__ = [
    "PREFIX",
    "VERBS",
    "Command",
    "command_of",
    "command_turns",
    "latest_command",
    "off_turns",
    "run",
]

PREFIX = "/memory"
VERBS = ("help", "why", "search", "forget", "unforget", "off", "on")
_START = re.compile(r"\s*/memory(?=\s|$)", re.IGNORECASE)
_IDS = re.compile(r"#?(\d{1,18})")
_SEARCH_HITS = 8
_SHOWN_CHARS = 160
_SHOWN_FORGOTTEN = 10
_INJECTED_CHARS = 4_000


@dataclass(frozen=True)
class Command:
    """``verb`` one of :data:`VERBS`, or what was typed when it is none of them."""

    verb: str
    argument: str

    @property
    def known(self) -> bool:
        return self.verb in VERBS


def command_of(text: str) -> Command | None:
    """The command ``text`` is, or None: ``/memory`` (any case) alone or followed by
    white space, at the start of the text (leading white space allowed)."""
    found = _START.match(text)  # "/memoryless" is not a command
    if found is None:
        return None
    words = text[found.end() :].split(maxsplit=1)
    verb = words[0].lower() if words else "help"
    return Command(verb, words[1].strip() if len(words) > 1 else "")


def _command_message(message: Mapping[str, Any]) -> Command | None:
    if message.get("role") != "user":
        return None
    return command_of(message_text(message.get("content")))


def latest_command(messages: Sequence[Mapping[str, Any]]) -> Command | None:
    """The command of the history's latest user message, when nothing but tool or
    system messages follows it (a command already answered is not asked again)."""
    for message in reversed(messages):
        role = message.get("role")
        if role == "user":
            return _command_message(message)
        if role == "assistant":
            return None
    return None


def command_turns(messages: Sequence[Mapping[str, Any]]) -> frozenset[int]:
    """Indices of the command messages and of the assistant message right after each
    (the proxy's answer, as the client keeps it)."""
    found: set[int] = set()
    for index, message in enumerate(messages):
        if _command_message(message) is not None:
            found.add(index)
            after = index + 1
            if after < len(messages) and messages[after].get("role") == "assistant":
                found.add(after)
    return frozenset(found)


def off_turns(messages: Sequence[Mapping[str, Any]]) -> frozenset[int]:
    """Indices of the messages said while memory was off in this history: after a
    ``/memory off`` up to the next ``/memory on`` (the commands themselves aside)."""
    found: set[int] = set()
    off = False
    for index, message in enumerate(messages):
        command = _command_message(message)
        if command is not None and command.verb in ("off", "on"):
            off = command.verb == "off"
        elif off:
            found.add(index)
    return frozenset(found)


@dataclass(frozen=True)
class Context:
    """Where a command runs: the tenant's memory (None when it cannot be opened, with
    ``error``) and the conversation of the request."""

    memory: TenantMemory | None
    conversation: str
    error: str | None = None


async def run(command: Command, context: Context) -> str:
    """The proxy's answer to ``command`` (Markdown text). Memory errors are answered,
    never raised: the user asked the proxy, and the proxy says what went wrong."""
    if not command.known:
        return f"Unknown command `{PREFIX} {command.verb}`.\n\n{_HELP}"
    if command.verb == "help":
        return _HELP
    memory = context.memory
    if memory is None:
        return f"Memory is unavailable for this key right now: {context.error or 'unknown'}."
    try:
        return await _VERBS[command.verb](command.argument, memory, context.conversation)
    except MemoryCoreError as exc:
        return f"`{PREFIX} {command.verb}` failed: {exc}"


async def _why(argument: str, memory: TenantMemory, conversation: str) -> str:
    turn = memory.last_turn(conversation)
    receipt = None
    if turn is not None and turn.receipt_id is not None:
        receipt = await memory.receipt(turn.receipt_id)
    elif turn is None:
        receipt = await memory.conversation_receipt(conversation)
    if turn is not None and not turn.retrieve:
        why = f"Memory was not consulted in this conversation's last turn: {turn.reason}."
        return why + (f"\nMemory error: {turn.memory_error}" if turn.memory_error else "")
    if receipt is None:
        if turn is not None:  # consulted, but its receipt was not kept
            return f"Memory was consulted in the last turn ({turn.reason}); its receipt is gone."
        return "No turn of this conversation has consulted memory yet."
    return _explained(receipt)


def _explained(receipt: Mapping[str, Any]) -> str:
    decision = receipt.get("decision") or {}
    fragments = (receipt.get("area") or {}).get("fragments") or []
    at = _when(receipt.get("created_at"))
    lines = [
        f"**Last memory lookup of this conversation** ({at}, receipt `{receipt.get('id')}`)",
        f"Why: {decision.get('reason', 'unknown')}"
        + (f" (rule `{decision['rule']}`)" if decision.get("rule") else ""),
    ]
    if receipt.get("memory_error"):
        lines.append(f"Memory error: {receipt['memory_error']}")
    cited = sum(1 for f in fragments if f.get("cited"))
    lines.append(
        f"Found {_count(len(fragments), 'fragment')}, cited {cited}; injected "
        f"{_count(int(receipt.get('tokens') or 0), 'token')}."
    )
    lines += [_fragment_line(f) for f in fragments]
    text = str(receipt.get("injected_text") or "")
    if text:
        shown = text if len(text) <= _INJECTED_CHARS else text[:_INJECTED_CHARS] + " …"
        lines += ["", "Injected before your message:", "```text", shown, "```"]
    else:
        lines.append("Nothing was injected.")
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _fragment_line(fragment: Mapping[str, Any]) -> str:
    mark = " (cited)" if fragment.get("cited") else ""
    who = fragment.get("speaker") or fragment.get("role") or "?"
    return f"- #{fragment.get('id')} {who}{mark}: {_short(str(fragment.get('text', '')))}"


async def _search(argument: str, memory: TenantMemory, conversation: str) -> str:
    if not argument:
        return f"Say what to look for: `{PREFIX} search <words>`."
    recall = await memory.recall(
        argument, limit=_SEARCH_HITS, budget_tokens=600, exclude_hashes=(), strategy="bm25"
    )
    if not recall.hits:
        return f"Nothing in memory matches {argument!r}."
    lines = [f"**Memory for {argument!r}** (best first; `{PREFIX} forget #id` forgets one):"]
    lines += [_hit_line(h) for h in recall.hits]
    return "\n".join(lines)


def _hit_line(hit: Hit) -> str:
    who = hit.speaker or hit.role
    when = f", {_when(hit.ts, date_only=True)}" if hit.ts is not None else ""
    return f"- #{hit.fragment_id} {who} ({hit.conversation_id}{when}): {_short(hit.text)}"


async def _forget(argument: str, memory: TenantMemory, conversation: str) -> str:
    if not argument:
        return (
            f"Say what to forget: `{PREFIX} forget <words>` (every fragment with all of "
            f"them) or `{PREFIX} forget #12 #15` (fragment ids, from `{PREFIX} search`)."
        )
    tokens = argument.replace(",", " ").split()
    ids = [_IDS.fullmatch(t) for t in tokens]
    if all(ids):
        numbers = [int(m.group(1)) for m in ids if m is not None]
        done = await memory.forget_fragments(
            numbers, request=argument, conversation=conversation
        )
    else:
        done = await memory.forget_matching(argument, conversation=conversation)
    return _forgotten(done, argument)


def _forgotten(done: Forgotten, argument: str) -> str:
    missing = ", ".join(f"#{f}" for f in done.missing)
    note = f"\nNot found (or forgotten already): {missing}." if missing else ""
    if done.forget is None:
        return f"Nothing to forget for {argument!r}.{note}"
    count = len(done.fragments)
    lines = [
        f"Forgot {_count(count, 'fragment')} ({_count(done.forget.messages, 'message')}); "
        "memory will not "
        f"retrieve them again. `{PREFIX} unforget {done.forget.id}` brings them back."
    ]
    lines += [_hit_line(h) for h in done.fragments[:_SHOWN_FORGOTTEN]]
    if count > _SHOWN_FORGOTTEN:
        lines.append(f"- … and {count - _SHOWN_FORGOTTEN} more")
    return "\n".join(lines) + note


async def _unforget(argument: str, memory: TenantMemory, conversation: str) -> str:
    wanted: int | None = None
    if argument:
        found = _IDS.fullmatch(argument.strip())
        if found is None:
            return f"`{PREFIX} unforget` takes a forget's number (or nothing: the newest)."
        wanted = int(found.group(1))
    undone = await memory.unforget(wanted)
    if undone is None:
        which = f"forget {wanted}" if wanted is not None else "forget"
        return f"No {which} in force to undo."
    return _undone(undone)


def _undone(row: ForgetRow) -> str:
    return (
        f"Undid forget {row.id} ({row.request!r}, {_when(row.created_at)}): its "
        f"{_count(row.messages, 'message')} {'is' if row.messages == 1 else 'are'} "
        "remembered again."
    )


async def _off(argument: str, memory: TenantMemory, conversation: str) -> str:
    changed = await memory.switch_memory(conversation, on=False)
    state = "is now off" if changed else "was already off"
    return (
        f"Memory {state} in this conversation: it is not consulted, and nothing said here "
        f"is remembered, until `{PREFIX} on`."
    )


async def _on(argument: str, memory: TenantMemory, conversation: str) -> str:
    changed = await memory.switch_memory(conversation, on=True)
    state = "is now on" if changed else "was already on"
    return f"Memory {state} in this conversation (what was said while it was off stays unknown)."


_VERBS = {
    "why": _why,
    "search": _search,
    "forget": _forget,
    "unforget": _unforget,
    "off": _off,
    "on": _on,
}

_HELP = f"""**Memory commands** (answered by the memory proxy, never sent to the model):
- `{PREFIX} why`: what memory did in this conversation's last turn, and why
- `{PREFIX} search <words>`: what memory holds about them (with fragment ids)
- `{PREFIX} forget <words>`: forget every fragment that has all of the words (at most \
{MAX_FORGET}); `{PREFIX} forget #12 #15`: forget those fragments
- `{PREFIX} unforget [number]`: undo a forget (the newest when no number is given)
- `{PREFIX} off` / `{PREFIX} on`: stop or resume memory in this conversation (off: not \
consulted, nothing remembered)
- `{PREFIX} help`: this list"""


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _SHOWN_CHARS else flat[:_SHOWN_CHARS] + " …"


def _when(ts: object, *, date_only: bool = False) -> str:
    if not isinstance(ts, int | float) or isinstance(ts, bool):
        return "time unknown"
    try:
        moment = datetime.fromtimestamp(float(ts), UTC)
    except (OverflowError, OSError, ValueError):
        return "time unknown"
    return moment.strftime("%Y-%m-%d" if date_only else "%Y-%m-%d %H:%M UTC")
