"""Read-only views of what formation built, for people: entities, contexts, relations.

Each function returns typed views (:mod:`memory_core.views`) with the sources that support what they
show (fragment text, conversation and time), so a person can check any claim. Whatever is stored,
the output is strict JSON: a time that is not a sane timestamp reads as None
(:func:`~memory_core.log.messages.stored_timestamp`), and so does any other non-finite number. The
queries are in :mod:`.storage` (:func:`~memory_core.storage.tables.entities.summaries` and its
neighbours); each view is built from its row's fields.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ..formation.stages.addressing import VOCATIVE
from ..formation.stages.linking import normalise_name
from ..log.messages import stored_timestamp
from ..storage import Connection
from ..storage.tables import contexts, entities, relations
from ..views import ContextView, EntityView, RelationView

__all__ = ["SOURCE_CHARS", "list_contexts", "list_entities", "list_relations"]

SOURCE_CHARS = 2_000
"""The most characters of a source fragment's text a view shows (then "…"): a pasted
megabyte supports its relations as well by its opening, and a listing of relations or
contexts must not grow with the size of what was pasted."""

_TIMES = frozenset({"ts", "first_ts", "last_ts", "first_seen", "last_seen", "created_at"})
_SOURCE = ("fragment_id", "fragment_text", "conversation_id", "ts", "speaker")
_CONTEXTS_PER_ENTITY = 5
_SAMPLES_PER_CONTEXT = 3
_VOCATIVE_FRAGMENTS = 20


_READ = SOURCE_CHARS + 1
"""Read one character more than shown: whether the text was cut."""


def _opening(text: str) -> str:
    """``text`` as read (at most :data:`_READ` characters), cut to :data:`SOURCE_CHARS`
    and marked when longer."""
    return text if len(text) <= SOURCE_CHARS else text[:SOURCE_CHARS] + "…"


def _value(name: str, value: Any) -> Any:
    if name in _TIMES:
        return stored_timestamp(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _plain(row: Any) -> dict[str, Any]:
    """A typed row as a JSON-ready dictionary (see :func:`_value`)."""
    return {f.name: _value(f.name, getattr(row, f.name)) for f in dataclasses.fields(row)}


def list_entities(
    conn: Connection, *, limit: int = 100, name: str | None = None
) -> list[EntityView]:
    """Entities by number of mentions, with their aliases (and languages)."""
    normalized = normalise_name(name) if name else None
    found = [_plain(e) for e in entities.summaries(conn, limit=limit, normalized=normalized)]
    for entity in found:
        entity["is_speaker"] = bool(entity["is_speaker"])
        entity["aliases"] = _aliases(conn, entity["id"])
        entity["contexts"] = [
            _plain(c) for c in entities.contexts_of(conn, entity["id"], _CONTEXTS_PER_ENTITY)
        ]
    return [EntityView.model_validate(entity) for entity in found]


def _aliases(conn: Connection, entity_id: int) -> list[dict[str, Any]]:
    """The entity's aliases; a vocative one with the fragments that used it (the
    mentions linked as vocatives, :mod:`memory_core.formation.stages.addressing`)."""
    aliases = [_plain(a) for a in entities.aliases_of(conn, entity_id)]
    if not any(a["source"] == VOCATIVE for a in aliases):
        return aliases
    used: dict[str, list[int]] = {}
    for fragment_id, surface in entities.mentions_by_reason(
        conn, entity_id, VOCATIVE, _VOCATIVE_FRAGMENTS * 4
    ):
        fragments = used.setdefault(normalise_name(surface), [])
        if len(fragments) < _VOCATIVE_FRAGMENTS and fragment_id not in fragments:
            fragments.append(fragment_id)
    for alias in aliases:
        if alias["source"] == VOCATIVE:
            alias["used_in"] = used.get(normalise_name(alias["alias"]), [])
    return aliases


def list_contexts(conn: Connection, *, limit: int = 100) -> list[ContextView]:
    """Contexts, largest first, with the conversations they span and sample fragments."""
    found = [_plain(c) for c in contexts.summaries(conn, limit)]
    for context in found:
        key = context["id"]
        context["conversations"] = [
            _value("conversation_id", c) for c in contexts.conversations_of(conn, key)
        ]
        context["segments"] = contexts.segment_count(conn, key)
        context["secondary_members"] = contexts.secondary_members(conn, key)
        context["sample"] = [
            {**sample, "text": _opening(sample["text"])}
            for sample in (
                _plain(s) for s in contexts.samples(conn, key, _SAMPLES_PER_CONTEXT, _READ)
            )
        ]
    return [ContextView.model_validate(context) for context in found]


def list_relations(
    conn: Connection, *, entity: str | None = None, limit: int = 200
) -> list[RelationView]:
    """Relations (of one entity, as subject or object, when named), each with its source."""
    normalized = normalise_name(entity) if entity else None
    found = [
        _plain(r) for r in relations.views(conn, normalized=normalized, limit=limit, chars=_READ)
    ]
    for relation in found:
        relation["source"] = {k: relation.pop(k) for k in _SOURCE}
        relation["source"]["fragment_text"] = _opening(relation["source"]["fragment_text"])
        relation["mutation"] = {
            "kind": relation.pop("mutation"),
            "other": relation.pop("mutation_other"),
            "reason": relation.pop("mutation_reason"),
        }
    return [RelationView.model_validate(relation) for relation in found]
