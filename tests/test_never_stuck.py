"""The real ``areamem serve`` process never gets stuck (issue 30, item 2).

The proxy runs as a subprocess on a loopback port in front of the in-process fake
upstream; pipes, ports and signals are real. Waits are hang guards (the process must
end), never timings asserted as figures.
"""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from proxy.fake_upstream import FakeUpstream

from .served import Served, chat, ready, serve_config

pytestmark = pytest.mark.e2e

@pytest.fixture
def serve(tmp_path: Path, upstream: FakeUpstream) -> Iterator[Any]:
    started: list[Served] = []

    def start(*args: str, port: int = 0, **config_sections: Any) -> Served:
        config = serve_config(tmp_path, upstream.url, server={"port": port}, **config_sections)
        served = Served(config, *args)
        started.append(served)
        return served

    yield start
    for served in started:
        served.kill()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_a_closed_stdout_neither_stops_the_file_log_nor_the_signals(
    serve: Any, sig: signal.Signals
) -> None:
    """``areamem serve | head -n 1``: every later stdout write fails (EPIPE). The file
    still gets every line, and one signal stops the process (it used to need SIGKILL)."""
    served = serve()
    served.banner()
    served.close_stdout()
    await ready(served)
    for i in range(3):
        assert await chat(served, f"hello {i}") == 200
    served.process.send_signal(sig)
    assert served.wait(30) == 0, served.stderr()
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
        assert served.wait(60) == 1
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
    await ready(served)
    assert await chat(served, "hello") == 200
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
    await ready(served)
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
    await ready(served)
    assert await chat(served, "hello") == 200
    served.process.send_signal(signal.SIGTERM)
    assert served.wait(30) == 0
    assert served.process.stdout is not None
    lines = served.process.stdout.read().splitlines()
    line = next(line for line in lines if " chat " in line)
    shape = r"\d\d:\d\d:\d\d INFO  chat .*tenant=default.*status=200.* \(\d+ ms\)"
    assert re.fullmatch(shape, line), line
    assert not any(line.startswith("{") for line in lines)
    assert "chat" in [r.get("event") for r in served.records()]
