"""An upstream's URL as the log, the banner and error messages show it: never a key."""

from __future__ import annotations

import pytest

from proxy.upstream.urls import shown_url


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
