"""Helpers shared by the scripts in this folder: URLs, errors, percentiles and tables.

Nothing here touches the network or the environment; the scripts import it as a sibling
module (``python scripts/<name>.py`` puts this folder on ``sys.path``). Tenant databases
are read through :mod:`memory_core.storage` (read-only, as they are).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import signal
from collections import Counter
from collections.abc import Collection, Sequence
from pathlib import Path
from types import FrameType

from evaluation.locomo import Conversation, Question, as_message, load_locomo, normalise_evidence
from tqdm import tqdm

from memory_core import FormationConfig, LogMessage, MemoryStore, TokenCounter
from memory_core.dream import DreamReport
from memory_core.storage import integrity_check
from memory_core.storage.tables.log import logged_turns

__all__ = [
    "MAX_CUTOFF",
    "Turn",
    "answer_text",
    "api_error_message",
    "base_url",
    "compare_turns",
    "format_ms",
    "integrity_check",
    "locomo_conversations",
    "no_scorable_question",
    "output_file",
    "percentile",
    "proc_status",
    "process_status",
    "prometheus_samples",
    "render_table",
    "replay_locomo",
    "select_indices",
    "sigterm_as_interrupt",
    "store_file",
    "stored_turns",
    "tenant_databases",
]


def locomo_conversations(
    path: Path,
    spec: str,
    *,
    question_field: str = "question",
    questions_from: Path | None = None,
) -> list[Conversation]:
    """The conversations ``spec`` selects (:func:`select_indices`) from a LoCoMo file,
    asking each ``qa`` item's ``question_field``; :class:`~evaluation.locomo.LocomoError`
    or ValueError say what is wrong. ``questions_from``: another LoCoMo file whose
    questions are asked instead, each conversation those of the sample with its id or its
    id and a suffix (``conv-30-pt`` for ``conv-30``): the translated questions about the
    original conversation."""
    samples = load_locomo(path, question_field=question_field)
    chosen = [samples[i] for i in select_indices(spec, len(samples))]
    if questions_from is None:
        return chosen
    others = load_locomo(questions_from, question_field=question_field)
    asked = []
    for conv in chosen:
        match = [o for o in others if o.sample_id.split("-")[:2] == conv.sample_id.split("-")[:2]]
        if not match:
            raise ValueError(f"{questions_from}: no sample holds the questions of {conv.sample_id}")
        asked.append(dataclasses.replace(conv, questions=_borrowed(conv, match[0].questions)))
    return asked


def _borrowed(conv: Conversation, questions: Sequence[Question]) -> tuple[Question, ...]:
    """Another file's ``questions`` asked about ``conv``: their evidence checked again
    against ``conv``'s turns (the loader checked it against the other file's). An id
    naming no turn here is dropped (counted as the loader counts its own), where kept it
    was a turn no ranking can return: recall short of 1 for no fault of memory's."""
    ids = {t.dia_id for t in conv.turns}
    borrowed = []
    for question in questions:
        kept, dropped = normalise_evidence(question.evidence, ids)
        borrowed.append(
            dataclasses.replace(
                question, evidence=kept, dropped_evidence=question.dropped_evidence + dropped
            )
        )
    return tuple(borrowed)


def no_scorable_question(
    script: str, data: Path, conversations: Sequence[Conversation]
) -> str | None:
    """The one-line error when none of ``conversations`` holds a question whose evidence
    names a turn (only those are scored or asked: without one, a script replayed every
    conversation for nothing and failed at the end with a KeyError), else None."""
    if any(q.evidence for c in conversations for q in c.questions):
        return None
    asked = sum(len(c.questions) for c in conversations)
    return (
        f"{script}: {data}: the selected conversations hold no question whose"
        f" evidence names a turn ({asked} questions)"
    )


MAX_CUTOFF = 10_000
"""The largest cut-off k the evaluations take: far more than the turns of any LoCoMo
conversation (under a thousand), and a bound SQLite's 64-bit LIMIT holds (a cut-off of
2**64 failed deep inside the store with OverflowError, after the whole replay)."""


def store_file(folder: Path, sample_id: str) -> Path:
    """The store of the sample ``sample_id`` in ``folder``: a file name of its letters,
    digits and ``_.-`` (the others as ``_``) and a digest of the whole id, so two ids never
    share a file. The id itself as the name made ``a/b`` a folder that does not exist
    (sqlite cannot open it, a traceback after the baselines were built) and ``../x`` a
    store beside the temporary folder, left behind."""
    safe = "".join(c if c.isalnum() or c in "_.-" else "_" for c in sample_id)[:64]
    digest = hashlib.sha256(sample_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return folder / f"{safe.lstrip('.')}-{digest}.db"


def output_file(text: str) -> Path:
    """An argparse ``type`` for a file a script writes when it is done: refused at once
    (a usage error, status 2) when its folder does not exist or it names a folder,
    which was found only at the end, after the whole run, as a traceback that lost the
    figures."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: the folder {path.parent} does not exist")
    return path


DREAMS = ("none", "end", "sessions")
"""When :func:`replay_locomo` runs consolidation cycles: never, once at the end, or after
every session (as a dream policy that fires between sessions would)."""


def replay_locomo(
    conv: Conversation,
    path: Path,
    counter: TokenCounter | None = None,
    *,
    dream: str = "none",
    reports: list[DreamReport] | None = None,
    formation: FormationConfig | None = None,
) -> MemoryStore:
    """A store at ``path`` holding ``conv``, ingested session by session with formation
    after each, as the proxy would have (a progress bar on stderr); with ``dream`` (one
    of :data:`DREAMS`) consolidation cycles run too, their reports appended to
    ``reports``."""
    store = MemoryStore(path, counter=counter, formation=formation)
    history: list[LogMessage] = []
    bar = tqdm(total=len(conv.turns), desc=f"ingest {conv.sample_id}", unit="turn", leave=False)
    for session in conv.sessions():
        history.extend(
            LogMessage(as_message(conv, t), t.ts.timestamp(), t.dia_id) for t in session
        )
        store.append(history, conversation=conv.sample_id, source="ingest")
        store.form_all()
        if dream == "sessions":
            _dreamt(store, reports)
        bar.update(len(session))
    if dream == "end":
        _dreamt(store, reports)
    bar.close()
    return store


def _dreamt(store: MemoryStore, reports: list[DreamReport] | None) -> None:
    report = store.dream(trigger="replay")
    if reports is not None:
        reports.append(report)


def select_indices(spec: str, count: int) -> list[int]:
    """Indexes from ``all``, ``N``, ``N-M`` or a comma list of those (0-based, in order,
    without repeats); ValueError names what is wrong."""
    if spec.strip().lower() == "all":
        return list(range(count))
    chosen: list[int] = []
    for part in spec.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise ValueError(
                f"--conversations {spec!r}: expected all, N, N-M or a comma-separated list of those"
            ) from None
        if first > last:  # "outside 0-9" said nothing of what is wrong with "3-1"
            raise ValueError(f"--conversations {spec!r}: {part.strip()} ends before it starts")
        if not 0 <= first <= last < count:
            raise ValueError(
                f"--conversations {spec!r}: {part.strip()} is outside 0-{count - 1} "
                f"(the file has {count} conversations)"
            )
        chosen.extend(range(first, last + 1))
    return list(dict.fromkeys(chosen))


def proc_status() -> dict[str, int]:
    """The ``kB`` fields of ``/proc/self/status`` (VmRSS, VmHWM, ...) in bytes; empty off
    Linux."""
    return process_status("self")


def sigterm_as_interrupt() -> None:
    """Make SIGTERM unwind like Ctrl-C, so ``finally`` blocks clean up (children, folders)."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def base_url(url: str) -> str:
    """The proxy's root URL: ``http://host:port`` from that or from ``.../v1``."""
    root = url.strip().rstrip("/")
    return root.removesuffix("/v1").rstrip("/")


def api_error_message(status: int, body: bytes) -> str:
    """``HTTP <status> <type>: <message>`` from an OpenAI error body, else the raw text."""
    try:
        error = json.loads(body)["error"]
        return f"HTTP {status} {error.get('type') or 'error'}: {error['message']}"
    except (ValueError, KeyError, TypeError, AttributeError):
        text = body.decode("utf-8", "replace").strip().replace("\n", " ")
        return f"HTTP {status}: {text[:300] or '(empty body)'}"


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def format_ms(value: float, *, signed: bool = False) -> str:
    """Milliseconds with two decimals (``+`` for positive deltas when ``signed``)."""
    if math.isnan(value):
        return "-"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        parts = [
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


# --- what a tenant's database holds (read-only), for the load and crash-loop checks --------

Turn = tuple[str, str, str]
"""``(conversation_id, role, text)``: one message as the durable log keeps it."""


def tenant_databases(data_dir: Path) -> list[Path]:
    """The tenant SQLite files under ``data_dir/tenants`` (sorted)."""
    folder = data_dir / "tenants"
    return sorted(folder.glob("*.db")) if folder.is_dir() else []


def stored_turns(path: Path, conversations: Collection[str] | None = None) -> Counter[Turn]:
    """How often each ``(conversation_id, role, text)`` is in the ``log`` table of
    ``path`` (opened read-only), for the given conversations (all when None)."""
    counts: Counter[Turn] = Counter()
    if not path.is_file():
        return counts
    for conv, role, text in logged_turns(path):
        if conversations is None or conv in conversations:
            counts[(str(conv), str(role), str(text))] += 1
    return counts


def compare_turns(expected: Counter[Turn], stored: Counter[Turn]) -> tuple[list[Turn], list[Turn]]:
    """``(lost, duplicated)``: expected turns stored fewer times than expected (each
    missing copy listed once), and expected turns stored more times than expected."""
    lost: list[Turn] = []
    duplicated: list[Turn] = []
    for turn, count in expected.items():
        have = stored.get(turn, 0)
        lost.extend([turn] * max(0, count - have))
        duplicated.extend([turn] * max(0, have - count))
    return lost, duplicated


def answer_text(body: bytes, stream: bool) -> str | None:
    """The assistant's complete answer in a chat response body, or None when it is not
    complete: a stream without ``[DONE]`` or with an error event, a JSON body without
    ``choices[0].message.content``."""
    if not stream:
        try:
            content = json.loads(body)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            return None
        return content if isinstance(content, str) else None
    pieces: list[str] = []
    for line in body.split(b"\n"):
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            return "".join(pieces)
        try:
            event = json.loads(payload)
        except ValueError:
            return None
        if not isinstance(event, dict) or "error" in event:
            return None
        for choice in event.get("choices") or []:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if isinstance(delta, dict) and isinstance(delta.get("content"), str):
                pieces.append(delta["content"])
    return None


def prometheus_samples(text: str, name: str) -> dict[str, float]:
    """The samples of metric ``name`` in a Prometheus text exposition, keyed by their
    label set as written (``""`` for none): ``{'{stage="retrieval"}': 3.0}``."""
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        labels = head[len(name) :]
        if labels and not labels.startswith("{"):
            continue
        try:
            samples[labels] = float(value)
        except ValueError:
            continue
    return samples


def process_status(pid: int | str) -> dict[str, int]:
    """The ``kB`` fields of ``/proc/<pid>/status`` (VmRSS, VmHWM, ...) in bytes; empty
    when the process is gone or off Linux."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines()
    except OSError:
        return {}
    fields = {}
    for line in lines:
        key, _, value = line.partition(":")
        parts = value.split()
        if len(parts) == 2 and parts[1] == "kB":
            fields[key] = int(parts[0]) * 1024
    return fields
