"""Only new turns are ingested; edits and regenerations are branches that supersede."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import apsw
import pytest
from openai.types.chat import ChatCompletionMessageParam

from memory_core import LogMessage, MemoryStore, StorageError
from memory_core.formation import Backends
from memory_core.formation.interfaces import Mention
from proxy.fake_upstream import FakeUpstream

from .conftest import Proxy

pytestmark = pytest.mark.e2e


def _history(*turns: tuple[str, str]) -> list[LogMessage]:
    return [LogMessage({"role": role, "content": text}, time.time()) for role, text in turns]


def _live_texts(store: MemoryStore, query: str) -> list[str]:
    return [h.text for h in store.recall(query, limit=20, budget_tokens=2000).hits]


def test_resending_a_history_appends_only_new_turns(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m.db")
    first = store.append(
        _history(("user", "I adopted a cat named Miso."), ("assistant", "Lovely!"))
    )
    again = store.append(
        _history(
            ("user", "I adopted a cat named Miso."),
            ("assistant", "Lovely!"),
            ("user", "She is orange."),
        )
    )
    assert (first.appended, again.appended, again.already_stored) == (2, 1, 2)
    assert again.conversation_id == first.conversation_id
    store.form_all()
    assert store.stats().fragments == 3


def test_regenerated_answer_supersedes_the_old_one(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m.db")
    store.append(
        _history(("user", "Suggest a name for my boat."), ("assistant", "Call it Seagull."))
    )
    store.form_all()
    result = store.append(
        _history(("user", "Suggest a name for my boat."), ("assistant", "Call it Albatross."))
    )
    store.form_all()
    assert result.superseded == 1
    assert set(_live_texts(store, "boat call")) == {
        "Call it Albatross.",
        "Suggest a name for my boat.",
    }
    assert "Call it Seagull." not in _live_texts(store, "Seagull")


def test_edited_turn_supersedes_the_abandoned_subtree(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m.db")
    store.append(
        _history(
            ("user", "Plan a trip."),
            ("assistant", "Where to?"),
            ("user", "To Oslo in March."),
            ("assistant", "Oslo in March is cold."),
            ("user", "Book the Oslo hotel."),
        )
    )
    store.form_all()
    edited = store.append(
        _history(("user", "Plan a trip."), ("assistant", "Where to?"), ("user", "To Rome in May."))
    )
    store.form_all()
    assert edited.superseded == 3
    assert _live_texts(store, "Oslo") == []
    assert "To Rome in May." in _live_texts(store, "Rome")
    # going back to the abandoned branch restores it and supersedes the edit
    back = store.append(
        _history(
            ("user", "Plan a trip."), ("assistant", "Where to?"), ("user", "To Oslo in March.")
        )
    )
    assert back.restored == 1
    assert _live_texts(store, "Oslo") == ["To Oslo in March."]
    assert _live_texts(store, "Rome") == []


def test_log_is_append_only(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m.db")
    store.append(_history(("user", "keep me")))
    conn = apsw.Connection(str(tmp_path / "m.db"))
    with pytest.raises(apsw.ConstraintError, match="append-only"):
        conn.execute("UPDATE log SET text = 'changed'")
    with pytest.raises(apsw.ConstraintError, match="append-only"):
        conn.execute("DELETE FROM log")
    conn.close()


def test_crash_between_log_and_formation_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = MemoryStore(path)
    store.append(_history(("user", "The wifi password is heron-42."), ("assistant", "Saved.")))
    del store  # the process dies before formation ran: nothing but the log was written
    reopened = MemoryStore(path)
    assert reopened.stats().queued == 2
    assert reopened.form_all() == 2
    assert _live_texts(reopened, "wifi password") == ["The wifi password is heron-42."]
    assert reopened.form_all() == 0  # never processed twice


def test_closed_store_fails_with_storage_error(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m.db")
    store.close()
    with pytest.raises(StorageError):
        store.append(_history(("user", "x")))


async def test_proxy_detects_a_regenerated_turn(proxy: Proxy, upstream: FakeUpstream) -> None:
    history: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "Name my sourdough starter."}
    ]
    headers = {"X-Memory": "auto"}
    async with proxy.client() as client:
        await client.chat.completions.create(model="echo", messages=history, extra_headers=headers)
        await proxy.settle()
        store = proxy.services.tenants.get("default").store
        assert _live_texts(store, "sourdough starter")  # the turn and the echo answer
        # the client regenerates: same history, the upstream now answers differently
        await client.chat.completions.create(
            model="echo",
            messages=[
                *history,
                {"role": "assistant", "content": "Call it Bubbles."},
                {"role": "user", "content": "Another idea for the sourdough?"},
            ],
        )
        await proxy.settle()
    texts = _live_texts(store, "sourdough")
    assert "echo: Name my sourdough starter." not in texts  # replaced by "Call it Bubbles."
    assert "Call it Bubbles." in _live_texts(store, "Bubbles")


def test_relations_of_an_abandoned_branch_are_superseded_and_restored(
    tmp_path: Path, backends: Backends
) -> None:
    store = MemoryStore(tmp_path / "m.db", backends=backends)
    store.append(
        _history(
            ("user", "Where should I live?"),
            ("assistant", "Maybe Lisbon."),
            ("user", "I live in Lisbon now."),
        )
    )
    store.form_all()

    def lives() -> list[tuple[str | None, str]]:
        return [
            (r.object, r.status)
            for r in store.relations(entity="user")
            if r.predicate == "lives_in"
        ]

    assert lives() == [("Lisbon", "active")]
    store.append(
        _history(
            ("user", "Where should I live?"),
            ("assistant", "Maybe Lisbon."),
            ("user", "I live in Porto now."),
        )
    )
    store.form_all()
    assert lives() == [("Lisbon", "superseded"), ("Porto", "active")]
    store.append(
        _history(
            ("user", "Where should I live?"),
            ("assistant", "Maybe Lisbon."),
            ("user", "I live in Lisbon now."),
        )
    )
    assert lives() == [("Lisbon", "active"), ("Porto", "superseded")]


def test_a_regeneration_appended_during_a_formation_pass_is_honoured(
    tmp_path: Path, backends: Backends
) -> None:
    """The pass reads its rows, then (while its models run) the client regenerates the
    answer: the old answer must still be formed as superseded, not as live memory."""
    turns = [("user", "Suggest a name for my kite."), ("assistant", "Call it Falcon.")]
    regenerated = [turns[0], ("assistant", "Call it Swift.")]
    store: MemoryStore

    class RegeneratingNER:
        interpretation = backends.ner.interpretation
        fired = False

        def mentions(self, text: str, known: Sequence[str] = ()) -> list[Mention]:
            if not RegeneratingNER.fired:
                RegeneratingNER.fired = True
                store.append(_history(*regenerated))  # between the pass's read and write
            return backends.ner.mentions(text, known)

    store = MemoryStore(tmp_path / "m.db", backends=replace(backends, ner=RegeneratingNER()))
    store.append(_history(*turns))
    store.form_all()
    assert RegeneratingNER.fired
    assert "Call it Falcon." not in _live_texts(store, "kite Falcon Swift call")
    assert "Call it Swift." in _live_texts(store, "kite Falcon Swift call")
    store.close()
