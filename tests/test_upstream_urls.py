"""An upstream's URL as the log, the banner and error messages show it: never a key."""

from __future__ import annotations

import pytest

from proxy.upstream.fast import _request_path
from proxy.upstream.urls import endpoint_url, shown_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1"),
        ("https://user:sk-secret@api.example.com/v1", "https://api.example.com/v1"),
        ("https://sk-alone@api.example.com/v1", "https://api.example.com/v1"),
        ("https://x.azure.com/openai?api-version=1&api-key=SECRET", "https://x.azure.com/openai?..."),
        ("http://[::1]:8000/v1", "http://[::1]:8000/v1"),
        ("http://host:99999/v1", "<an unreadable URL>"),
        ("", ""),
    ],
)
def test_a_url_is_shown_without_its_credentials_or_query(url: str, shown: str) -> None:
    assert shown_url(url) == shown


@pytest.mark.parametrize(
    ("base", "url", "target"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1/chat/completions",
         "/v1/chat/completions"),
        ("https://x.azure.com/openai/deployments/d/?api-version=1",
         "https://x.azure.com/openai/deployments/d/chat/completions?api-version=1",
         "/openai/deployments/d/chat/completions?api-version=1"),
        ("http://host", "http://host/chat/completions", "/chat/completions"),
        ("http://host/my path?q=a b", "http://host/my path/chat/completions?q=a b",
         "/my%20path/chat/completions?q=a%20b"),
    ],
)  # fmt: skip
def test_an_endpoint_goes_under_the_path_and_before_the_query(
    base: str, url: str, target: str
) -> None:
    assert endpoint_url(base, "chat/completions") == url
    assert _request_path(url) == target
