"""A real ``areamem serve`` process for the tests that start one (start-up, shutdown,
signals, pipes): its config, its banner, its log records, and the waits around it.

Waits are hang guards (the process must answer or end), never timings asserted as figures.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from .conftest import proxy_config

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def serve_config(folder: Path, upstream_url: str, **sections: Any) -> Path:
    """``folder/config.yaml``: every model at ``upstream_url``, data in ``folder/data``, a
    2 s shutdown grace, log lines on stdout and in the file; ``sections`` as in
    :func:`.conftest.proxy_config`, ``server`` merged into the defaults."""
    server = sections.pop("server", {})
    config = proxy_config(upstream_url, **sections)
    config["server"].update({"data_dir": str(folder / "data"), "shutdown_grace_s": 2, **server})
    config["logging"] = {"stdout": True, "file": True}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class Served:
    """One ``areamem serve`` process, its stdout a pipe (its stderr too with
    ``keep_stderr``, else discarded); ``url`` from its banner (:meth:`banner`)."""

    def __init__(self, config: Path, *args: str, keep_stderr: bool = True) -> None:
        self.data = Path(yaml.safe_load(config.read_text())["server"]["data_dir"])
        self.process = subprocess.Popen(
            [sys.executable, "-m", "proxy", "serve", "--config", str(config), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if keep_stderr else subprocess.DEVNULL,
            text=True,
            env=ENV,
            cwd=ROOT,
        )
        self.url = ""

    def banner(self) -> str:
        """Read the first stdout line, the banner, and the URL it names."""
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
        """What the process wrote on stderr, once it has ended (else empty)."""
        if self.process.poll() is None or self.process.stderr is None:
            return ""
        return self.process.stderr.read()

    def records(self) -> list[dict[str, Any]]:
        """The log file's records (none before the file exists)."""
        path = self.data / "logs" / "proxy.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    def wait(self, limit_s: float) -> int:
        """The exit status, within ``limit_s`` or the process is stuck."""
        try:
            return self.process.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running {limit_s} s later: stuck") from None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


async def ready(served: Served) -> list[int]:
    """Poll ``/readyz`` until 200 (at most 60 s); returns the statuses seen."""
    seen: list[int] = []
    async with aiohttp.ClientSession() as http:
        for _ in range(600):
            async with http.get(served.url + "/readyz") as r:
                seen.append(r.status)
                if r.status == 200:
                    return seen
            await asyncio.sleep(0.1)
    raise AssertionError(f"not ready within 60 s: {seen[-3:]}")


async def chat(served: Served, text: str) -> int:
    """One chat completion through ``served``; its status."""
    body = {"model": "echo", "messages": [{"role": "user", "content": text}]}
    async with aiohttp.ClientSession() as http:
        async with http.post(served.url + "/v1/chat/completions", json=body) as r:
            await r.read()
            return r.status
