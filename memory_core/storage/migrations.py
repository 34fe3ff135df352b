"""Named, append-only schema migrations, recorded in the database itself.

A migration is applied once, in order, inside a transaction together with the row that
records it; never edit a published migration, add a new one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .db import Connection, transaction

__all__ = ["MIGRATIONS", "migrate"]

Migration = Callable[[Connection], None]


def _m001_log(conn: Connection) -> None:
    conn.execute(
        """
        CREATE TABLE log (
            id INTEGER PRIMARY KEY,
            hash TEXT NOT NULL UNIQUE,
            parent_hash TEXT,
            conversation_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            role TEXT NOT NULL,
            name TEXT,
            ext_id TEXT,
            message TEXT NOT NULL,
            text TEXT NOT NULL,
            ts REAL NOT NULL,
            logged_at REAL NOT NULL,
            source TEXT NOT NULL
        );
        CREATE INDEX log_parent ON log(parent_hash);
        CREATE INDEX log_conversation ON log(conversation_id, position);
        CREATE TRIGGER log_no_update BEFORE UPDATE ON log
            BEGIN SELECT RAISE(ABORT, 'the log is append-only'); END;
        CREATE TRIGGER log_no_delete BEFORE DELETE ON log
            BEGIN SELECT RAISE(ABORT, 'the log is append-only'); END;
        CREATE TABLE queue (
            log_id INTEGER PRIMARY KEY REFERENCES log(id),
            queued_at REAL NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT
        );
        CREATE TABLE branches (
            id INTEGER PRIMARY KEY,
            abandoned_hash TEXT NOT NULL,
            replacement_hash TEXT NOT NULL,
            detected_at REAL NOT NULL
        );
        CREATE TABLE superseded (
            log_id INTEGER PRIMARY KEY REFERENCES log(id),
            branch_id INTEGER NOT NULL REFERENCES branches(id)
        );
        """
    )


def _m002_fragments(conn: Connection) -> None:
    conn.execute(
        """
        CREATE TABLE fragments (
            id INTEGER PRIMARY KEY,
            log_id INTEGER NOT NULL REFERENCES log(id),
            conversation_id TEXT NOT NULL,
            role TEXT NOT NULL,
            speaker TEXT,
            text TEXT NOT NULL,
            lang TEXT NOT NULL DEFAULT 'und',
            canonical TEXT NOT NULL,
            translated INTEGER NOT NULL DEFAULT 0,
            ts REAL NOT NULL,
            superseded INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL
        );
        CREATE INDEX fragments_log ON fragments(log_id);
        CREATE VIRTUAL TABLE fragments_fts USING fts5(
            speaker, canonical, content='fragments', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TABLE entities (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE COLLATE NOCASE,
            mentions INTEGER NOT NULL DEFAULT 0,
            first_seen REAL NOT NULL,
            last_seen REAL NOT NULL
        );
        """
    )


def _m003_receipts(conn: Connection) -> None:
    conn.execute(
        """
        CREATE TABLE receipts (
            id TEXT PRIMARY KEY,
            created_at REAL NOT NULL,
            body TEXT NOT NULL
        );
        """
    )


def _m004_formation(conn: Connection) -> None:
    """Contexts, segments, entities with aliases and mentions, relations and mutations.

    The lexical name table of 002 is replaced by entities (homonyms are separate rows
    with the same name) and their aliases; it is derived data and is re-formed.
    """
    conn.execute(
        """
        ALTER TABLE fragments ADD COLUMN normaliser TEXT;
        CREATE TABLE fragment_vectors (
            fragment_id INTEGER PRIMARY KEY REFERENCES fragments(id),
            model TEXT NOT NULL,
            vector BLOB NOT NULL
        );
        CREATE TABLE contexts (
            id INTEGER PRIMARY KEY,
            label TEXT NOT NULL,
            centroid BLOB NOT NULL,
            size INTEGER NOT NULL DEFAULT 0,
            first_ts REAL NOT NULL,
            last_ts REAL NOT NULL,
            created_at REAL NOT NULL,
            interpretation TEXT NOT NULL
        );
        CREATE TABLE segments (
            id INTEGER PRIMARY KEY,
            conversation_id TEXT NOT NULL,
            context_id INTEGER NOT NULL REFERENCES contexts(id),
            first_fragment INTEGER NOT NULL REFERENCES fragments(id),
            last_fragment INTEGER NOT NULL REFERENCES fragments(id),
            size INTEGER NOT NULL,
            interpretation TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX segments_conversation ON segments(conversation_id, id);
        CREATE TABLE fragment_contexts (
            fragment_id INTEGER NOT NULL REFERENCES fragments(id),
            context_id INTEGER NOT NULL REFERENCES contexts(id),
            segment_id INTEGER REFERENCES segments(id),
            weight REAL NOT NULL,
            is_primary INTEGER NOT NULL,
            interpretation TEXT NOT NULL,
            PRIMARY KEY (fragment_id, context_id)
        );
        CREATE INDEX fragment_contexts_context ON fragment_contexts(context_id);
        CREATE TABLE fragment_links (
            id INTEGER PRIMARY KEY,
            src INTEGER NOT NULL REFERENCES fragments(id),
            dst INTEGER NOT NULL REFERENCES fragments(id),
            kind TEXT NOT NULL CHECK (kind IN ('next', 'answers', 'corrects', 'depends_on')),
            interpretation TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX fragment_links_src ON fragment_links(src);
        CREATE INDEX fragment_links_dst ON fragment_links(dst);
        DROP TABLE entities;
        CREATE TABLE entities (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            label TEXT NOT NULL,
            is_speaker INTEGER NOT NULL DEFAULT 0,
            vector_sum BLOB,
            vectors INTEGER NOT NULL DEFAULT 0,
            mentions INTEGER NOT NULL DEFAULT 0,
            first_seen REAL NOT NULL,
            last_seen REAL NOT NULL,
            created_at REAL NOT NULL,
            interpretation TEXT NOT NULL
        );
        CREATE INDEX entities_name ON entities(name COLLATE NOCASE);
        CREATE TABLE aliases (
            id INTEGER PRIMARY KEY,
            entity_id INTEGER NOT NULL REFERENCES entities(id),
            alias TEXT NOT NULL,
            normalized TEXT NOT NULL,
            lang TEXT,
            source TEXT NOT NULL,
            fragment_id INTEGER REFERENCES fragments(id),
            UNIQUE (entity_id, normalized)
        );
        CREATE INDEX aliases_normalized ON aliases(normalized);
        CREATE TABLE mentions (
            id INTEGER PRIMARY KEY,
            fragment_id INTEGER NOT NULL REFERENCES fragments(id),
            entity_id INTEGER NOT NULL REFERENCES entities(id),
            start INTEGER NOT NULL,
            end INTEGER NOT NULL,
            surface TEXT NOT NULL,
            label TEXT NOT NULL,
            confidence REAL NOT NULL,
            link_score REAL NOT NULL,
            link_reason TEXT NOT NULL,
            ner TEXT NOT NULL,
            linker TEXT NOT NULL
        );
        CREATE INDEX mentions_entity ON mentions(entity_id);
        CREATE INDEX mentions_fragment ON mentions(fragment_id);
        CREATE TABLE relations (
            id INTEGER PRIMARY KEY,
            subject_id INTEGER NOT NULL REFERENCES entities(id),
            predicate TEXT NOT NULL,
            object_id INTEGER REFERENCES entities(id),
            object_value TEXT,
            fragment_id INTEGER NOT NULL REFERENCES fragments(id),
            context_id INTEGER REFERENCES contexts(id),
            interpretation TEXT NOT NULL,
            confidence REAL NOT NULL,
            valid_from TEXT,
            status TEXT NOT NULL DEFAULT 'active'
                CHECK (status IN ('active', 'superseded', 'disputed')),
            created_at REAL NOT NULL,
            CHECK ((object_id IS NULL) <> (object_value IS NULL))
        );
        CREATE INDEX relations_subject ON relations(subject_id, predicate);
        CREATE INDEX relations_object ON relations(object_id);
        CREATE TABLE mutations (
            id INTEGER PRIMARY KEY,
            relation_id INTEGER NOT NULL REFERENCES relations(id),
            kind TEXT NOT NULL CHECK (kind IN ('new', 'reaffirmation', 'change', 'conflict')),
            other_id INTEGER REFERENCES relations(id),
            reason TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX mutations_relation ON mutations(relation_id);
        CREATE TABLE formation_failures (
            id INTEGER PRIMARY KEY,
            stage TEXT NOT NULL,
            interpretation TEXT NOT NULL,
            log_id INTEGER REFERENCES log(id),
            error TEXT NOT NULL,
            raw TEXT,
            created_at REAL NOT NULL
        );
        CREATE TABLE open_segments (
            conversation_id TEXT PRIMARY KEY,
            segment_id INTEGER NOT NULL REFERENCES segments(id)
        );
        """
    )
    # fragments formed before this migration get their graph on the next pass
    conn.execute(
        "INSERT OR IGNORE INTO queue (log_id, queued_at) SELECT log_id, created_at FROM fragments"
    )
    conn.execute("INSERT INTO fragments_fts (fragments_fts) VALUES ('delete-all')")
    conn.execute("DELETE FROM fragments")


def _m005_question_vectors(conn: Connection) -> None:
    """Question vectors kept for formation (see :mod:`memory_core.storage.tables.question_vectors`).
    """
    conn.execute(
        "CREATE TABLE question_vectors ("
        " key TEXT PRIMARY KEY, vector BLOB NOT NULL, created_at REAL NOT NULL)"
    )


def _m006_superseded_index(conn: Connection) -> None:
    """The superseded fragments' ids, alone in an index: a lookup checks its BM25 hits
    (hundreds at a time) against it instead of reading each hit's row (a random page of
    a table that holds every fragment's text and vector: 0.25 ms a lookup at 100k
    fragments, against ~0.01 ms for this index, small and cached)."""
    conn.execute("CREATE INDEX fragments_superseded ON fragments (id) WHERE superseded = 1")


def _m007_evidence_indexes(conn: Connection) -> None:
    """What reconstruction looks up per question (:mod:`memory_core.reconstruction.evidence`): the
    relations of the fragments it renders, co-occurrence aside (a partial index: a fragment's dozens
    of co-occurrence rows are never read), and the change that replaced a relation; and the
    receipts' times, which pruning by age walks (:mod:`memory_core.storage.tables.receipts`)."""
    conn.execute(  # co-occurrence rows (most of the table) are never rendered: not in it
        "CREATE INDEX relations_fragment ON relations (fragment_id)"
        " WHERE predicate <> 'co_occurs_with'"
    )
    conn.execute("CREATE INDEX mutations_other ON mutations (other_id) WHERE other_id IS NOT NULL")
    conn.execute("CREATE INDEX receipts_created ON receipts (created_at)")


def _m008_history(conn: Connection) -> None:
    """Snapshots of derived memory (:mod:`.history`), the journal that feeds them
    (:mod:`.journal`), rows held back from formation by a rollback, and what the Dreamer
    keeps (:mod:`.dream`): its state and watermarks, its merges, the links it draws
    between contexts and the support of each group of restated relations.

    ``memory_state`` (one row) and ``held`` are bookkeeping, never rolled back; the
    Dreamer's tables are derived memory, recorded by the journal like formation's.
    """
    conn.execute(
        """
        CREATE TABLE memory_state (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            generation INTEGER NOT NULL DEFAULT 0,
            derived_version INTEGER NOT NULL DEFAULT 0,
            last_rollback_at REAL
        );
        INSERT INTO memory_state (id) VALUES (1);
        CREATE TABLE journal (
            id INTEGER PRIMARY KEY,
            changeset BLOB NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE TABLE snapshots (
            id INTEGER PRIMARY KEY,
            parent INTEGER,
            kind TEXT NOT NULL CHECK (kind IN ('cycle', 'rollback', 'checkpoint')),
            target INTEGER,
            created_at REAL NOT NULL,
            changeset BLOB NOT NULL,
            bytes INTEGER NOT NULL,
            rows_changed INTEGER NOT NULL,
            counts TEXT NOT NULL,
            report TEXT NOT NULL
        );
        CREATE TABLE held (
            log_id INTEGER PRIMARY KEY REFERENCES log(id),
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT,
            held_at REAL NOT NULL,
            snapshot_id INTEGER
        );
        CREATE TABLE dream_state (
            key TEXT PRIMARY KEY,
            value REAL NOT NULL
        );
        CREATE TABLE merges (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL CHECK (kind IN ('entity', 'context')),
            survivor INTEGER NOT NULL,
            merged INTEGER NOT NULL,
            merged_name TEXT NOT NULL,
            detail TEXT NOT NULL,
            reason TEXT NOT NULL,
            cycle INTEGER NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX merges_survivor ON merges (kind, survivor);
        CREATE TABLE context_links (
            id INTEGER PRIMARY KEY,
            a INTEGER NOT NULL REFERENCES contexts(id),
            b INTEGER NOT NULL REFERENCES contexts(id),
            similarity REAL NOT NULL,
            reason TEXT NOT NULL,
            cycle INTEGER NOT NULL,
            created_at REAL NOT NULL,
            UNIQUE (a, b)
        );
        CREATE INDEX context_links_b ON context_links (b);
        CREATE TABLE relation_groups (
            id INTEGER PRIMARY KEY,
            subject_id INTEGER NOT NULL,
            predicate TEXT NOT NULL,
            object_key TEXT NOT NULL,
            support INTEGER NOT NULL,
            strength REAL NOT NULL,
            last_cycle INTEGER NOT NULL,
            UNIQUE (subject_id, predicate, object_key)
        );
        CREATE INDEX relation_groups_object ON relation_groups (object_key);
        CREATE INDEX segments_context ON segments (context_id);
        """
    )


def _m009_rollback_indexes(conn: Connection) -> None:
    """Every column that references a row a rollback may delete gets an index, so the
    foreign-key check of each deleted fragment, context or segment is a lookup: without
    them, deleting one fragment scanned every relation (a partial index cannot serve
    the check), and rolling back one cycle of 20 turns on a store of 100k relations took
    320 ms against 11 ms for redoing it (``scripts/bench_dreamer.py``). The partial index
    of a fragment's relations becomes a full one on (fragment, predicate), which serves
    reconstruction's reads as well (co-occurrence rows are skipped inside the index)."""
    conn.execute(
        """
        DROP INDEX relations_fragment;
        CREATE INDEX relations_fragment ON relations (fragment_id, predicate);
        CREATE INDEX relations_context ON relations (context_id);
        CREATE INDEX aliases_fragment ON aliases (fragment_id);
        CREATE INDEX segments_first ON segments (first_fragment);
        CREATE INDEX segments_last ON segments (last_fragment);
        CREATE INDEX fragment_contexts_segment ON fragment_contexts (segment_id);
        CREATE INDEX open_segments_segment ON open_segments (segment_id);
        """
    )


def _m010_user_controls(conn: Connection) -> None:
    """What users ask of memory itself: forgets and the messages they name
    (:mod:`memory_core.storage.tables.forgets`), conversations with memory switched off
    (:mod:`memory_core.storage.tables.switches`); neither is derived memory."""
    conn.execute(
        """
        CREATE TABLE forgets (
            id INTEGER PRIMARY KEY,
            created_at REAL NOT NULL,
            conversation_id TEXT,
            request TEXT NOT NULL,
            messages INTEGER NOT NULL,
            undone_at REAL
        )
        """
    )
    conn.execute(
        """
        CREATE TABLE forgotten (
            log_id INTEGER NOT NULL,
            forget_id INTEGER NOT NULL REFERENCES forgets(id),
            PRIMARY KEY (log_id, forget_id)
        ) WITHOUT ROWID
        """
    )
    conn.execute("CREATE INDEX forgotten_forget ON forgotten (forget_id)")
    conn.execute(
        """
        CREATE TABLE memory_off (
            conversation_id TEXT PRIMARY KEY,
            since REAL NOT NULL
        ) WITHOUT ROWID
        """
    )


def _m011_fragment_kinds(conn: Connection) -> None:
    """What each fragment does (``kind``: ``stated``, ``asked``, ``restated``), so a
    question or an answer that restates memory never outranks what was told; and which
    fragments an answer restates, best first (``log_sources``: part of the log, written
    when the answer is logged). Fragments stored before are ``stated``; formation tells the
    others apart from then on."""
    conn.execute(
        "ALTER TABLE fragments ADD COLUMN kind TEXT NOT NULL DEFAULT 'stated'"
        " CHECK (kind IN ('stated', 'asked', 'restated'))"
    )
    conn.execute(
        """
        CREATE TABLE log_sources (
            log_id INTEGER NOT NULL REFERENCES log(id),
            position INTEGER NOT NULL,
            fragment_id INTEGER NOT NULL,
            PRIMARY KEY (log_id, position)
        ) WITHOUT ROWID
        """
    )


def _m012_word_vectors(conn: Connection) -> None:
    """The vector of each word memory's fragments use (:mod:`memory_core.storage.tables
    .word_vectors`): a question's words meet memory's words of another language through
    them. A cache of the encoder, not derived memory: a word's vector is a function of the
    word and the encoder alone, so no rollback needs to undo one. ``language``: the
    language of the fragment that used the word first."""
    conn.execute(
        "CREATE TABLE word_vectors ("
        " id INTEGER PRIMARY KEY, word TEXT NOT NULL UNIQUE, language TEXT NOT NULL,"
        " encoder TEXT NOT NULL, vector BLOB NOT NULL)"
    )


def _m013_fragment_dates(conn: Connection) -> None:
    """The time expressions of each fragment with the days they mean
    (:mod:`memory_core.storage.tables.dates`): "yesterday" said on 8 May 2023 kept with
    2023-05-07, beside the words, which stay as they were said. Derived memory (formed
    from the fragment's text and its turn's date; snapshots cover it). ``first_day`` and
    ``last_day`` are ISO dates (they compare as text); the index serves a question's
    range, and ``fragments_ts`` the fragments said within it."""
    conn.execute(
        """
        CREATE TABLE fragment_dates (
            fragment_id INTEGER NOT NULL REFERENCES fragments(id),
            position INTEGER NOT NULL,
            start INTEGER NOT NULL,
            end INTEGER NOT NULL,
            words TEXT NOT NULL,
            first_day TEXT NOT NULL,
            last_day TEXT NOT NULL,
            granularity TEXT NOT NULL,
            approximate INTEGER NOT NULL DEFAULT 0,
            relative INTEGER NOT NULL DEFAULT 1,
            PRIMARY KEY (fragment_id, position),
            CHECK (first_day <= last_day)
        ) WITHOUT ROWID;
        CREATE INDEX fragment_dates_days ON fragment_dates (first_day, last_day);
        CREATE INDEX fragments_ts ON fragments (ts);
        """
    )
    _arm_date_backfill(conn)


def _m014_date_backfill(conn: Connection) -> None:
    """Where the dating of the fragments formed before migration 013 has reached
    (``date_backfill``: one row while it is unfinished, none once done;
    :func:`memory_core.formation.dates.date_formed`). 013 arms it in the same transaction
    as it creates ``fragment_dates``. Before this migration the backfill ran only in the
    open that applied 013, and a kill partway left the rest undated for good (a fragment
    without expressions looks like one never read), so a store migrated before is armed
    here too: its fragments without expressions are read once more at its next open."""
    _arm_date_backfill(conn)


def _arm_date_backfill(conn: Connection) -> None:
    """The dating of every fragment without expressions, from the first, pending (kept
    by ``date_backfill``, bookkeeping: no snapshot covers it)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS date_backfill"
        " (id INTEGER PRIMARY KEY CHECK (id = 1), after INTEGER NOT NULL)"
    )
    conn.execute("INSERT OR REPLACE INTO date_backfill VALUES (1, 0)")


def _m015_vector_models(conn: Connection) -> None:
    """The encoder of each fragment vector, alone in an index: which encoders made a
    store's vectors (:func:`~memory_core.storage.tables.reformation.encoders`, asked by the
    first question after an open, a rollback or an import, under the write lock) read
    every vector row without it: 0.7 s cold and 40-50 ms warm at 100,000 fragments,
    within a lookup's budget."""
    conn.execute("CREATE INDEX IF NOT EXISTS fragment_vectors_model ON fragment_vectors (model)")


def _m016_response_links(conn: Connection) -> None:
    """Which conversation each relayed response continues, and the last message logged
    with it (:mod:`memory_core.storage.tables.responses`): a Responses API client's later
    turn names only the response it follows. A rowid table, so the newest links are the
    highest rowids (the bound keeps those); bookkeeping, not derived memory."""
    conn.execute(
        """
        CREATE TABLE response_links (
            response_id TEXT NOT NULL UNIQUE,
            conversation_id TEXT NOT NULL,
            tip TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX response_links_created ON response_links (created_at);
        """
    )


MIGRATIONS: tuple[tuple[str, Migration], ...] = (
    ("001_log", _m001_log),
    ("002_fragments", _m002_fragments),
    ("003_receipts", _m003_receipts),
    ("004_formation", _m004_formation),
    ("005_question_vectors", _m005_question_vectors),
    ("006_superseded_index", _m006_superseded_index),
    ("007_evidence_indexes", _m007_evidence_indexes),
    ("008_history", _m008_history),
    ("009_rollback_indexes", _m009_rollback_indexes),
    ("010_user_controls", _m010_user_controls),
    ("011_fragment_kinds", _m011_fragment_kinds),
    ("012_word_vectors", _m012_word_vectors),
    ("013_fragment_dates", _m013_fragment_dates),
    ("014_date_backfill", _m014_date_backfill),
    ("015_vector_models", _m015_vector_models),
    ("016_response_links", _m016_response_links),
)


def migrate(conn: Connection) -> list[str]:
    """Apply every migration not yet recorded; return the names applied now (by this
    connection: another process opening the file at the same time may apply some of
    them between our transactions, so each is looked up again under the write lock)."""
    with transaction(conn, journal=False):
        conn.execute(
            "CREATE TABLE IF NOT EXISTS migrations"
            " (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
        )
        done = {row[0] for row in conn.execute("SELECT name FROM migrations")}
    applied = []
    for name, migration in MIGRATIONS:
        if name in done:
            continue
        with transaction(conn, journal=False):  # schema changes are never rolled back
            if _recorded(conn, name):
                continue
            migration(conn)
            conn.execute("INSERT INTO migrations VALUES (?, ?)", (name, time.time()))
        applied.append(name)
    return applied


def _recorded(conn: Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM migrations WHERE name = ?", (name,)).fetchone() is not None
