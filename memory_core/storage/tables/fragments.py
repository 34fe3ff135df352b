"""Fragments: their rows, FTS5 index and vectors, the links between them, BM25 search.

A fragment is written with its FTS5 row (the index is external content: ``fragments_fts``
holds ``speaker`` and ``canonical`` keyed by the fragment id) and its vector in one call,
so the three never disagree. ``superseded`` follows the log's branches (see
:mod:`memory_core.log.messages`); search ranks superseded fragments too and drops them after the
ranking, so a branch switch never touches the index. Forgotten fragments (those of the
messages a forget in force names, :mod:`.forgets`) are dropped the same way, by every
read that retrieval makes here.

Reads are defensive (see :mod:`.values`): a :class:`Hit`'s time is None when the stored
one is not a sane timestamp, its text columns read as text whatever they hold.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

import apsw

from ..db import JSON_IN, Connection, json_array, reading
from ..values import stored_text, stored_timestamp
from .forgets import FORGOTTEN_LOGS

T = TypeVar("T")

__all__ = [
    "KINDS",
    "RESTATES",
    "FragmentLabel",
    "FragmentNodeRow",
    "Hit",
    "LinkRow",
    "describe",
    "document_columns",
    "document_tokens",
    "documents_using",
    "fetch_hits",
    "formed_after",
    "fts_tokenizer",
    "head",
    "hidden_ids",
    "insert",
    "insert_link_once",
    "insert_links",
    "kind_counts",
    "kinds_of",
    "links_since",
    "live_among",
    "nodes_since",
    "restated_sources",
    "search",
    "set_superseded",
    "speaker_of",
    "turn_before",
]

FragmentNodeRow = tuple[int, str, str, object, bytes | None, str | None, str, str]
"""``(id, canonical, conversation_id, ts as stored, vector blob or None, speaker, kind,
role)``:
what the memory graph reads of a fragment (plain tuples: the graph reads every row of a
store). ``speaker`` and ``canonical`` are the two columns of the fragment's FTS5 row."""
Tokenizer = Callable[[str, bool], list[str]]
"""``(text, query) -> tokens`` as ``fragments_fts`` indexes ``text`` (``query``: as it
reads a query phrase)."""
LinkRow = tuple[int, int, int, str]
"""``(id, src, dst, kind)`` of a ``fragment_links`` row."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieved fragment with its provenance and its BM25 score (higher is better).

    ``ts`` is None when the stored time is unknown (not a sane timestamp)."""

    fragment_id: int
    score: float
    text: str
    role: str
    speaker: str | None
    conversation_id: str
    ts: float | None
    log_hash: str
    ext_id: str | None
    kind: str = "stated"
    """What the fragment does: ``stated`` (tells something), ``asked`` (a question) or
    ``restated`` (an answer that restates the memory it was shown)."""
    conversation_label: str | None = None
    """What the block calls the conversation (:mod:`memory_core.text.conversations`),
    when the lookup read it; None: its id, unless that is only an identifier."""


KINDS = ("stated", "asked", "restated")
"""What a fragment does (``fragments.kind``), see :class:`Hit`."""


@dataclass(frozen=True, slots=True)
class FragmentLabel:
    """What names a fragment for a person: its conversation, speaker and text."""

    conversation_id: str
    speaker: str | None
    text: str


@dataclass(frozen=True, slots=True)
class _Ranked:
    hit: Hit
    hidden: bool
    """Superseded or forgotten: ranked, then dropped."""


def _hit(fragment_id: int, score: float, row: Sequence[object]) -> Hit:
    """A hit from ``(text, role, speaker, conversation, ts, hash, ext_id, kind)`` as
    stored."""
    text, role, speaker, conversation, ts, log_hash, ext_id, kind = row
    return Hit(
        fragment_id,
        score,
        stored_text(text),
        stored_text(role),
        None if speaker is None else stored_text(speaker),
        stored_text(conversation),
        stored_timestamp(ts),
        stored_text(log_hash),
        None if ext_id is None else stored_text(ext_id),
        stored_text(kind),
    )


def search(
    conn: Connection, terms: Sequence[str], *, limit: int, exclude_hashes: Collection[str] = ()
) -> list[Hit]:
    """The ``limit`` best live fragments matching any of ``terms`` by BM25, fragments of
    the log rows ``exclude_hashes`` left out. Each term is quoted, so no text is ever
    read as FTS5 query syntax; a request may exclude any number of rows."""
    if not terms or limit <= 0:
        return []
    match, excluded = _match(terms), set(exclude_hashes)

    def kept(fetch: int) -> tuple[int, list[Hit]]:
        rows = _ranked(conn, match, fetch)
        return len(rows), [r.hit for r in rows if not r.hidden and r.hit.log_hash not in excluded]

    return _widening(kept, limit, 2 * (limit + len(excluded)) + 8)


def search_scores(conn: Connection, terms: Sequence[str], *, limit: int) -> list[tuple[int, float]]:
    """``(fragment id, BM25 score)`` of the ``limit`` best live fragments matching any of
    ``terms``, best first: :func:`search` without reading the fragments' text, for
    rankers that fetch the text of the few they keep (:func:`fetch_hits`)."""
    if not terms or limit <= 0:
        return []
    match = _match(terms)

    def kept(fetch: int) -> tuple[int, list[tuple[int, float]]]:
        with reading("search failed"):
            rows = conn.execute(
                "WITH top AS (SELECT rowid AS id, bm25(fragments_fts) AS rank FROM fragments_fts"
                " WHERE fragments_fts MATCH ? ORDER BY rank LIMIT ?)"
                f" SELECT top.id, -top.rank, f.superseded OR f.log_id IN {FORGOTTEN_LOGS}"
                " FROM top JOIN fragments f"
                " ON f.id = top.id ORDER BY top.rank",
                (match, fetch),
            ).fetchall()
        return len(rows), [(cast(int, r[0]), cast(float, r[1])) for r in rows if not r[2]]

    return _widening(kept, limit, 2 * limit + 8)


def _match(terms: Sequence[str]) -> str:
    """An FTS5 query matching any of ``terms``, each quoted (never read as query syntax)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def _widening(kept: Callable[[int], tuple[int, list[T]]], limit: int, fetch: int) -> list[T]:
    """The first ``limit`` rows ``kept(fetch)`` keeps of the ``fetch`` best matches,
    fetching four times more while too few are kept and more matches remain."""
    while True:
        fetched, rows = kept(fetch)
        if len(rows) >= limit or fetched < fetch:
            return rows[:limit]
        fetch *= 4


def _ranked(conn: Connection, match: str, fetch: int) -> list[_Ranked]:
    """The ``fetch`` best BM25 matches, hidden ones (superseded, forgotten) included
    (ranked inside FTS5 first, so only those rows are joined: the cost follows ``fetch``,
    not the number of matches)."""
    with reading("search failed"):
        rows = conn.execute(
            "WITH top AS (SELECT rowid AS id, bm25(fragments_fts) AS rank FROM fragments_fts"
            " WHERE fragments_fts MATCH ? ORDER BY rank LIMIT ?)"
            " SELECT f.id, -top.rank, f.text, f.role, f.speaker, f.conversation_id, f.ts,"
            " log.hash, log.ext_id, f.kind,"
            f" f.superseded OR f.log_id IN {FORGOTTEN_LOGS}"
            " FROM top JOIN fragments f ON f.id = top.id JOIN log ON log.id = f.log_id"
            " ORDER BY top.rank",
            (match, fetch),
        )
        return [_Ranked(_hit(row[0], float(row[1]), row[2:10]), bool(row[10])) for row in rows]


def fetch_hits(conn: Connection, fragment_ids: Sequence[int]) -> list[Hit]:
    """Live fragments by id, in the given order (score: 1/rank), superseded ones left out."""
    if not fragment_ids:
        return []
    with reading("cannot read fragments"):
        rows = {
            row[0]: row[1:]
            for row in conn.execute(
                "SELECT f.id, f.text, f.role, f.speaker, f.conversation_id, f.ts, log.hash,"
                " log.ext_id, f.kind FROM fragments f JOIN log ON log.id = f.log_id"
                f" WHERE f.superseded = 0 AND f.id {JSON_IN}"
                f" AND f.log_id NOT IN {FORGOTTEN_LOGS}",
                (json_array(fragment_ids),),
            )
        }
    return [
        _hit(fid, 1.0 / rank, rows[fid])
        for rank, fid in enumerate(fragment_ids, start=1)
        if fid in rows
    ]


def describe(conn: Connection, fragment_id: int) -> FragmentLabel | None:
    """The conversation, speaker and text of a fragment, or None when there is none. A
    forgotten fragment's text reads ``(forgotten)``: what describes a graph node (an
    area, a diff, a judge's prompt) never shows it."""
    with reading("cannot read fragments"):
        row = conn.execute(
            "SELECT conversation_id, speaker,"
            f" CASE WHEN log_id IN {FORGOTTEN_LOGS} THEN '(forgotten)' ELSE text END"
            " FROM fragments WHERE id = ?",
            (fragment_id,),
        ).fetchone()
    return None if row is None else FragmentLabel(*row)


def speaker_of(conn: Connection, fragment_id: int) -> str | None:
    """The named speaker of a fragment (None: unnamed, or no such fragment)."""
    row = conn.execute("SELECT speaker FROM fragments WHERE id = ?", (fragment_id,)).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def turn_before(conn: Connection, fragment_id: int) -> int | None:
    """The fragment the conversation said just before ``fragment_id`` (its ``next``
    link), or None."""
    row = conn.execute(
        "SELECT dst FROM fragment_links WHERE src = ? AND kind = 'next' LIMIT 1", (fragment_id,)
    ).fetchone()
    return None if row is None else int(row[0])


def head(conn: Connection, fragment_id: int, chars: int) -> tuple[str, str] | None:
    """``(role, first chars of the canonical text)`` of a fragment, or None."""
    row = conn.execute(
        "SELECT role, substr(canonical, 1, ?) FROM fragments WHERE id = ?", (chars, fragment_id)
    ).fetchone()
    return None if row is None else (row[0], row[1])


def insert(
    conn: Connection,
    *,
    log_id: int,
    conversation_id: str,
    role: str,
    speaker: str | None,
    text: str,
    lang: str,
    canonical: str,
    translated: bool,
    ts: float,
    superseded: bool,
    created_at: float,
    normaliser: str,
    model: str,
    vector: bytes,
    kind: str = "stated",
) -> int:
    """Store a fragment with its FTS5 row and its vector (``model`` made it); its id."""
    conn.execute(
        "INSERT INTO fragments (log_id, conversation_id, role, speaker, text, lang, canonical,"
        " translated, ts, superseded, created_at, normaliser, kind)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            log_id,
            conversation_id,
            role,
            speaker,
            text,
            lang,
            canonical,
            int(translated),
            ts,
            int(superseded),
            created_at,
            normaliser,
            kind,
        ),
    )
    fragment_id = int(conn.last_insert_rowid())
    conn.execute(
        "INSERT INTO fragments_fts (rowid, speaker, canonical) VALUES (?, ?, ?)",
        (fragment_id, speaker, canonical),
    )
    conn.execute(
        "INSERT INTO fragment_vectors (fragment_id, model, vector) VALUES (?, ?, ?)",
        (fragment_id, model, vector),
    )
    return fragment_id


RESTATES = "restates"
"""The interpretation prefix of the ``depends_on`` links from a restating answer to the
fragments it was shown (``restates@1``)."""


def kind_counts(conn: Connection, conversation_prefix: str = "") -> dict[str, int]:
    """How many fragments of each kind the conversations whose id starts with
    ``conversation_prefix`` hold (a scan: for evaluations and checks, not per request)."""
    escaped = conversation_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    with reading("cannot read fragments"):
        rows = conn.execute(
            "SELECT kind, count(*) FROM fragments WHERE conversation_id LIKE ? ESCAPE '\\'"
            " GROUP BY kind",
            (escaped + "%",),
        ).fetchall()
    return {str(kind): cast(int, n) for kind, n in rows}


def kinds_of(conn: Connection, fragment_ids: Sequence[int]) -> dict[int, str]:
    """The kind of each of ``fragment_ids`` that is not ``stated`` (most are)."""
    if not fragment_ids:
        return {}
    with reading("cannot read fragments"):
        rows = conn.execute(
            f"SELECT id, kind FROM fragments WHERE id {JSON_IN} AND kind <> 'stated'",
            (json_array(fragment_ids),),
        ).fetchall()
    return {cast(int, r[0]): str(r[1]) for r in rows}


def live_among(conn: Connection, fragment_ids: Sequence[int]) -> list[int]:
    """Those of ``fragment_ids`` that are stored, live and not forgotten, in order."""
    if not fragment_ids:
        return []
    rows = conn.execute(
        f"SELECT id FROM fragments WHERE id {JSON_IN} AND superseded = 0"
        f" AND log_id NOT IN {FORGOTTEN_LOGS}",
        (json_array(fragment_ids),),
    ).fetchall()
    live = {cast(int, r[0]) for r in rows}
    return [f for f in dict.fromkeys(fragment_ids) if f in live]


def restated_sources(conn: Connection, fragment_ids: Sequence[int]) -> dict[int, list[int]]:
    """The fragments each of ``fragment_ids`` restates, best first (only those that
    restate any)."""
    if not fragment_ids:
        return {}
    found: dict[int, list[int]] = {}
    with reading("cannot read fragment links"):
        rows = conn.execute(
            "SELECT src, dst FROM fragment_links WHERE kind = 'depends_on'"
            f" AND interpretation LIKE '{RESTATES}@%' AND src {JSON_IN} ORDER BY id",
            (json_array(fragment_ids),),
        ).fetchall()
    for src, dst in rows:
        found.setdefault(cast(int, src), []).append(cast(int, dst))
    return found


def insert_links(
    conn: Connection, src: int, dst: int, kinds: Sequence[str], interpretation: str, now: float
) -> None:
    """Links ``src -> dst`` of each kind (next, answers, corrects, depends_on)."""
    conn.executemany(
        "INSERT INTO fragment_links (src, dst, kind, interpretation, created_at)"
        " VALUES (?,?,?,?,?)",
        [(src, dst, kind, interpretation, now) for kind in kinds],
    )


def documents_using(conn: Connection, word: str, *, limit: int) -> int:
    """How many live fragments the full-text index finds ``word`` in (at most ``limit``:
    the caller needs to know only whether memory holds it at all)."""
    if not word.isalnum():
        return 0
    with reading("cannot search fragments"):
        row = conn.execute(
            "SELECT count(*) FROM (SELECT rowid FROM fragments_fts WHERE fragments_fts MATCH ?"
            " LIMIT ?)",
            (f'"{word}"', limit),
        ).fetchone()
    return int(row[0]) if row else 0


def insert_link_once(
    conn: Connection, src: int, dst: int, kind: str, interpretation: str, now: float
) -> None:
    """A link ``src -> dst`` of ``kind`` unless one is already stored."""
    conn.execute(
        "INSERT INTO fragment_links (src, dst, kind, interpretation, created_at)"
        " SELECT ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM fragment_links"
        " WHERE src = ? AND dst = ? AND kind = ?)",
        (src, dst, kind, interpretation, now, src, dst, kind),
    )


def set_superseded(conn: Connection, log_ids: Sequence[int], superseded: bool) -> None:
    """Mark the fragments of the log rows ``log_ids`` superseded (or live again)."""
    conn.execute(
        f"UPDATE fragments SET superseded = {int(superseded)} WHERE log_id {JSON_IN}",
        (json_array(log_ids),),
    )


def nodes_since(conn: Connection, after: int) -> list[FragmentNodeRow]:
    """Fragments with an id above ``after``, in id order (see :data:`FragmentNodeRow`)."""
    return list(
        conn.execute(
            "SELECT f.id, f.canonical, f.conversation_id, f.ts, v.vector, f.speaker, f.kind, f.role"
            " FROM fragments f"
            " LEFT JOIN fragment_vectors v ON v.fragment_id = f.id WHERE f.id > ? ORDER BY f.id",
            (after,),
        )
    )


def fts_tokenizer(conn: Connection) -> Tokenizer:
    """The tokenizer ``fragments_fts`` was created with (``porter unicode61
    remove_diacritics 2``, migration 1), run by SQLite itself through ``conn``: the tokens
    FTS5 indexes and matches, for an index kept outside it (:mod:`memory_core.index.lexical`).
    ``tests/test_lexical.py`` checks that BM25 over these tokens is FTS5's ``bm25()``."""
    with reading("cannot load the FTS5 tokenizer"):
        tokenize = conn.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])

    def tokens(text: str, query: bool) -> list[str]:
        reason = apsw.FTS5_TOKENIZE_QUERY if query else apsw.FTS5_TOKENIZE_DOCUMENT
        with reading("cannot tokenize"):
            found = tokenize(
                text.encode("utf-8", "replace"),
                reason,
                None,
                include_offsets=False,
                include_colocated=False,
            )
        return [str(token) for token in found]  # plain tokens with these flags

    return tokens


def formed_after(conn: Connection, after: int, limit: int) -> list[tuple[int, str, str]]:
    """``(id, speaker, canonical)`` of the first ``limit`` fragments with an id above
    ``after``, in id order: the columns of their FTS5 rows."""
    with reading("cannot read fragments"):
        return [
            (int(row[0]), stored_text(row[1]), stored_text(row[2]))
            for row in conn.execute(
                "SELECT id, speaker, canonical FROM fragments WHERE id > ? ORDER BY id LIMIT ?",
                (after, limit),
            )
        ]


def document_columns(
    tokenize: Tokenizer, speaker: object, canonical: object
) -> tuple[list[str], list[str]]:
    """The tokens of a fragment's FTS5 row by column, speaker then text, as stored (read
    defensively: NULL as empty, bytes decoded), tokenized as FTS5 indexes them."""
    return tokenize(stored_text(speaker), False), tokenize(stored_text(canonical), False)


def document_tokens(tokenize: Tokenizer, speaker: object, canonical: object) -> list[str]:
    """The tokens of a fragment's FTS5 row: its two columns (:func:`document_columns`)."""
    who, text = document_columns(tokenize, speaker, canonical)
    return [*who, *text]


def hidden_ids(conn: Connection, fragment_ids: Collection[int]) -> set[int]:
    """Those of ``fragment_ids`` that retrieval leaves out now: superseded ones (probed in
    the index of the superseded alone, migration 006; the planner would read each id's
    row instead) and forgotten ones (:mod:`.forgets`: nothing to probe when nothing is)."""
    if not fragment_ids:
        return set()
    ids = json_array(fragment_ids)
    with reading("cannot read fragments"):
        return {
            int(row[0])
            for row in conn.execute(
                "SELECT id FROM fragments INDEXED BY fragments_superseded"
                f" WHERE superseded = 1 AND id {JSON_IN}"
                " UNION SELECT f.id FROM forgotten x JOIN fragments f ON f.log_id = x.log_id"
                f" WHERE f.id {JSON_IN}",
                (ids, ids),
            )
        }


def links_since(conn: Connection, after: int) -> list[LinkRow]:
    """Fragment links with an id above ``after``, in id order."""
    return list(
        conn.execute(
            "SELECT id, src, dst, kind FROM fragment_links WHERE id > ? ORDER BY id", (after,)
        )
    )
