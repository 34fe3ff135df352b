"""Loader for conversations in LoCoMo's format (Maharana et al., ACL 2024).

A file is a JSON list of samples ``{sample_id, conversation, qa}``; the conversation has
``speaker_a``/``speaker_b``, ``session_<n>`` turn lists (``{speaker, dia_id, text}``,
some with ``blip_caption``) and ``session_<n>_date_time`` ("1:56 pm on 8 May, 2023").
Sessions are read in numeric order. Evidence ids are normalised ("D8:6; D9:17" is two
ids, "D:11:26" is "D11:26"); ids that name no turn of the conversation are dropped and
counted in :attr:`Question.dropped_evidence`.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Conversation",
    "LocomoError",
    "Question",
    "Turn",
    "as_message",
    "load_locomo",
    "parse_locomo",
    "parse_session_date",
]

_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y")


class LocomoError(ValueError):
    """The file is not in LoCoMo's format; the message names the file, sample and field."""


@dataclass(frozen=True)
class Turn:
    """One turn: its id, session, speaker, text, image caption and timestamp (UTC)."""

    dia_id: str
    session: int
    speaker: str
    text: str
    caption: str | None
    ts: dt.datetime

    def document(self) -> str:
        """How baselines index a turn: ``"<speaker>: <text>"`` plus its caption."""
        base = f"{self.speaker}: {self.text}"
        return f"{base} {self.caption}" if self.caption else base


@dataclass(frozen=True)
class Question:
    """A question with its evidence turn ids and category (1-5)."""

    question: str
    answer: str
    evidence: tuple[str, ...]
    category: int
    dropped_evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class Conversation:
    """One sample: two speakers, turns in order, questions."""

    sample_id: str
    speaker_a: str
    speaker_b: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]

    def sessions(self) -> list[list[Turn]]:
        """Turns grouped by session, in order."""
        grouped: dict[int, list[Turn]] = {}
        for turn in self.turns:
            grouped.setdefault(turn.session, []).append(turn)
        return [grouped[k] for k in sorted(grouped)]


def parse_session_date(text: str) -> dt.datetime:
    """``"1:56 pm on 8 May, 2023"`` as an aware UTC datetime; ValueError otherwise."""
    cleaned = " ".join(text.replace(" ,", ",").split())
    for fmt in _DATE_FORMATS:
        try:
            return dt.datetime.strptime(cleaned, fmt).replace(tzinfo=dt.UTC)
        except ValueError:
            continue
    raise ValueError(f"unrecognised session date {text!r}")


def load_locomo(path: str | Path, *, question_field: str = "question") -> list[Conversation]:
    """Read every sample of a LoCoMo-format file; raises :class:`LocomoError`.
    ``question_field``: which field of a ``qa`` item is asked (``question_en`` in the
    translated files: the English question about the translated conversation)."""
    source = Path(path)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        raise LocomoError(f"{source}: cannot read JSON: {exc}") from exc
    return parse_locomo(data, str(source), question_field=question_field)


def parse_locomo(
    data: Any, source: str, *, question_field: str = "question"
) -> list[Conversation]:
    """The samples of already-decoded LoCoMo JSON (``source`` names it in errors)."""
    if not isinstance(data, list):
        raise LocomoError(f"{source}: expected a JSON list of samples")
    if not data:
        # every reader reported zeros for it ("0.0% faithful", no entities) as results
        raise LocomoError(f"{source}: the list holds no sample")
    samples = [_sample(source, i, item, question_field) for i, item in enumerate(data)]
    first: dict[str, int] = {}
    for index, sample in enumerate(samples):
        # one store, tenant and row of figures per sample id: a repeated one mixed two
        # conversations in one memory and counted one of them only
        seen = first.setdefault(sample.sample_id, index)
        if seen != index:
            raise LocomoError(
                f"{source}: sample {index}: sample_id {sample.sample_id!r} repeats sample {seen}'s"
            )
    return samples


def as_message(conversation: Conversation, turn: Turn) -> dict[str, str]:
    """A turn as a chat message: speaker_a is the user, speaker_b the assistant; the
    image caption, when present, is appended as ``[shared an image: ...]``."""
    role = "user" if turn.speaker == conversation.speaker_a else "assistant"
    content = turn.text + (f" [shared an image: {turn.caption}]" if turn.caption else "")
    return {"role": role, "name": turn.speaker, "content": content}


def _sample(source: str, index: int, item: Any, question_field: str) -> Conversation:
    where = f"{source}: sample {index}"
    if not isinstance(item, dict) or not isinstance(item.get("conversation"), dict):
        raise LocomoError(f"{where}: expected an object with a 'conversation' object")
    sample_id = str(item.get("sample_id", index))
    where = f"{source}: sample {index} ({sample_id})"
    conv = item["conversation"]
    turns = _turns(where, conv)
    if not turns:
        # every reader replays the turns and ranks them: none is nothing to evaluate
        # (and a retriever indexing no document fails deep inside its library)
        raise LocomoError(f"{where}: no session holds a turn")
    ids = {t.dia_id for t in turns}
    qa = item.get("qa") or []
    if not isinstance(qa, list):
        raise LocomoError(f"{where}: 'qa' must be a list of questions")
    questions = tuple(_question(where, j, q, ids, question_field) for j, q in enumerate(qa))
    return Conversation(
        sample_id=sample_id,
        speaker_a=str(conv.get("speaker_a", "")),
        speaker_b=str(conv.get("speaker_b", "")),
        turns=tuple(turns),
        questions=questions,
    )


def _turns(where: str, conv: dict[str, Any]) -> list[Turn]:
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION.fullmatch(k)))
    turns: list[Turn] = []
    for number in numbers:
        key = f"session_{number}"
        raw_date = conv.get(f"{key}_date_time")
        try:
            date = parse_session_date(str(raw_date))
        except ValueError as exc:
            raise LocomoError(f"{where}: {key}_date_time: {exc}") from exc
        session = conv[key]
        if not isinstance(session, list):
            raise LocomoError(f"{where}: {key} must be a list of turns")
        turns.extend(_turn(where, key, number, i, t, date) for i, t in enumerate(session))
    return turns


def _turn(where: str, key: str, number: int, index: int, raw: Any, date: dt.datetime) -> Turn:
    if not isinstance(raw, dict):
        raise LocomoError(f"{where}: {key}[{index}] must be an object")
    for field in ("speaker", "dia_id", "text"):
        if not isinstance(raw.get(field), str):
            raise LocomoError(f"{where}: {key}[{index}]: '{field}' must be a string")
    caption = raw.get("blip_caption")
    return Turn(
        dia_id=raw["dia_id"],
        session=number,
        speaker=raw["speaker"],
        text=raw["text"],
        caption=caption if isinstance(caption, str) and caption.strip() else None,
        ts=date + dt.timedelta(seconds=index),
    )


def _question(where: str, index: int, raw: Any, ids: set[str], field: str) -> Question:
    if not isinstance(raw, dict) or not isinstance(raw.get(field), str):
        raise LocomoError(f"{where}: qa[{index}]: expected an object with a '{field}' string")
    try:
        category = int(raw.get("category", 0))
    except (TypeError, ValueError, OverflowError) as exc:  # OverflowError: 1e400 reads as inf
        raise LocomoError(f"{where}: qa[{index}]: 'category' must be an integer") from exc
    evidence = raw.get("evidence") or []
    if not isinstance(evidence, list):
        # a bare string would be read character by character, every id silently dropped
        raise LocomoError(f"{where}: qa[{index}]: 'evidence' must be a list of turn ids")
    answer = raw.get("answer", raw.get("adversarial_answer", ""))
    if answer is None:  # no answer written (it was scored as the text "None")
        answer = raw.get("adversarial_answer") or ""
    if not isinstance(answer, str | int | float) or isinstance(answer, bool):
        # an object or a list would be scored as its repr
        raise LocomoError(f"{where}: qa[{index}]: 'answer' must be a string or a number")
    kept, dropped = normalise_evidence(evidence, ids)
    return Question(raw[field], str(answer), kept, category, dropped)


def normalise_evidence(
    raw: Sequence[Any], ids: set[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Evidence ids that exist (in order, unique) and the raw entries that name none."""
    kept: dict[str, None] = {}
    dropped: list[str] = []
    for entry in raw:
        found = [f"D{s}:{t}" for s, t in _EVIDENCE.findall(str(entry))]
        valid = [f for f in found if f in ids]
        kept.update(dict.fromkeys(valid))
        if len(valid) < max(len(found), 1):
            dropped.append(str(entry))
    return tuple(kept), tuple(dropped)
