"""In-chat commands: a user message that starts with ``/memory`` is answered by the proxy
itself, in the client's own format, and never reaches the model.

``/memory why`` (what memory did in this conversation's last turn, from its receipt),
``/memory search <words>``, ``/memory forget <words | fragment ids>`` (words are listed
first, what says them to forget and what only denies them to keep, and forgotten on
``/memory forget confirm [ids]``; forgotten fragments are left out of retrieval until
``/memory unforget [forget id]``; each forget recorded),
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

from ..tenants.memory import HeldForget, TenantMemory

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
_SHOWN_PROPOSED = 25
_REQUEST_CHARS = 500
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
    try:
        if turn is not None and turn.receipt_id is not None:
            receipt = await memory.receipt(turn.receipt_id)
        elif turn is None:
            receipt = await memory.conversation_receipt(conversation)
    except MemoryCoreError as exc:  # an edited or damaged file: said, never a 500
        return f"The last memory lookup's receipt cannot be read: {exc}"
    if turn is not None and not turn.retrieve:
        why = f"Memory was not consulted in this conversation's last turn: {turn.reason}."
        return why + (f"\nMemory error: {turn.memory_error}" if turn.memory_error else "")
    if receipt is None:
        if turn is not None:  # consulted, but its receipt was not kept
            return f"Memory was consulted in the last turn ({turn.reason}); its receipt is gone."
        return "No turn of this conversation has consulted memory yet."
    return _explained(receipt)


def _explained(receipt: Mapping[str, Any]) -> str:
    """The receipt in words; a part stored in another shape reads as absent (receipts are
    read back from the store, whatever it holds)."""
    decision = _mapping(receipt.get("decision"))
    area = _mapping(receipt.get("area"))
    listed = area.get("fragments")
    fragments = [f for f in listed if isinstance(f, Mapping)] if isinstance(listed, list) else []
    at = _when(receipt.get("created_at"))
    lines = [
        f"**Last memory lookup of this conversation** ({at}, receipt `{receipt.get('id')}`)",
        f"Why: {decision.get('reason', 'unknown')}"
        + (f" (rule `{decision['rule']}`)" if decision.get("rule") else ""),
    ]
    if receipt.get("memory_error"):
        lines.append(f"Memory error: {receipt['memory_error']}")
    showed = sum(1 for f in fragments if _shown(f))
    citations = receipt.get("citations")
    cited = len(citations) if isinstance(citations, list) else 0
    tokens = receipt.get("tokens")
    tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else 0
    lines.append(
        f"Found {_count(len(fragments), 'fragment')}, showed {showed}, cited {cited} by number;"
        f" injected {_count(tokens, 'token')}."
    )
    lines += [_fragment_line(f) for f in fragments]
    text = str(receipt.get("injected_text") or "")
    if text:
        shown = text if len(text) <= _INJECTED_CHARS else text[:_INJECTED_CHARS] + " …"
        lines += ["", "Injected before your message:", "```text", shown, "```"]
    else:
        lines.append("Nothing was injected.")
    return "\n".join(lines)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _shown(fragment: Mapping[str, Any]) -> bool:
    """Whether the block showed ``fragment`` (a receipt kept from before the words
    were split says ``cited`` for shown)."""
    return bool(fragment.get("shown", fragment.get("cited")))


def _fragment_line(fragment: Mapping[str, Any]) -> str:
    number = fragment.get("number")
    if number is not None:
        mark = f" (shown, cited [{number}])"
    else:
        mark = " (shown)" if _shown(fragment) else ""
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
    """Fragment ids are forgotten at once; words are first answered with what they
    would forget (what asserts them) and keep (what only denies them), held for
    ``confirm`` (all it would forget, or only the listed ids named) or ``cancel``, until
    the conversation's next forget."""
    if not argument:
        return (
            f"Say what to forget: `{PREFIX} forget <words>` (lists every fragment that says "
            f"them, to confirm) or `{PREFIX} forget #12 #15` (fragment ids, from "
            f"`{PREFIX} search`)."
        )
    first, *rest = argument.split(maxsplit=1)
    if first.lower() == "confirm":
        return await _confirm(rest[0] if rest else "", memory, conversation)
    if first.lower() == "cancel":
        held = memory.drop_forget(conversation)
        if held is None:
            return _NOTHING_HELD
        return f"Nothing forgotten: the forget of {_quoted(held.request)} is called off."
    memory.drop_forget(conversation)  # a confirm answers the newest forget only
    numbers = _ids(argument)
    if numbers is not None:
        done = await memory.forget_fragments(
            numbers, request=_request(argument), conversation=conversation
        )
        return _forgotten(done, argument)
    plan = await memory.forget_matching(argument, conversation=conversation, preview=True)
    if not plan.fragments and not plan.kept:
        return f"Nothing to forget for {_quoted(argument)}."
    offered = tuple(h.fragment_id for h in plan.fragments)
    kept = tuple(h.fragment_id for h in plan.kept)
    memory.hold_forget(conversation, HeldForget(_request(argument), offered, kept))
    return _proposed(plan, argument)


async def _confirm(argument: str, memory: TenantMemory, conversation: str) -> str:
    held = memory.held_forget(conversation)
    if held is None:
        return _NOTHING_HELD
    if not argument:
        chosen = list(held.offered)
        if not chosen:
            return (
                f"Nothing listed for {_quoted(held.request)} is to be forgotten: those "
                f"fragments only deny it. `{PREFIX} forget confirm #id` forgets one anyway."
            )
    else:
        named = _ids(argument)
        if named is None:
            return (
                f"`{PREFIX} forget confirm` takes ids from the list (`#12 #15`), or nothing "
                "(all it would forget)."
            )
        chosen = list(dict.fromkeys(named))
        unlisted = [i for i in chosen if i not in held.listed]
        if unlisted:
            return (
                f"Not in the list for {_quoted(held.request)}: {_id_list(unlisted)}. Nothing "
                f"was forgotten; confirm ids from that list, or `{PREFIX} forget <words>` "
                "again."
            )
    memory.drop_forget(conversation)
    request = held.request if not argument else f"{held.request} ({_id_list(chosen)})"
    done = await memory.forget_fragments(
        chosen, request=_request(request), conversation=conversation
    )
    return _forgotten(done, held.request)


def _ids(text: str) -> list[int] | None:
    """The fragment ids ``text`` is made of ("#12 #15", "12, 15"), or None."""
    found = [_IDS.fullmatch(t) for t in text.replace(",", " ").split()]
    if not found or not all(found):
        return None
    return [int(m.group(1)) for m in found if m is not None]


def _proposed(plan: Forgotten, argument: str) -> str:
    lines = [f"**Forget {_quoted(argument)}?** Nothing is forgotten until you confirm."]
    if plan.fragments:
        lines.append(f"Would forget {_count(len(plan.fragments), 'fragment')} (they say it):")
        lines += _listed(plan.fragments)
    if plan.kept:
        lines.append(
            f"Would keep {_count(len(plan.kept), 'fragment')} (they only deny it: a "
            "correction is not forgotten with what it corrects):"
        )
        lines += _listed(plan.kept)
    example = (plan.fragments or plan.kept)[0].fragment_id
    every = f"`{PREFIX} forget confirm` forgets the {len(plan.fragments)} to forget; "
    lines.append(
        (every if plan.fragments else "")
        + f"`{PREFIX} forget confirm #{example}` forgets only the listed ids you name; "
        f"`{PREFIX} forget cancel` forgets nothing."
    )
    return "\n".join(lines)


def _listed(hits: Sequence[Hit]) -> list[str]:
    lines = [_hit_line(h) for h in hits[:_SHOWN_PROPOSED]]
    if len(hits) > _SHOWN_PROPOSED:
        lines.append(f"- … and {len(hits) - _SHOWN_PROPOSED} more")
    return lines


def _id_list(ids: Sequence[int]) -> str:
    shown = ", ".join(f"#{i}" for i in ids[:_SHOWN_FORGOTTEN])
    more = len(ids) - _SHOWN_FORGOTTEN
    return shown + (f" and {more} more" if more > 0 else "")


def _quoted(text: str) -> str:
    """``text`` as a reply quotes it: flattened, cut at :data:`_SHOWN_CHARS`."""
    return repr(_short(text))


def _request(text: str) -> str:
    """What a forget records of the request (a pasted page is not kept whole)."""
    return text if len(text) <= _REQUEST_CHARS else text[:_REQUEST_CHARS] + " …"


def _forgotten(done: Forgotten, argument: str) -> str:
    missing = _id_list(done.missing)
    note = f"\nNot found (or forgotten already): {missing}." if missing else ""
    if done.forget is None:
        return f"Nothing to forget for {_quoted(argument)}.{note}"
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


_NOTHING_HELD = (
    f"No forget waits for confirmation in this conversation: `{PREFIX} forget <words>` "
    "first lists what it would forget."
)


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
- `{PREFIX} forget <words>`: list the fragments that say all of the words (at most \
{MAX_FORGET}; a correction that denies them is kept), then `{PREFIX} forget confirm` \
forgets them, `{PREFIX} forget confirm #12` only those ids, `{PREFIX} forget cancel` none; \
`{PREFIX} forget #12 #15`: forget those fragments at once
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
