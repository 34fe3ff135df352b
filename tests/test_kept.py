"""kept_when_short (memory_core/text/kept.py): results kept for short texts only, under
hostile calls: the text passed by keyword, many distinct texts, many threads."""

from __future__ import annotations

import datetime as dt
import threading

from memory_core.text.dates import annotate, find
from memory_core.text.kept import kept_when_short
from memory_core.text.words import stem


def test_the_text_may_be_passed_by_keyword() -> None:
    """Before: the wrapper named its first parameter ``text``, so ``stem(word="runs")``
    (what the signature the type checker sees allows) raised TypeError, and
    ``find(text=..., at=...)`` worked only because the names happened to match."""
    assert stem(word="running") == stem("running")
    day = dt.date(2023, 5, 8)
    assert find(text="yesterday", at=day) == find("yesterday", day)
    assert annotate(at=day, text="yesterday") == annotate("yesterday", day)


def test_the_kept_results_stay_bounded_whatever_is_asked() -> None:
    calls: list[str] = []

    @kept_when_short(8, 5)
    def shout(text: str, *, times: int = 1) -> str:
        calls.append(text)
        return text.upper() * times

    for i in range(1_000):
        assert shout(f"w{i % 50}") == f"W{i % 50}"
    assert shout.cache_info().currsize == 8  # type: ignore[attr-defined]
    assert shout(text="abc", times=2) == shout("abc", times=2) == "ABCABC"
    long = "x" * 6
    before = shout.cache_info().currsize  # type: ignore[attr-defined]
    assert shout(long) == shout(text=long) == long.upper()
    assert calls.count(long) == 2 and shout.cache_info().currsize == before  # type: ignore[attr-defined]


def test_threads_get_what_one_thread_gets() -> None:
    @kept_when_short(16, 10)
    def reversed_text(text: str) -> str:
        return text[::-1]

    failures: list[str] = []

    def work(offset: int) -> None:
        for i in range(2_000):
            text = f"t{(i + offset) % 40}"
            if reversed_text(text) != text[::-1]:
                failures.append(text)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == [] and reversed_text.cache_info().currsize == 16  # type: ignore[attr-defined]
