"""The real ``areamem serve`` process never gets stuck (issue 30, item 2).

The proxy runs as a subprocess on a loopback port in front of the in-process fake
upstream; pipes, ports and signals are real. Waits are hang guards (the process must
end), never timings asserted as figures.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from proxy.fake_upstream import FakeUpstream

from .conftest import proxy_config

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


class Served:
    """One ``areamem serve`` process, its stdout a pipe; ``url`` from its banner."""

    def __init__(self, config: Path, data: Path, *args: str) -> None:
        self.data = data
        self.process = subprocess.Popen(
            [sys.executable, "-m", "proxy", "serve", "--config", str(config), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
            cwd=ROOT,
        )
        self.url = ""

    def banner(self) -> str:
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        assert "areamem proxy on " in first, first + self.stderr()
        self.url = first.split(" on ", 1)[1].strip().removesuffix("/v1")
        return first

    def close_stdout(self) -> None:
        """As ``| head -n 1`` does once it has its line: the reader goes away."""
        assert self.process.stdout is not None
        self.process.stdout.close()

    def stderr(self) -> str:
        if self.process.poll() is None or self.process.stderr is None:
            return ""
        return self.process.stderr.read()

    def records(self) -> list[dict[str, Any]]:
        path = self.data / "logs" / "proxy.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def serve(tmp_path: Path, upstream: FakeUpstream) -> Iterator[Any]:
    started: list[Served] = []

    def start(*args: str, port: int = 0, **config_sections: Any) -> Served:
        config = proxy_config(upstream.url, **config_sections)
        config["server"].update(
            {"data_dir": str(tmp_path / "data"), "shutdown_grace_s": 2, "port": port}
        )
        config["logging"] = {"stdout": True, "file": True}
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        served = Served(path, tmp_path / "data", *args)
        started.append(served)
        return served

    yield start
    for served in started:
        served.kill()


async def _ready(served: Served) -> None:
    async with aiohttp.ClientSession() as http:
        for _ in range(600):
            async with http.get(served.url + "/readyz") as r:
                if r.status == 200:
                    return
            await asyncio.sleep(0.1)
    raise AssertionError("not ready within 60 s")


async def _chat(served: Served, text: str) -> int:
    body = {"model": "echo", "messages": [{"role": "user", "content": text}]}
    async with aiohttp.ClientSession() as http:
        async with http.post(served.url + "/v1/chat/completions", json=body) as r:
            await r.read()
            return r.status


def _wait(served: Served, limit_s: float) -> int:
    try:
        return served.process.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running {limit_s} s later: stuck") from None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_a_closed_stdout_neither_stops_the_file_log_nor_the_signals(
    serve: Any, sig: signal.Signals
) -> None:
    """``areamem serve | head -n 1``: every later stdout write fails (EPIPE). The file
    still gets every line, and one signal stops the process (it used to need SIGKILL)."""
    served = serve()
    served.banner()
    served.close_stdout()
    await _ready(served)
    for i in range(3):
        assert await _chat(served, f"hello {i}") == 200
    served.process.send_signal(sig)
    assert _wait(served, 30) == 0, served.stderr()
    events = [r.get("event") for r in served.records()]
    assert events.count("chat") == 3
    assert events.count("stdout_closed") == 1
    assert events.index("ready") < events.index("shutdown")
    assert "BrokenPipeError" not in served.stderr()


async def test_a_busy_port_fails_at_once_naming_it(serve: Any) -> None:
    """A second instance on a port another process holds used to log ``ready`` and die
    about 11 s later; it must fail before any start-up work, saying which port."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        began = time.monotonic()
        served = serve(port=port)
        assert _wait(served, 60) == 1
        elapsed = time.monotonic() - began
        assert served.process.stdout is not None
        out, err = served.process.stdout.read(), served.stderr()
    assert f"127.0.0.1:{port}" in err and "in use" in err, err
    assert "areamem proxy on" not in out
    assert served.records() == []  # nothing started: no ready, no shutdown to wait for
    assert elapsed < 30  # a hang guard: no model was loaded, nothing waited for a grace


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_an_unreachable_upstream_is_warned_at_start_and_the_proxy_still_serves(
    serve: Any, upstream: FakeUpstream
) -> None:
    """``make run`` with no model server used to say nothing until the first chat's 502."""
    down = f"http://127.0.0.1:{_free_port()}/v1"
    served = serve(
        upstreams=[
            {"model": "down-*", "provider": "openai", "api_base": down, "connect_timeout_s": 2},
            {"model": "*", "provider": "openai", "api_base": upstream.url, "timeout_s": 5},
        ]
    )
    served.banner()
    assert served.process.stdout is not None
    banner = "".join(served.process.stdout.readline() for _ in range(6))
    assert "inspector: http://127.0.0.1:" in banner
    await _ready(served)
    assert await _chat(served, "hello") == 200
    async with aiohttp.ClientSession() as http:
        async with http.get(served.url + "/v1/models") as r:
            listed = [m["id"] for m in (await r.json())["data"]]
    for _ in range(100):  # the check runs beside start-up: wait for its lines
        events = {r.get("event"): r for r in served.records()}
        if "upstream_unreachable" in events and "upstream_ok" in events:
            break
        await asyncio.sleep(0.1)
    assert events["upstream_unreachable"]["url"] == down + "/models"
    assert events["upstream_ok"]["models"] == 1
    assert listed == ["echo"]  # the stock "*" route with no advertise: what its upstream lists


async def test_a_browser_at_the_root_is_sent_to_the_inspector(serve: Any) -> None:
    served = serve()
    served.banner()
    await _ready(served)
    browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    async with aiohttp.ClientSession() as http:
        for path in ("/", "/v1", "/v1/"):
            async with http.get(served.url + path, headers=browser, allow_redirects=False) as r:
                assert (r.status, r.headers.get("Location")) == (302, "/ui"), path
        async with http.get(served.url + "/ui/", headers=browser, allow_redirects=False) as r:
            assert r.status == 200 and "text/html" in r.headers["Content-Type"]  # the page
        async with http.get(served.url + "/", headers={"Accept": "application/json"}) as r:
            assert r.status == 404 and (await r.json())["error"]["code"] == "not_found"
        async with http.get(served.url + "/v1/models", headers=browser) as r:
            assert r.status == 200 and (await r.json())["object"] == "list"
        async with http.get(served.url + "/", headers=browser) as r:
            assert r.status == 200 and "text/html" in r.headers["Content-Type"]


async def test_text_log_lines_on_stdout_beside_the_json_file(serve: Any) -> None:
    """``--log-format text``: a short line a person reads; the file stays JSON lines."""
    served = serve("--log-format", "text")
    served.banner()
    await _ready(served)
    assert await _chat(served, "hello") == 200
    served.process.send_signal(signal.SIGTERM)
    assert _wait(served, 30) == 0
    assert served.process.stdout is not None
    lines = served.process.stdout.read().splitlines()
    chat = next(line for line in lines if " chat " in line)
    shape = r"\d\d:\d\d:\d\d INFO  chat .*tenant=default.*status=200.* \(\d+ ms\)"
    assert re.fullmatch(shape, chat), chat
    assert not any(line.startswith("{") for line in lines)
    assert "chat" in [r.get("event") for r in served.records()]
