"""The formed memory as a graph, kept up to date incrementally (DESIGN.md §7).

Nodes: fragments, contexts, entities, sessions (a conversation's day) and words (content
words used by two or more fragments). Edges, each carrying the id of the SQLite row it
comes from: mentions (fragment → entity), context memberships (fragment → context, with
the membership weight), relations (subject → object entity, with their confidence and
their source fragment), fragment links (next, answers, corrects, depends_on), session
membership (fragment → session) and word use (fragment → word).

:class:`MemoryGraphIndex` reads only what formation added since its last refresh (row-id
cursors per table) and appends it to the graph holder's delta, so keeping the graph
current costs what a formation pass wrote, not the size of memory. The holder merges the
delta into a new CSR base once it passes ``max_delta_edges``.

Invariants:

- Every refresh reads inside one read transaction, so a refresh sees whole formation
  passes: an edge never points to a node the same refresh has not created.
- A graph refreshed after every pass equals one built in a single refresh from the
  finished store, up to the numbering of its nodes (same nodes by what they stand for,
  same edges, same activations): word nodes are created when a second fragment uses the
  word, word edges have unit weight (BM25 already weighs words by rarity in the final
  score; measured on LoCoMo, unit weights gave recall@10 0.704 against 0.684 with idf),
  and relation edges weigh their confidence, not their later status.
- Words used by more than 5% of the fragments keep their edges but are *closed* for the
  version (:attr:`MemoryGraph.closed_words`, recomputed at each publication): the pulse
  sends nothing into them and they are never a focus, which is what dropping their
  edges would do, without ever removing an edge from an append-only graph.
- A :class:`MemoryGraph` is an immutable snapshot: its arrays are views of the first
  ``n`` entries of append-only buffers, and the lookup dictionaries it shares with later
  snapshots only gain keys; lookups therefore check ``node < graph.n_nodes``.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from ..dream.config import DreamConfig
from ..dream.weights import relation_weight
from ..errors import StorageError
from ..graph import DEFAULT_MAX_DELTA_EDGES, EdgeList, EdgeType, GraphVersion, NodeKind
from ..graph.csr import isin_sorted
from ..log.messages import stored_timestamp
from ..storage import Connection, read_snapshot
from ..storage.tables import contexts, entities, fragments, relations
from ..storage.tables import dream as dream_rows
from ..storage.tables import history as history_rows
from ..text.acts import tells
from ..text.names import NameIndex
from ..text.words import content_stems, normalise_name
from .buffer import AppendBuffer
from .holder import GraphHolder
from .lexical import LexicalIndex, LexicalView
from .nearest import PREFIX_WORDS, WORDS, codes, prefixes
from .words import NO_WORDS, WordIndex, Words

__all__ = ["ACTS", "MemoryGraph", "MemoryGraphIndex", "NodeKey"]

ACTS = fragments.KINDS
"""What a fragment does (``fragments.kind``), by :attr:`MemoryGraph.acts` index."""

NodeKey = tuple[str, object]
"""What a node stands for: ``("fragment", id)``, ``("entity", id)``, ``("context", id)``,
``("session", (conversation, day))`` or ``("word", stem)``; ``day`` counts days since
the epoch, None for fragments whose stored time is unknown (see
:func:`~memory_core.log.messages.stored_timestamp`): they share one session per conversation."""

_MAX_WORD_SHARE = 0.05
_DERIVED_ACTS = frozenset({"asked", "restated"})
"""What a stored question and an answer that restated memory do: neither tells memory
anything, so neither adds an edge to a word or an entity, counts as a use of a word, or
counts towards the share that closes one. Asking about the kayak eight times made "kayak"
a word 5 % of memory used (closed: never a focus) and spread the pulse from the asker's
name over the askings; Spanish conv-30 asked twice over lost 0.025 of recall@10 so."""
_DAY = 86_400
_LENT_WORDS = 64
"""The most words a turn lends the next one's BM25 document (its first distinct ones: a
pasted megabyte must not make the reply match every question, nor be kept)."""
_CONVERSATIONS_KEPT = 4096
"""Conversations whose last turn is kept for the next turn's BM25 document (a proxy may
see a new conversation every request; 4,096 last turns are a few MB)."""
_Row = TypeVar("_Row", bound=tuple[Any, ...])
_LINKS = {
    "next": EdgeType.NEXT,
    "answers": EdgeType.ANSWERS,
    "corrects": EdgeType.CORRECTS,
    "depends_on": EdgeType.DEPENDS_ON,
}


@dataclass(frozen=True)
class MemoryGraph:
    """One published graph version with the maps between its nodes and SQLite rows."""

    graph: GraphVersion
    fragment_of: npt.NDArray[np.int64]  # node -> fragment id, -1 for other kinds
    vectors: npt.NDArray[np.float32]  # one row per embedded fragment
    vector_nodes: npt.NDArray[np.int64]  # row of ``vectors`` -> fragment node
    vector_codes: npt.NDArray[np.uint64]  # row of ``vectors`` -> its SimHash code (.nearest)
    vector_prefixes: npt.NDArray[np.uint64]  # the codes' first-pass words (.nearest.prefixes)
    vector_of: npt.NDArray[np.int64]  # node -> row of ``vectors``, -1 without one
    node_keys: Sequence[NodeKey]  # node -> what it stands for (shared, append-only)
    fragment_nodes: Mapping[int, int]  # the dictionaries are shared and only gain keys
    entity_nodes: Mapping[int, int]
    term_nodes: Mapping[str, int]
    term_df: Mapping[str, int]
    aliases: Mapping[str, Sequence[int]]  # normalised alias -> entity nodes
    names: NameIndex
    fragments: int  # fragment nodes in this version
    closed_words: npt.NDArray[np.int64]  # sorted word nodes used by too many fragments
    lexical: LexicalView  # BM25 over this version's fragments (.lexical)
    generation: int = 0  # memory's generation read (.storage.history: cycles, rollbacks)
    acts: npt.NDArray[np.int8] | None = None
    """node -> what the fragment does, an index into :data:`ACTS` (0, ``stated``, for
    every other node); None: every fragment states."""
    words: Words = NO_WORDS
    """The words memory uses with their vectors (:mod:`.words`: the word bridge's)."""
    speakers: npt.NDArray[np.int32] | None = None
    """node -> the code of the fragment's speaker in :attr:`speaker_codes` (0: none, and
    every other node); None: no fragment has a speaker."""
    speaker_codes: Mapping[str, int] = field(default_factory=dict)
    """normalised speaker name (:func:`~memory_core.text.words.normalise_name`) -> its
    code (from 1; shared, only gains keys)"""
    addressed: Mapping[str, Mapping[int, str]] = field(default_factory=dict)
    """Normalised name -> {entity node: speaker name} of the speakers the other speaker
    addresses by that name (``vocative`` aliases: :mod:`memory_core.formation.stages
    .addressing`); they are in :attr:`aliases` too."""
    untold: npt.NDArray[np.bool_] | None = None
    """node -> whether the fragment is stored as stating (``stated``) but no sentence of it
    tells anything (:func:`~memory_core.text.acts.tells`: it asks, greets or thanks
    only, "Cool! What did it look like?"); False for every other node. None: none is."""

    def speaker_of(self, nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.int32]:
        """The speaker codes of the fragments of ``nodes`` (0: none)."""
        if self.speakers is None:
            return np.zeros(nodes.shape[0], np.int32)
        return self.speakers[nodes]

    def untold_of(self, nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Whether the fragments of ``nodes`` (nodes of this version) tell nothing (see
        :attr:`untold`)."""
        if self.untold is None:
            return np.zeros(nodes.shape[0], np.bool_)
        return self.untold[nodes]

    def act_of(self, nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.int8]:
        """What the fragments of ``nodes`` (nodes of this version) do, as :data:`ACTS`
        indices."""
        if self.acts is None:
            return np.zeros(nodes.shape[0], np.int8)
        return self.acts[nodes]

    @functools.cached_property
    def stated_vectors(self) -> npt.NDArray[np.bool_]:
        """Per row of :attr:`vectors`: whether its fragment states something (none of
        :data:`_DERIVED_ACTS`: a stored question, or an answer that restated memory, a
        near copy of its source by vector): the rows the dense pool is drawn from unless
        ``retrieval.scoring.pool_questions``. Worked out once per version."""
        stated: npt.NDArray[np.bool_] = ~np.isin(
            self.act_of(self.vector_nodes), [ACTS.index(act) for act in _DERIVED_ACTS]
        )
        return stated

    @property
    def version(self) -> int:
        return self.graph.version

    def is_focus_word(self, term: str) -> bool:
        """A word known to this version and not closed (see :attr:`closed_words`)."""
        node = self.term_nodes.get(term)
        if node is None or not self.has(node):
            return False
        return not bool(isin_sorted(np.array([node], np.int64), self.closed_words)[0])

    def has(self, node: int) -> bool:
        """Whether ``node`` exists in this version (the shared maps may be ahead of it)."""
        return 0 <= node < self.graph.n_nodes


class MemoryGraphIndex:
    """Maintains the memory graph of one store; see the module docstring.

    ``refresh`` is serialised by a lock (formation calls it after each pass, a first query
    may call it from the reader); ``current`` is one reference read and never blocks.
    """

    def __init__(
        self,
        *,
        max_delta_edges: int = DEFAULT_MAX_DELTA_EDGES,
        dim: int = 384,
        dream: DreamConfig | None = None,
        lexical_context: bool = True,
    ) -> None:
        self._max_delta = max_delta_edges
        self._lexical_context = lexical_context
        self._dim = dim
        self._dream = dream or DreamConfig()
        self._lock = threading.Lock()
        self._holder: GraphHolder | None = None
        self._snapshot: MemoryGraph | None = None
        self._reset()

    def _reset(self) -> None:
        """Forget everything read; the next refresh reads the whole store again."""
        self._full = True
        self._cursors = dict.fromkeys(
            (
                "fragments",
                "contexts",
                "entities",
                "fragment_contexts",
                "mentions",
                "relations",
                "fragment_links",
                "aliases",
                "context_links",
            ),
            0,
        )
        self._fragment_of = AppendBuffer(np.int64)
        self._acts = AppendBuffer(np.int8)
        self._untold = AppendBuffer(np.bool_)
        self._speakers = AppendBuffer(np.int32)
        self._said_before: OrderedDict[str, list[str]] = OrderedDict()
        self._voice_said: OrderedDict[tuple[str, str, object], list[str]] = OrderedDict()
        self._speaker_codes: dict[str, int] = {}
        self._vectors = AppendBuffer(np.float32, self._dim)
        self._vector_nodes = AppendBuffer(np.int64)
        self._vector_codes = AppendBuffer(np.uint64, WORDS)
        self._vector_prefixes = AppendBuffer(np.uint64, PREFIX_WORDS)
        self._vector_of = AppendBuffer(np.int64)
        self._node_keys: list[NodeKey] = []
        self._fragment_nodes: dict[int, int] = {}
        self._entity_nodes: dict[int, int] = {}
        self._context_nodes: dict[int, int] = {}
        self._session_nodes: dict[tuple[str, int | None], int] = {}
        self._term_nodes: dict[str, int] = {}
        self._term_df: dict[str, int] = {}
        self._first_user: dict[str, tuple[int, int]] = {}  # word used once: (node, id)
        self._aliases: dict[str, list[int]] = {}
        self._addressed: dict[str, dict[int, str]] = {}
        self._names = NameIndex()
        self._fragments = 0
        self._stated = 0
        self._lexical = LexicalIndex()
        self._word_index = WordIndex(self._dim)
        self._generation = -1

    @property
    def started(self) -> bool:
        """Whether the graph has been read at least once (then formation keeps it current)."""
        return self._snapshot is not None

    def current(self) -> MemoryGraph | None:
        """The latest published snapshot (None before the first refresh)."""
        return self._snapshot

    def refresh(
        self, conn: Connection, *, publishing: AbstractContextManager[object] | None = None
    ) -> MemoryGraph:
        """Read what was formed since the last refresh and publish it as a new version.

        When memory's generation moved since the last read (a consolidation cycle or a
        rollback rewrote rows rather than adding them), the whole store is read again.
        ``publishing``, when given, is entered around the publication only (the store
        makes it the moment its readers move to the new state).
        """
        with self._lock:
            try:
                # one read transaction: whole formation passes only
                with read_snapshot(conn, "cannot read the memory graph"):
                    generation = history_rows.state(conn).generation
                    if generation != self._generation:
                        self._reset()
                    batch = self._read(conn)
                with publishing or contextlib.nullcontext():
                    return self._publish(batch, generation)
            except BaseException:
                self._reset()  # the maps may be ahead of the graph: start again next time
                raise

    def reload(
        self, conn: Connection, *, publishing: AbstractContextManager[object] | None = None
    ) -> MemoryGraph:
        """Read the whole store again and publish it as a new version (after a rollback or
        anything else that changed rows instead of adding them)."""
        with self._lock:
            self._reset()
        return self.refresh(conn, publishing=publishing)

    def _read(self, conn: Connection) -> _Batch:
        batch = _Batch(first_node=len(self._node_keys))
        self._read_nodes(conn, batch)
        self._read_edges(conn, batch)
        for _, eid, alias, source, name in self._rows(conn, "aliases", entities.aliases_since):
            key, node = normalise_name(alias), self._node("entity", self._entity_nodes, eid)
            self._aliases.setdefault(key, []).append(node)
            if source == entities.VOCATIVE:
                self._addressed.setdefault(key, {})[node] = str(name)
            batch.names.append(alias)
        batch.words = self._word_index.read(conn)
        return batch

    def _document(
        self,
        tokens: fragments.Tokenizer,
        conversation: str,
        voice: tuple[str, object],
        speaker: object,
        text: object,
    ) -> list[str]:
        """A fragment's BM25 document: its FTS5 columns' tokens and, with
        ``lexical_context``, each word it lacks of the turn said just before it in its
        conversation and of the previous turn of its own voice (``voice``: its speaker's
        name, else its role), once. The turn before is what it answers ("Is this your own
        painting of the lake?" lends "painting" and "lake" to "Yes, I made it last
        summer"); its voice's previous turn is what it goes on telling ("Yesterday I took
        the kids to the museum." / "What did they like?" / "They were stoked for the
        dinosaur exhibit!": the kids and the museum are the third turn's too). LoCoMo dev
        recall@10: 0.771 with neither, 0.779 with the turn before, 0.804 with both; a
        third turn back, or the turns after, lowered it (0.790, 0.785).

        Fragments are read in log order, so the turns read last are the ones said
        before; only the :data:`_CONVERSATIONS_KEPT` latest conversations (and as many
        voices) are remembered (a turn of an older one lends nothing), and a turn lends
        at most :data:`_LENT_WORDS` words."""
        who, words = fragments.document_columns(tokens, speaker, text)
        own = [*who, *words]
        if not self._lexical_context:
            return own
        said = list(itertools.islice(dict.fromkeys(words), _LENT_WORDS))
        before = _remember(self._said_before, conversation, said)
        told = _remember(self._voice_said, (conversation, *voice), said)
        have = set(own)
        return [*own, *dict.fromkeys(t for t in (*before, *told) if t not in have)]

    def _read_nodes(self, conn: Connection, batch: _Batch) -> None:
        tokens = fragments.fts_tokenizer(conn)
        for fid, text, conversation, ts, vector, speaker, act, role in self._rows(
            conn, "fragments", fragments.nodes_since
        ):
            voice = ("speaker", normalise_name(str(speaker))) if speaker else ("role", role)
            document = self._document(tokens, str(conversation), voice, speaker, text)
            self._lexical.add(fid, document)
            node = batch.add(self._node_keys, NodeKind.FRAGMENT, ("fragment", fid))
            self._fragment_nodes[fid] = node
            batch.fragment_of.append((node, fid))
            if act != ACTS[0]:
                batch.acts.append((node, ACTS.index(act) if act in ACTS else 0))
            elif not tells(str(text)):
                batch.untold.append(node)
            who = normalise_name(str(speaker)) if speaker else ""
            if who:
                code = self._speaker_codes.get(who)
                if code is None:
                    code = self._speaker_codes[who] = len(self._speaker_codes) + 1
                    batch.speaker_names.append(str(speaker))
                batch.speakers.append((node, code))
            if vector and len(vector) == 4 * self._dim:
                batch.vectors.append(np.frombuffer(vector, dtype="<f4"))
                batch.vector_nodes.append(node)
            seconds = stored_timestamp(ts)
            day = (str(conversation), None if seconds is None else int(seconds // _DAY))
            session = self._session_nodes.get(day)
            if session is None:
                session = self._session_nodes[day] = batch.add(
                    self._node_keys, NodeKind.SESSION, ("session", day)
                )
            batch.edge(node, session, 1.0, fid, EdgeType.IN_SESSION)
            if act not in _DERIVED_ACTS:
                self._stated += 1
                self._words(batch, node, fid, str(text))
        for (cid,) in self._rows(conn, "contexts", contexts.context_ids_since):
            self._context_nodes[cid] = batch.add(
                self._node_keys, NodeKind.CONTEXT, ("context", cid)
            )
        for (eid,) in self._rows(conn, "entities", entities.entity_ids_since):
            self._entity_nodes[eid] = batch.add(self._node_keys, NodeKind.ENTITY, ("entity", eid))

    def _read_edges(self, conn: Connection, batch: _Batch) -> None:
        fragment, entity, context = self._fragment_nodes, self._entity_nodes, self._context_nodes
        dream = dream_rows.state(conn)
        cycle, seen = int(dream["cycle"]), int(dream["relations"])
        for rowid, fid, cid, weight in self._rows(
            conn, "fragment_contexts", contexts.memberships_since
        ):
            batch.edge(
                self._node("fragment", fragment, fid),
                self._node("context", context, cid),
                float(weight),
                rowid,
                EdgeType.IN_CONTEXT,
            )
        for mid, fid, eid, act in self._rows(conn, "mentions", entities.mentions_since):
            if act in _DERIVED_ACTS:
                continue
            batch.edge(
                self._node("fragment", fragment, fid),
                self._node("entity", entity, eid),
                1.0,
                mid,
                EdgeType.MENTIONS,
            )
        for rid, subject, obj, fid, confidence, predicate, strength, last in self._rows(
            conn, "relations", relations.edges_since
        ):
            if obj is None or obj == subject:  # a value (reconstruction reads it), or a
                continue  # claim about itself (two names merged into one entity)
            weight = relation_weight(
                predicate,
                float(confidence),
                strength,
                last,
                fresh=rid > seen,
                cycle=cycle,
                config=self._dream,
            )
            batch.edge(
                self._node("entity", entity, subject),
                self._node("entity", entity, obj),
                weight,
                rid,
                EdgeType.RELATION,
                self._node("fragment", fragment, fid),
            )
        for lid, a, b, similarity in self._rows(conn, "context_links", contexts.links_since):
            batch.edge(
                self._node("context", context, a),
                self._node("context", context, b),
                float(similarity),
                lid,
                EdgeType.RELATED_CONTEXT,
            )
        for lid, src, dst, kind in self._rows(conn, "fragment_links", fragments.links_since):
            batch.edge(
                self._node("fragment", fragment, src),
                self._node("fragment", fragment, dst),
                1.0,
                lid,
                _LINKS[kind],
            )

    def _rows(
        self, conn: Connection, table: str, read: Callable[[Connection, int], list[_Row]]
    ) -> list[_Row]:
        """Rows of ``table`` past its cursor (first column: the row id); moves the cursor."""
        rows = read(conn, self._cursors[table])
        if rows:
            self._cursors[table] = int(rows[-1][0])
        return rows

    def _words(self, batch: _Batch, node: int, fid: int, text: str) -> None:
        for term in sorted(content_stems(text)):
            df = self._term_df[term] = self._term_df.get(term, 0) + 1
            if df == 1:
                self._first_user[term] = (node, fid)
                continue
            word = self._term_nodes.get(term)
            if word is None:
                word = self._term_nodes[term] = batch.add(
                    self._node_keys, NodeKind.CONCEPT, ("word", term)
                )
                first, first_id = self._first_user.pop(term)
                batch.edge(first, word, 1.0, first_id, EdgeType.USES_TERM)
            batch.edge(node, word, 1.0, fid, EdgeType.USES_TERM)

    @staticmethod
    def _node(kind: str, nodes: Mapping[Any, int], row_id: object) -> int:
        node = nodes.get(row_id)
        if node is None:
            raise StorageError(f"memory graph: {kind} {row_id} is referenced before it exists")
        return int(node)

    def _publish(self, batch: _Batch, generation: int) -> MemoryGraph:
        new_kinds = np.asarray(batch.kinds, np.int8)
        edges = batch.edges()
        fragment_of = np.full(new_kinds.shape[0], -1, np.int64)
        for node, fid in batch.fragment_of:
            fragment_of[node - batch.first_node] = fid
        self._fragment_of.extend(fragment_of)
        acts = np.zeros(new_kinds.shape[0], np.int8)
        for node, act in batch.acts:
            acts[node - batch.first_node] = act
        self._acts.extend(acts)
        untold = np.zeros(new_kinds.shape[0], np.bool_)
        untold[np.asarray(batch.untold, np.int64) - batch.first_node] = True
        self._untold.extend(untold)
        speakers = np.zeros(new_kinds.shape[0], np.int32)
        for node, code in batch.speakers:
            speakers[node - batch.first_node] = code
        self._speakers.extend(speakers)
        vector_of = np.full(new_kinds.shape[0], -1, np.int64)
        if batch.vectors:
            added = np.stack(batch.vectors)
            rows = self._vectors.size + np.arange(added.shape[0], dtype=np.int64)
            vector_of[np.asarray(batch.vector_nodes, np.int64) - batch.first_node] = rows
            self._vectors.extend(added)
            self._vector_nodes.extend(batch.vector_nodes)
            added_codes = codes(added)
            self._vector_codes.extend(added_codes)
            self._vector_prefixes.extend(prefixes(added_codes))
        self._vector_of.extend(vector_of)
        self._names.add(batch.names)
        self._names.add(batch.speaker_names, speakers=True)
        self._fragments += len(batch.fragment_of)
        if self._holder is None:
            self._holder = GraphHolder(
                GraphVersion.build(new_kinds, edges), max_delta_edges=self._max_delta
            )
            graph = self._holder.current()
        elif self._full:
            graph = self._holder.replace(new_kinds, edges)
        elif new_kinds.shape[0] or len(edges):
            graph = self._holder.append(edges, new_kinds)
        else:
            graph = self._holder.current()
        self._full = False
        self._generation = generation
        cap = max(2, math.floor(_MAX_WORD_SHARE * self._stated))
        closed = sorted(n for t, n in self._term_nodes.items() if self._term_df[t] > cap)
        self._snapshot = MemoryGraph(
            graph,
            self._fragment_of.view(),
            self._vectors.view(),
            self._vector_nodes.view(),
            self._vector_codes.view(),
            self._vector_prefixes.view(),
            self._vector_of.view(),
            self._node_keys,
            self._fragment_nodes,
            self._entity_nodes,
            self._term_nodes,
            self._term_df,
            self._aliases,
            self._names,
            self._fragments,
            np.asarray(closed, np.int64),
            self._lexical.view(),
            generation,
            self._acts.view(),
            self._word_index.publish(batch.words),
            self._speakers.view(),
            self._speaker_codes,
            self._addressed,
            self._untold.view(),
        )
        return self._snapshot


class _Batch:
    """Nodes and edges read by one refresh, before they are published."""

    def __init__(self, first_node: int) -> None:
        self.first_node = first_node
        self.kinds: list[int] = []
        self.fragment_of: list[tuple[int, int]] = []
        self.acts: list[tuple[int, int]] = []  # (node, ACTS index) of fragments that do not state
        self.untold: list[int] = []  # nodes of stated fragments that tell nothing (acts.tells)
        self.speakers: list[tuple[int, int]] = []  # (node, speaker code) of fragments with one
        self.vectors: list[npt.NDArray[np.float32]] = []
        self.vector_nodes: list[int] = []
        self.names: list[str] = []
        self.speaker_names: list[str] = []  # speakers first seen in this batch, as labelled
        self.words: list[tuple[str, str, npt.NDArray[np.float32]]] = []
        self._columns: list[list[float]] = [[] for _ in range(6)]

    def add(self, keys: list[NodeKey], kind: NodeKind, key: NodeKey) -> int:
        keys.append(key)
        self.kinds.append(int(kind))
        return len(keys) - 1

    def edge(
        self, src: int, dst: int, weight: float, edge_id: int, etype: EdgeType, source: int = -1
    ) -> None:
        for column, value in zip(
            self._columns, (src, dst, weight, edge_id, int(etype), source), strict=True
        ):
            column.append(value)

    def edges(self) -> EdgeList:
        src, dst, weight, edge_id, etype, source = self._columns
        return EdgeList.from_arrays(
            np.asarray(src, np.int64),
            np.asarray(dst, np.int64),
            weight=np.asarray(weight, np.float32),
            edge_id=np.asarray(edge_id, np.int64),
            edge_type=np.asarray(etype, np.int16),
            source=np.asarray(source, np.int64),
        )


_K = TypeVar("_K")


def _remember(said: OrderedDict[_K, list[str]], key: _K, words: list[str]) -> list[str]:
    """What ``said`` held for ``key`` (nothing when unknown), now ``words``, ``key`` made
    the latest; the oldest key is dropped past :data:`_CONVERSATIONS_KEPT`."""
    before = said.pop(key, [])
    said[key] = words
    if len(said) > _CONVERSATIONS_KEPT:
        said.popitem(last=False)
    return before
