"""What formation built, as a person sees it: /memory/entities|contexts|relations and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from .conftest import Proxy

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent

TRANSCRIPT = {
    "conversation_id": "week-1",
    "messages": [
        {
            "role": "user",
            "name": "Rui",
            "content": "I live in Lisbon with my sister Ana.",
            "timestamp": "2024-03-01T10:00:00",
        },
        {
            "role": "assistant",
            "name": "Bot",
            "content": "Lisbon is a lovely city, Rui.",
            "timestamp": "2024-03-01T10:00:05",
        },
        {
            "role": "user",
            "name": "Rui",
            "content": "Actually, I moved to Porto last month.",
            "timestamp": "2024-03-01T10:01:00",
        },
    ],
}


async def _get(proxy: Proxy, path: str, **params: str) -> Any:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}{path}", params=params) as response:
            assert response.status == 200, await response.text()
            return await response.json()


async def _ingest(proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{proxy.url}/memory/ingest", json=TRANSCRIPT) as response:
            assert response.status == 200


async def test_inspection_endpoints(proxy: Proxy) -> None:
    await _ingest(proxy)
    entities = (await _get(proxy, "/memory/entities"))["entities"]
    names = {e["name"] for e in entities}
    assert {"Rui", "Lisbon", "Ana", "Porto"} <= names
    rui = next(e for e in entities if e["name"] == "Rui")
    assert rui["is_speaker"] and rui["label"] == "PER"
    only = (await _get(proxy, "/memory/entities", name="lisbon"))["entities"]
    assert [e["name"] for e in only] == ["Lisbon"]
    contexts = (await _get(proxy, "/memory/contexts"))["contexts"]
    assert contexts and contexts[0]["conversations"] == ["week-1"]
    assert contexts[0]["sample"][0]["text"] == "I live in Lisbon with my sister Ana."
    relations = (await _get(proxy, "/memory/relations", entity="Rui"))["relations"]
    lives = [r for r in relations if r["predicate"] == "lives_in"]
    assert [(r["object"], r["status"], r["mutation"]["kind"]) for r in lives] == [
        ("Lisbon", "superseded", "new"),
        ("Porto", "active", "change"),
    ]
    assert lives[1]["source"]["conversation_id"] == "week-1"
    assert lives[1]["source"]["fragment_text"] == "Actually, I moved to Porto last month."
    assert any(r["predicate"] == "has_sister" and r["object"] == "Ana" for r in relations)


async def test_inspection_cli(proxy: Proxy) -> None:
    await _ingest(proxy)
    await proxy.settle()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "proxy", "memory", *args, "--config", str(proxy.config_path)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env=env,
        )

    relations = cli("relations", "--entity", "Rui", "--json")
    assert relations.returncode == 0, relations.stderr
    rows = json.loads(relations.stdout)
    assert {r["predicate"] for r in rows} >= {"lives_in", "has_sister"}
    table = cli("entities")
    assert table.returncode == 0 and "Lisbon" in table.stdout and "aliases" in table.stdout
    contexts = cli("contexts")
    assert contexts.returncode == 0 and "week-1" in contexts.stdout
    missing = cli("entities", "--tenant", "nobody")
    assert missing.returncode == 1 and "no memory for tenant 'nobody'" in missing.stderr


async def test_area_explain_endpoint(proxy: Proxy) -> None:
    await _ingest(proxy)
    report = await _get(proxy, "/memory/area", q="Where does Rui live now?")
    assert report["query"] == "Where does Rui live now?"
    assert "bm25" in report["foci"] and any(f.startswith("entity:") for f in report["foci"])
    assert report["graph"]["nodes"] > 0 and report["graph_version"] >= 0
    assert {"foci_ms", "pulse_ms", "area_ms", "encode_ms"} <= set(report["timings_ms"])
    area = report["area"]
    assert area is not None and len(area["nodes"]) > 1  # a region, not a single node
    assert set(area["score"]) >= {"coverage", "convergence", "mass", "hub_penalty", "support"}
    assert all(set(node["per_focus"]) == set(report["foci"]) for node in area["nodes"])
    assert report["visited"]["nodes"] > 0
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/memory/area") as response:
            assert response.status == 400
