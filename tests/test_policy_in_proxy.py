"""The trigger policy as the proxy applies it: decisions, header, hot reload."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import yaml

from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, Proxy, proxy_config

pytestmark = pytest.mark.e2e


async def _seed(proxy: Proxy) -> None:
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo",
            messages=[{"role": "user", "content": "Our project codename is Kestrel."}],
            extra_headers={"X-Memory": "off"},
        )
        await client.chat.completions.create(
            model="echo",
            messages=[{"role": "user", "content": "The Kestrel launch is on Friday."}],
            extra_headers={"X-Memory": "auto"},
        )
    await proxy.settle()


def _chat_records(proxy: Proxy) -> list[dict[str, object]]:
    return [r for r in proxy.log_records() if r.get("event") == "chat"]


async def test_header_off_skips_memory_and_ingestion(proxy: Proxy, upstream: FakeUpstream) -> None:
    await _seed(proxy)
    records = _chat_records(proxy)
    assert records[0]["decision"] is False and records[0]["reason"] == "header X-Memory: off"
    assert records[0]["ingested"] == 0
    assert records[1]["ingested"] == 2


async def test_rules_header_and_entities(upstream: FakeUpstream, make_proxy: MakeProxy) -> None:
    policy = {"rules": [{"type": "mentions_entity"}, {"type": "every_n_turns", "n": 2}]}
    proxy = await make_proxy(proxy_config(upstream.url, policy=policy))
    await _seed(proxy)
    async with proxy.client() as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="echo", messages=[{"role": "user", "content": "When does Kestrel ship?"}]
        )
        assert raw.headers.get("X-Memory-Receipt")
        raw = await client.chat.completions.with_raw_response.create(
            model="echo", messages=[{"role": "user", "content": "Unrelated: a haiku about rain."}]
        )
        assert raw.headers.get("X-Memory-Receipt") is None
        raw = await client.chat.completions.with_raw_response.create(
            model="echo",
            messages=[
                {"role": "user", "content": "a haiku"},
                {"role": "assistant", "content": "rain falls"},
                {"role": "user", "content": "another"},
            ],
        )
        assert raw.headers.get("X-Memory-Receipt")
        raw = await client.chat.completions.with_raw_response.create(
            model="echo",
            messages=[{"role": "user", "content": "plain question"}],
            extra_headers={"X-Memory": "force"},
        )
        assert raw.headers.get("X-Memory-Receipt")
    await proxy.settle()
    reasons = [str(r["reason"]) for r in _chat_records(proxy)[2:]]
    assert "Kestrel" in reasons[0]
    assert reasons[1] == "no rule matched"
    assert "every_n_turns" in reasons[2]
    assert "force" in reasons[3]
    assert "Kestrel" in upstream.requests[2].body["messages"][0]["content"]


async def test_policy_file_hot_reload(
    upstream: FakeUpstream, make_proxy: MakeProxy, tmp_path: Path
) -> None:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(yaml.safe_dump({"rules": [{"type": "always"}]}))
    proxy = await make_proxy(proxy_config(upstream.url, policy=str(policy_file)))

    async def decision() -> str:
        async with proxy.client() as client:
            await client.chat.completions.create(
                model="echo", messages=[{"role": "user", "content": "anything at all"}]
            )
        await proxy.settle()
        return str(_chat_records(proxy)[-1]["reason"])

    assert "always" in await decision()
    policy_file.write_text("enabled: false\n")
    _bump(policy_file)
    await _until(
        lambda: proxy.services.policies.current.effective("echo", "default").enabled is False
    )
    assert "disabled" in await decision()
    policy_file.write_text("rules:\n  - type: every_n_turns\n    n: zero\n")
    _bump(policy_file)
    await _until(lambda: proxy.services.policies.last_error is not None)
    assert "disabled" in await decision()  # the previous policy is kept
    failures = [r for r in proxy.log_records() if r.get("event") == "policy_reload_failed"]
    assert failures and failures[0]["file"] == str(policy_file) and failures[0]["line"] == 3


async def test_inline_policy_reloads_with_the_config(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await make_proxy(proxy_config(upstream.url, policy={"rules": ["always"]}))
    config = yaml.safe_load(proxy.config_path.read_text())
    config["policy"] = {"enabled": False}
    proxy.config_path.write_text(yaml.safe_dump(config))
    _bump(proxy.config_path)
    await _until(
        lambda: proxy.services.policies.current.effective("echo", "default").enabled is False
    )
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "hi"}]
        )
    await proxy.settle()
    assert _chat_records(proxy)[-1]["decision"] is False


def _bump(path: Path) -> None:
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))


async def _until(condition: object, timeout: float = 5.0) -> None:
    assert callable(condition)
    for _ in range(int(timeout / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached in time")


async def test_the_policy_reads_a_pasted_megabyte_as_retrieval_does(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    """The policy's rules ran over the whole latest message on the event loop: with
    ``mentions_entity`` and ``topic_shift`` (the shipped policy has the first) a pasted
    6 MB message held every request of every tenant for 5 to 12 s. The policy now reads a
    turn as retrieval reads a question (its head and tail, ``question_excerpt``): a name
    at the end of the paste is found, one buried in its middle is not read at all."""
    policy = {"rules": [{"type": "mentions_entity"}, {"type": "topic_shift"}]}
    proxy = await make_proxy(proxy_config(upstream.url, policy=policy))
    await _seed(proxy)
    filler = "lorem ipsum dolor sit amet " * 40_000
    said = {
        "end": filler + "When does Kestrel ship?",
        "middle": filler + " Kestrel " + filler + "the end.",
    }
    async with proxy.client() as client:
        for text in said.values():
            await client.chat.completions.create(
                model="echo",
                messages=[
                    {"role": "user", "content": "lorem ipsum dolor sit amet"},
                    {"role": "assistant", "content": "ok"},
                    {"role": "user", "content": text},
                ],
            )
    await proxy.settle()
    reasons = [str(r["reason"]) for r in _chat_records(proxy)[2:]]
    assert "mentions_entity" in reasons[0] and "Kestrel" in reasons[0]
    assert reasons[1] == "no rule matched"
