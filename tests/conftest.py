"""Shared fixtures: a fake OpenAI-compatible upstream and real proxies on loopback.

Everything runs for real: the proxy app on a loopback port with its SQLite files in a
temp folder, the ``openai`` client against it, and the fake upstream (a real aiohttp
server) at the network edge.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml

from memory_core.formation import Backends, FormationConfig, build_backends
from memory_core.formation.config import EncoderConfig
from proxy import build_services, load_config
from proxy.fake_upstream import FakeUpstream
from proxy.server import ProxyServer
from proxy.services import Services

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@dataclass
class Proxy:
    """A running proxy: its URL, config file, data folder and services."""

    url: str
    config_path: Path
    data_dir: Path
    services: Services
    server: ProxyServer

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def client(self, api_key: str = "sk-anything") -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.base_url, api_key=api_key, max_retries=0)

    async def settle(self) -> None:
        """Wait until post-answer work (receipts, ingestion, log lines) is done."""
        await self.services.drain()

    def log_records(self) -> list[dict[str, Any]]:
        path = self.data_dir / "logs" / "proxy.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
async def upstream() -> AsyncIterator[FakeUpstream]:
    server = await FakeUpstream().start()
    yield server
    await server.stop()


def proxy_config(upstream_url: str, **sections: Any) -> dict[str, Any]:
    """A config document pointing every model at ``upstream_url``, with MiniLM as the
    encoder: the session's shared :func:`backends` are MiniLM's, and a formation worker
    process builds its own from this document (with e5, the default, the store would be
    formed again for the other encoder)."""
    config: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": 0, "data_dir": "data"},
        "auth": {"mode": "open"},
        "upstreams": [
            {
                "model": "*",
                "provider": "openai",
                "api_base": upstream_url,
                "timeout_s": 5,
                "connect_timeout_s": 2,
                "advertise": ["echo"],
            }
        ],
        "logging": {"stdout": False, "file": True},
        "formation": {"encoder": {"model": "minilm"}},
        "policy": {
            "rules": [
                {"type": "first_turn"},
                {"type": "pattern", "patterns": ["remember", "last time"]},
            ]
        },
    }
    config.update(sections)
    return config


MakeProxy = Callable[..., Coroutine[Any, Any, Proxy]]


@pytest.fixture
async def make_proxy(tmp_path: Path, backends: Backends) -> AsyncIterator[MakeProxy]:
    started: list[Proxy] = []

    async def start(
        config: dict[str, Any], *, name: str = "proxy", own_backends: bool = False
    ) -> Proxy:
        """A proxy of ``config``; its formation backends are the session's (MiniLM,
        loaded once) unless ``own_backends`` (then built from the config's own
        ``formation:`` section, as ``areamem`` builds them)."""
        folder = tmp_path / name
        folder.mkdir(exist_ok=True)
        config_path = folder / "config.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        loaded = load_config(config_path)
        services = build_services(loaded, backends=None if own_backends else backends)
        server = ProxyServer(services)
        await server.start("127.0.0.1", 0)
        proxy = Proxy(
            f"http://127.0.0.1:{server.port}",
            config_path,
            loaded.server.data_dir,
            services,
            server,
        )
        started.append(proxy)
        for _ in range(1200):  # warm-up done: the first request finds models loaded
            if services.state == "ready":
                break
            await asyncio.sleep(0.05)
        return proxy

    yield start
    for proxy in started:
        await proxy.server.close()


@pytest.fixture
async def proxy(upstream: FakeUpstream, make_proxy: MakeProxy) -> Proxy:
    return await make_proxy(proxy_config(upstream.url))


@pytest.fixture(scope="session")
def backends() -> Backends:
    """The offline formation backends with MiniLM, built once: most tests are about what
    formation and retrieval do, not which encoder, and MiniLM forms about twice as fast.
    The default encoder, e5, is tested by name (``test_e5.py``, ``test_bridge.py``,
    ``test_live_multilingual.py``, ``test_default_encoder.py``)."""
    return build_backends(FormationConfig(encoder=EncoderConfig(model="minilm")))
