"""Response ids linked to conversations (issue 29, seventh stop): the bounded table
(:mod:`memory_core.storage.tables.responses`) and the continuation read from the log
(:mod:`memory_core.log.continuation`)."""

from __future__ import annotations

from pathlib import Path

from memory_core import LogMessage, MemoryStore
from memory_core.formation import Backends
from memory_core.storage.db import connect, transaction
from memory_core.storage.migrations import migrate
from memory_core.storage.tables import responses

T0 = 1_700_000_000.0


def test_links_are_bounded_by_count_and_age(tmp_path: Path) -> None:
    conn = connect(tmp_path / "m.db")
    migrate(conn)
    extra = 5
    with transaction(conn):
        for i in range(responses.KEEP + extra):
            responses.link(conn, f"resp_{i}", "c1", f"tip{i}", T0 + i)
    now = T0 + responses.KEEP + extra
    counted = conn.execute("SELECT count(*) FROM response_links").fetchone()
    assert counted is not None and counted[0] == responses.KEEP
    assert responses.linked(conn, f"resp_{extra - 1}", now) is None  # the oldest dropped
    kept = responses.linked(conn, f"resp_{extra}", now)
    assert kept == responses.ResponseLink("c1", f"tip{extra}")
    later = now + responses.MAX_AGE_S - 1  # past its age, though still a row, reads as none
    assert responses.linked(conn, f"resp_{extra}", later) is None
    assert responses.linked(conn, f"resp_{responses.KEEP + extra - 1}", later) is not None
    with transaction(conn):
        responses.link(conn, "resp_new", "c2", "tip", later)
    counted = conn.execute("SELECT count(*) FROM response_links").fetchone()
    assert counted is not None
    rows = counted[0]
    assert rows < responses.KEEP  # the expired ones went with the next link
    conn.close()


def test_a_continuation_is_the_stored_path_up_to_the_linked_answer(
    tmp_path: Path, backends: Backends
) -> None:
    """The path read back hashes to the tip; a link whose tip no longer leads there, an
    unknown id: none."""
    store = MemoryStore(tmp_path / "m.db", backends=backends, clock=lambda: T0)
    said = [{"role": "user", "content": "Hi, I am Ana."}, {"role": "assistant", "content": "Hi!"}]
    first = store.append([LogMessage(m, T0) for m in said], response_id="resp_a")
    found = store.continuation("resp_a")
    assert found is not None
    assert found.conversation == first.conversation_id and list(found.messages) == said
    more = [*said, {"role": "user", "content": "My dog?"}, {"role": "assistant", "content": "?"}]
    second = store.append([LogMessage(m, T0) for m in more], response_id="resp_b")
    assert second.appended == 2 and second.conversation_id == first.conversation_id
    again = store.continuation("resp_b")
    assert again is not None and list(again.messages) == more
    assert store.continuation("resp_unknown") is None
    conn = connect(tmp_path / "m.db")
    with transaction(conn):  # a link to a tip no path leads to
        responses.link(conn, "resp_c", first.conversation_id, "f" * 64, T0)
    conn.close()
    assert store.continuation("resp_c") is None
    store.close()
