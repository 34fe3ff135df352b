"""Hostile concurrency through a real proxy: lookups (the area, search, entities, and
chat through the real ``openai`` client, now and as of a snapshot) while formation
commits, a consolidation cycle writes, a rollback and its undo run and an export and an
import replace memory. Every lookup answers, or is refused with a clear reason; never a
500, never a stale state's error leaking to the client."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from memory_core import LogMessage, MemoryStore
from memory_core.formation import Backends
from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, proxy_config

pytestmark = pytest.mark.e2e

Json = dict[str, Any]


def _conversation(name: str, day: str, lines: list[str], speakers: tuple[str, str]) -> Json:
    return {
        "conversation_id": name,
        "messages": [
            {
                "role": "user",
                "name": speakers[i % 2],
                "content": text,
                "timestamp": f"{day}T10:{i:02d}:00",
            }
            for i, text in enumerate(lines)
        ],
    }


KATE = [
    "I finished a long shift at the hospital yesterday, I work as a nurse.",
    "Hey Kate! That sounds exhausting. How many hours was it?",
    "Twelve hours. Next week I volunteer at the animal shelter.",
    "Thanks, Kate. I started the cello last month.",
]
QUESTIONS = ("What does Kate do?", "What happened on 7 May 2023?", "Who plays the cello?")


async def test_lookups_answer_while_formation_cycles_rollbacks_and_imports_write(
    upstream: FakeUpstream, make_proxy: MakeProxy, tmp_path: Any
) -> None:
    proxy = await make_proxy(proxy_config(
        upstream.url,
        memory={"ingest": False, "retrieval_timeout_ms": 60_000, "formation_workers": 0},
        policy={"rules": [{"type": "always"}], "dream": {"enabled": False}},
    ))
    statuses: list[tuple[str, int, str]] = []
    stop = asyncio.Event()

    async with aiohttp.ClientSession() as http:

        async def call(method: str, path: str, raw: bool = False, **kwargs: Any) -> Any:
            async with http.request(method, proxy.url + path, **kwargs) as response:
                data = await response.read()
                body = data.decode(errors="replace")
                statuses.append((f"{method} {path}", response.status, body[:300]))
                return data if raw else (response.status, body)

        status, _ = await call("POST", "/memory/ingest", json=_conversation(
            "c1", "2023-05-08", KATE, ("Katarzyna", "Tom")))
        assert status == 200
        status, body = await call("POST", "/memory/dream")
        assert status == 200, body
        s1 = json.loads(body)["snapshot"]

        async def read(as_of: int | None) -> None:
            while not stop.is_set():
                for q in QUESTIONS:
                    params = {"q": q, **({"as_of": str(as_of)} if as_of else {})}
                    await call("GET", "/memory/area", params=params)
                    await call("GET", "/memory/search", params=params)
                await call("GET", "/memory/entities")

        async def chat(as_of: int | None) -> None:
            headers = {"X-Memory": "force", **({"X-Memory-As-Of": str(as_of)} if as_of else {})}
            async with proxy.client() as client:
                while not stop.is_set():
                    try:
                        await client.chat.completions.create(
                            model="echo",
                            messages=[{"role": "user", "content": QUESTIONS[0]}],
                            extra_headers=headers,
                        )
                        statuses.append(("chat", 200, ""))
                    except openai.APIStatusError as exc:
                        statuses.append(("chat", exc.status_code, str(exc)[:300]))

        readers = [asyncio.ensure_future(f) for f in
                   (read(None), read(s1), chat(None), chat(s1))]
        try:
            await _write_meanwhile(call, s1)
            await asyncio.sleep(0.5)
        finally:
            stop.set()
            await asyncio.gather(*readers)
    bad = [s for s in statuses if s[1] >= 500 or (s[1] >= 400 and s[1] not in (409, 429, 503))]
    assert not bad, bad[:5]
    print(sorted({(s[0], s[1]) for s in statuses}))
    print([s for s in statuses if s[1] != 200][:10])


def _other_memory(
    tmp_path: Path, backends: Backends, *, switched_off: tuple[str, ...] = ()
) -> Path:
    """Another tenant's memory exported to ``tmp_path/other.zip``: Rui plays fado in Porto
    (snapshot 1 taken after it), with ``switched_off`` conversations switched off."""
    other = MemoryStore(tmp_path / "other.db", backends=backends)
    other.append(
        [LogMessage({"role": "user", "name": "Rui", "content": "I play fado in Porto."}, 1.7e9)],
        conversation="o1",
    )
    other.form_all()
    assert other.dream().snapshot == 1
    for conversation in switched_off:
        other.switch_memory(conversation, on=False)
    exported = tmp_path / "other.zip"
    other.export(exported, tenant="other")
    other.close()
    return exported


async def _write_meanwhile(call: Any, s1: int) -> None:
    """Formation passes, a cycle, a rollback and its undo, an export and an import."""
    for i in range(3):
        await call("POST", "/memory/ingest", json=_conversation(
            f"d{i}", f"2023-06-0{i + 1}", [f"No, Kate works as a doctor since day {i}.",
                                           "Oi Bia, tudo bem?"], ("Tom", "Beatriz")))
    await call("POST", "/memory/dream")
    status, body = await call("POST", "/memory/rollback", json={"snapshot": s1})
    assert status == 200, body
    await call("POST", "/memory/rollback", json={"snapshot": json.loads(body)["undo"]})
    exported = await call("GET", "/memory/export", raw=True)
    await call("POST", "/memory/rollback", json={"snapshot": s1})
    status, body = await call("POST", "/memory/import", params={"replace": "true"}, data=exported)
    assert status == 200, body


async def test_an_answer_as_of_a_snapshot_after_an_import_reads_the_imported_memory(
    upstream: FakeUpstream, make_proxy: MakeProxy, tmp_path: Path, backends: Backends
) -> None:
    exported = _other_memory(tmp_path, backends)
    proxy = await make_proxy(proxy_config(
        upstream.url,
        memory={"ingest": False, "retrieval_timeout_ms": 60_000, "formation_workers": 0},
        policy={"rules": [{"type": "always"}], "dream": {"enabled": False}},
    ))
    async with aiohttp.ClientSession() as http:

        async def call(method: str, path: str, **kwargs: Any) -> Any:
            async with http.request(method, proxy.url + path, **kwargs) as response:
                body = await response.text()
                assert response.status == 200, body
                return json.loads(body)

        await call("POST", "/memory/ingest", json=_conversation(
            "c1", "2023-05-08", KATE, ("Katarzyna", "Tom")))
        assert (await call("POST", "/memory/dream"))["snapshot"] == 1
        async def hits(**params: str) -> str:
            found = await call("GET", "/memory/search", params={"q": "nurse fado", **params})
            return " ".join(h["text"] for h in found["hits"])

        before = await hits(as_of="1")
        assert "nurse" in before and "fado" not in before
        await call("POST", "/memory/import", params={"replace": "true"},
                   data=exported.read_bytes())
        now = await hits()
        assert "fado" in now and "nurse" not in now
        after = await hits(as_of="1")
    assert "fado" in after and "nurse" not in after, after


async def test_a_rollback_by_another_process_never_fails_a_lookup(
    upstream: FakeUpstream, make_proxy: MakeProxy, backends: Backends
) -> None:
    """Another process (``areamem rollback``) rolls the tenant back while the proxy serves
    it: /memory/area (and a search by area) answered 500 ("memory ... changed wholesale")
    until the cycle loop's next tick read the graph again. The lookup that finds the graph
    stale now starts that read at once and is shed (503 memory_busy, Retry-After); once
    read, lookups answer from the rolled-back state."""
    proxy = await make_proxy(proxy_config(
        upstream.url,
        memory={"ingest": False, "retrieval_timeout_ms": 60_000, "formation_workers": 0},
        policy={"rules": [{"type": "always"}], "dream": {"enabled": False}},
    ))
    async with aiohttp.ClientSession() as http:

        async def call(method: str, path: str, **kwargs: Any) -> tuple[int, str]:
            async with http.request(method, proxy.url + path, **kwargs) as response:
                return response.status, await response.text()

        await call("POST", "/memory/ingest", json=_conversation(
            "c1", "2023-05-08", KATE, ("Katarzyna", "Tom")))
        s1 = json.loads((await call("POST", "/memory/dream"))[1])["snapshot"]
        await call("POST", "/memory/ingest", json=_conversation(
            "c2", "2023-06-01", ["Oi Bia, tudo bem?", "Sim! Toco fado no Porto."],
            ("Rui", "Beatriz")))
        await call("POST", "/memory/dream")
        assert (await call("GET", "/memory/area", params={"q": "fado"}))[0] == 200
        (path,) = [p for p in proxy.data_dir.rglob("*.db") if "as_of" not in str(p)]
        other = MemoryStore(path, backends=backends)  # as `areamem rollback` would
        other.rollback(s1)
        other.close()
        shed = [await call("GET", "/memory/area", params={"q": "fado"}),
                await call("GET", "/memory/search", params={"q": "fado", "strategy": "area"})]
        async with proxy.client() as client:
            await client.chat.completions.create(
                model="echo", messages=[{"role": "user", "content": "fado?"}],
                extra_headers={"X-Memory": "force"},
            )
        await proxy.services.tenants.get("default").check_generation()  # the reread done
        status, body = await call("GET", "/memory/area", params={"q": "fado"})
    for status_shed, text in shed:
        assert status_shed in (200, 503), text
        if status_shed == 503:
            assert "memory_busy" in text and "changed wholesale" in text, text
    assert status == 200 and "Toco fado" not in body, body


async def test_a_conversation_switched_off_in_an_imported_memory_stays_off(
    upstream: FakeUpstream, make_proxy: MakeProxy, tmp_path: Path, backends: Backends
) -> None:
    """``/memory off`` is kept with memory (``memory_off``, carried by an export), and
    the proxy keeps the switched-off conversations in memory, read when the tenant is
    opened. An import replacing the tenant's memory left that set as it was: a
    conversation the imported memory had switched off got memory (and its exchanges were
    stored), and one switched off before the import stayed off."""
    _other_memory(tmp_path, backends, switched_off=("secret",))
    proxy = await make_proxy(proxy_config(
        upstream.url,
        memory={"ingest": True, "retrieval_timeout_ms": 60_000, "formation_workers": 0},
        policy={"rules": [{"type": "always"}], "dream": {"enabled": False}},
    ))
    memory = await proxy.services.tenants.open("default")
    await memory.switch_memory("private", on=False)
    async with aiohttp.ClientSession() as http:
        async with http.post(
            proxy.url + "/memory/import", params={"replace": "true"},
            data=(tmp_path / "other.zip").read_bytes(),
        ) as response:
            assert response.status == 200, await response.text()
    assert memory.memory_is_off("secret") and not memory.memory_is_off("private")
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "Where do I play fado?"}],
            extra_headers={"X-Memory": "force", "X-Conversation-Id": "secret"},
        )
    first = upstream.requests[-1].body["messages"][0]
    assert first["role"] == "user"  # no memory block in a conversation switched off


async def test_an_import_by_another_process_is_taken_in_whole_when_the_graph_is_reread(
    upstream: FakeUpstream, make_proxy: MakeProxy, tmp_path: Path, backends: Backends
) -> None:
    """``areamem import --replace`` on a tenant the proxy serves: the proxy notices the new
    generation and reads the graph again, but kept its copies as of snapshots (answers as
    of snapshot 1 came from the memory replaced) and its switched-off conversations."""
    _other_memory(tmp_path, backends, switched_off=("secret",))
    proxy = await make_proxy(proxy_config(
        upstream.url,
        memory={"ingest": False, "retrieval_timeout_ms": 60_000, "formation_workers": 0},
        policy={"rules": [{"type": "always"}], "dream": {"enabled": False}},
    ))
    async with aiohttp.ClientSession() as http:

        async def hits(**params: str) -> str:
            async with http.get(
                proxy.url + "/memory/search", params={"q": "nurse fado", **params}
            ) as response:
                body = await response.text()
                assert response.status == 200, body
                return " ".join(h["text"] for h in json.loads(body)["hits"])

        async with http.post(proxy.url + "/memory/ingest", json=_conversation(
            "c1", "2023-05-08", KATE, ("Katarzyna", "Tom"))) as response:
            assert response.status == 200
        async with http.post(proxy.url + "/memory/dream") as response:
            assert response.status == 200
        assert "nurse" in await hits(as_of="1")
        memory = proxy.services.tenants.get("default")
        cli = MemoryStore(memory.store.path, backends=backends)  # as `areamem import` would
        cli.import_export(tmp_path / "other.zip", replace=True)
        cli.close()
        assert await memory.check_generation()  # what the cycle loop's tick does
        after = await hits(as_of="1")
    assert "fado" in after and "nurse" not in after, after
    assert memory.memory_is_off("secret")
