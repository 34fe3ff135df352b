"""What a user asks of :class:`~memory_core.store.memory_store.MemoryStore` itself: "forget this",
by fragment id or by words, undone on demand, each one recorded; and memory switched off for one
conversation (:mod:`memory_core.storage.tables.switches`).

What a forget does is in :mod:`memory_core.storage.tables.forgets` (the messages it names are left
out of every retrieval read; not derived memory, so rollbacks and consolidation cycles neither undo
nor repeat it). Forgetting by words names the live fragments that have every content word of the
request (:func:`~memory_core.text.words.query_terms`), at most :data:`MAX_FORGET` of them: a request
that matches more is refused, never applied to a part of what matched.

Forgetting by words forgets what *asserts* the words, never what only denies them: "forget
Lisbon" forgets "Ana lives in Lisbon", and keeps "Actually Ana moved to Porto, not Lisbon" (a
correction that negates Lisbon holds what is true now). A fragment is kept when one of the
words occurs in it only where it says that something is not so
(:func:`~memory_core.formation.stages.relations.denied_spans`: "not Lisbon", "não para
Lisboa", "no en Lisboa", "I don't live in Lisbon", "instead of Lisbon"). A forget by words may
be previewed first (``preview=True``: what it would forget and keep, nothing recorded).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..errors import InvalidInputError
from ..formation.stages.relations import denied_spans
from ..retrieval.bm25 import Hit, fetch_hits
from ..storage import Connection, retry_busy, transaction
from ..storage.tables import forgets as forget_rows
from ..storage.tables import switches
from ..storage.tables.forgets import ForgetRow
from ..text.words import WORD, fold, query_terms, stem

__all__ = ["MAX_FORGET", "Forgotten", "StoreControls"]

MAX_FORGET = 100
"""The most fragments one forget by words may name."""


@dataclass(frozen=True)
class Forgotten:
    """What a forget did, or previewed, would do: its record (None when nothing was
    forgotten: nothing matched, or a preview), the fragments it forgot or would forget
    (as they were), the fragment ids it was given that are not live fragments (unknown,
    superseded, or forgotten already), and for a forget by words the fragments that have
    the words but were kept, since they only deny them."""

    forget: ForgetRow | None
    fragments: tuple[Hit, ...]
    missing: tuple[int, ...] = ()
    kept: tuple[Hit, ...] = ()


class StoreControls:
    """Forgetting for one store (a base of ``MemoryStore``, which builds the attributes
    declared here); every method runs on the writing connection under its lock."""

    _clock: Callable[[], float]
    _writer: Connection
    _write_lock: threading.Lock

    def forget_fragments(
        self, fragment_ids: Sequence[int], *, request: str, conversation: str | None
    ) -> Forgotten:
        """Forget the messages of ``fragment_ids`` (``request`` is what the user asked,
        kept in the record); raises :class:`InvalidInputError` for more than
        :data:`MAX_FORGET` distinct ids (as many as one forget by words may name)."""
        if len(set(fragment_ids)) > MAX_FORGET:
            raise InvalidInputError(
                f"{len(set(fragment_ids))} fragment ids: one forget takes at most {MAX_FORGET}"
            )

        def run() -> Forgotten:
            with transaction(self._writer):
                hits = fetch_hits(self._writer, list(dict.fromkeys(fragment_ids)))
                found = {h.fragment_id for h in hits}
                missing = tuple(f for f in dict.fromkeys(fragment_ids) if f not in found)
                return self._forget(hits, request, conversation, missing)

        with self._write_lock:
            return retry_busy(run)

    def forget_matching(
        self, words: str, *, conversation: str | None, preview: bool = False
    ) -> Forgotten:
        """Forget the messages of the live fragments that have every content word of
        ``words`` and assert them (those that only deny a word are ``kept``), or with
        ``preview`` only say which they would be; raises :class:`InvalidInputError` when
        ``words`` has no content word, or when more than :data:`MAX_FORGET` fragments
        match."""
        terms = query_terms(words)
        if not terms:
            raise InvalidInputError(f"{words!r} has no word to look for (only stop words)")

        def run() -> Forgotten:
            with transaction(self._writer):
                ids = forget_rows.matching(self._writer, terms, limit=MAX_FORGET + 1)
                if len(ids) > MAX_FORGET:
                    raise InvalidInputError(
                        f"more than {MAX_FORGET} fragments have every word of {words!r}:"
                        " name more words, or fragment ids"
                    )
                hits = fetch_hits(self._writer, ids)
                texts = forget_rows.canonical_of(self._writer, ids)
                kept = {
                    h.fragment_id for h in hits if _denies(texts.get(h.fragment_id, h.text), terms)
                }
                named = tuple(h for h in hits if h.fragment_id not in kept)
                spared = tuple(h for h in hits if h.fragment_id in kept)
                if preview:
                    return Forgotten(None, named, (), spared)
                return replace(self._forget(named, words, conversation, ()), kept=spared)

        with self._write_lock:
            return retry_busy(run)

    def _forget(
        self,
        hits: Sequence[Hit],
        request: str,
        conversation: str | None,
        missing: tuple[int, ...],
    ) -> Forgotten:
        if not hits:
            return Forgotten(None, (), missing)
        logs = forget_rows.log_ids_of(self._writer, [h.fragment_id for h in hits])
        row = forget_rows.forget(
            self._writer,
            list(logs.values()),
            request=request,
            conversation_id=conversation,
            now=self._clock(),
        )
        return Forgotten(row, tuple(hits), missing)

    def unforget(self, forget_id: int | None = None) -> ForgetRow | None:
        """Undo the forget ``forget_id`` (the newest one in force when None); its record,
        now undone, or None when there is no such forget in force."""

        def run() -> ForgetRow | None:
            with transaction(self._writer):
                wanted = forget_id
                if wanted is None:
                    newest = forget_rows.in_force(self._writer)
                    if newest is None:
                        return None
                    wanted = newest.id
                return forget_rows.undo(self._writer, wanted, now=self._clock())

        with self._write_lock:
            return retry_busy(run)

    def forgets(self, *, limit: int = 100) -> list[ForgetRow]:
        """The newest ``limit`` forgets, newest first (undone ones included)."""
        with self._write_lock:
            return forget_rows.forgets(self._writer, limit=limit)

    def switch_memory(self, conversation: str, *, on: bool) -> bool:
        """Switch memory on or off for ``conversation``; whether that changed anything."""

        def run() -> bool:
            with transaction(self._writer):
                return switches.set_off(self._writer, conversation, not on, now=self._clock())

        with self._write_lock:
            return retry_busy(run)

    def memory_off(self) -> set[str]:
        """The conversations whose memory is switched off."""
        with self._write_lock:
            return switches.off(self._writer)


def _denies(text: str, terms: Sequence[str]) -> bool:
    """Whether ``text`` mentions one of ``terms`` only where it denies it (see the module
    docstring); a term it cannot place counts as asserted."""
    spans = denied_spans(text)
    if not spans:
        return False
    words = [(stem(fold(m[0])), m.span()) for m in WORD.finditer(text)]
    for term in terms:
        wanted = stem(fold(term))
        places = [span for key, span in words if key == wanted]
        if places and all(any(a <= s and e <= b for a, b in spans) for s, e in places):
            return True
    return False



