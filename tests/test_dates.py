"""Time expressions resolved against the turn's date (memory_core.text.dates), kept beside
the fragment, found by the absolute date, shown with it, and a question's time words as
what retrieval favours."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core import LogMessage, MemoryStore
from memory_core.formation import Backends
from memory_core.reconstruction.evidence import Claim, Evidence, Statement
from memory_core.reconstruction.render import reconstruct
from memory_core.retrieval.bm25 import Hit
from memory_core.storage.db import connect, transaction
from memory_core.storage.tables import dates as date_rows
from memory_core.text.dates import _KEYWORDS, Span, _scan, annotate, find, label
from memory_core.text.question import MAX_TIMES, Question, times_of
from memory_core.text.tokens import counter_for

from .kept import kept

MON_8_MAY_2023 = dt.date(2023, 5, 8)
T0 = 1_683_504_000.0 + 3_600  # 8 May 2023, 01:00 UTC
DAY = 86_400.0


def _resolved(text: str, at: dt.date = MON_8_MAY_2023) -> list[tuple[str, str]]:
    return [(e.words, label(e.span)) for e in find(text, at)]


def _only(text: str, at: dt.date = MON_8_MAY_2023) -> Span:
    found = find(text, at)
    assert len(found) == 1, (text, found)
    return found[0].span


def _day(y: int, m: int, d: int) -> Span:
    return Span(dt.date(y, m, d), dt.date(y, m, d), "day")


RELATIVE = [
        # English
        ("yesterday", (2023, 5, 7), (2023, 5, 7), "day"),
        ("today", (2023, 5, 8), (2023, 5, 8), "day"),
        ("tonight", (2023, 5, 8), (2023, 5, 8), "day"),
        ("this morning", (2023, 5, 8), (2023, 5, 8), "day"),
        ("tomorrow", (2023, 5, 9), (2023, 5, 9), "day"),
        ("the day before yesterday", (2023, 5, 6), (2023, 5, 6), "day"),
        ("last week", (2023, 5, 1), (2023, 5, 7), "week"),
        ("this week", (2023, 5, 8), (2023, 5, 14), "week"),
        ("next week", (2023, 5, 15), (2023, 5, 21), "week"),
        ("last weekend", (2023, 5, 6), (2023, 5, 7), "weekend"),
        ("this weekend", (2023, 5, 13), (2023, 5, 14), "weekend"),
        ("last month", (2023, 4, 1), (2023, 4, 30), "month"),
        ("next month", (2023, 6, 1), (2023, 6, 30), "month"),
        ("last year", (2022, 1, 1), (2022, 12, 31), "year"),
        ("next year", (2024, 1, 1), (2024, 12, 31), "year"),
        ("3 days ago", (2023, 5, 5), (2023, 5, 5), "day"),
        ("two weeks ago", (2023, 4, 24), (2023, 4, 30), "week"),
        ("a week ago", (2023, 5, 1), (2023, 5, 7), "week"),
        ("two months ago", (2023, 3, 1), (2023, 3, 31), "month"),
        ("4 years ago", (2019, 1, 1), (2019, 12, 31), "year"),
        ("in 10 days", (2023, 5, 18), (2023, 5, 18), "day"),
        ("last Friday", (2023, 5, 5), (2023, 5, 5), "day"),
        ("next Monday", (2023, 5, 15), (2023, 5, 15), "day"),
        ("this Friday", (2023, 5, 12), (2023, 5, 12), "day"),
        ("in May", (2023, 5, 1), (2023, 5, 31), "month"),
        ("last May", (2022, 5, 1), (2022, 5, 31), "month"),
        ("next May", (2024, 5, 1), (2024, 5, 31), "month"),
        # Portuguese
        ("ontem", (2023, 5, 7), (2023, 5, 7), "day"),
        ("hoje", (2023, 5, 8), (2023, 5, 8), "day"),
        ("amanhã", (2023, 5, 9), (2023, 5, 9), "day"),
        ("anteontem", (2023, 5, 6), (2023, 5, 6), "day"),
        ("na semana passada", (2023, 5, 1), (2023, 5, 7), "week"),
        ("na próxima semana", (2023, 5, 15), (2023, 5, 21), "week"),
        ("mês passado", (2023, 4, 1), (2023, 4, 30), "month"),
        ("no mês que vem", (2023, 6, 1), (2023, 6, 30), "month"),
        ("ano passado", (2022, 1, 1), (2022, 12, 31), "year"),
        ("há dois dias", (2023, 5, 6), (2023, 5, 6), "day"),
        ("há duas semanas", (2023, 4, 24), (2023, 4, 30), "week"),
        ("daqui a três semanas", (2023, 5, 29), (2023, 6, 4), "week"),
        ("sexta passada", (2023, 5, 5), (2023, 5, 5), "day"),
        ("na sexta-feira passada", (2023, 5, 5), (2023, 5, 5), "day"),
        ("em maio", (2023, 5, 1), (2023, 5, 31), "month"),
        # Spanish
        ("ayer", (2023, 5, 7), (2023, 5, 7), "day"),
        ("hoy", (2023, 5, 8), (2023, 5, 8), "day"),
        ("mañana", (2023, 5, 9), (2023, 5, 9), "day"),
        ("anteayer", (2023, 5, 6), (2023, 5, 6), "day"),
        ("la semana pasada", (2023, 5, 1), (2023, 5, 7), "week"),
        ("la próxima semana", (2023, 5, 15), (2023, 5, 21), "week"),
        ("el mes pasado", (2023, 4, 1), (2023, 4, 30), "month"),
        ("el mes que viene", (2023, 6, 1), (2023, 6, 30), "month"),
        ("el año pasado", (2022, 1, 1), (2022, 12, 31), "year"),
        ("hace dos días", (2023, 5, 6), (2023, 5, 6), "day"),
        ("dentro de tres semanas", (2023, 5, 29), (2023, 6, 4), "week"),
        ("el viernes pasado", (2023, 5, 5), (2023, 5, 5), "day"),
        ("el lunes que viene", (2023, 5, 15), (2023, 5, 15), "day"),
        ("en mayo", (2023, 5, 1), (2023, 5, 31), "month"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "first", "last", "granularity"), RELATIVE)
def test_relative_expressions_resolve_against_the_turns_day(
    text: str, first: tuple[int, int, int], last: tuple[int, int, int], granularity: str
) -> None:
    span = _only(f"Well, {text}, you know.")
    expected = (dt.date(*first), dt.date(*last), granularity)
    assert (span.first, span.last, span.granularity) == expected


def test_a_few_days_ago_is_an_approximate_range() -> None:
    span = _only("I saw her a few days ago")
    assert span == Span(dt.date(2023, 5, 3), dt.date(2023, 5, 6), "day", approximate=True)
    assert label(span) == "about 3-6 May 2023"


def test_month_and_year_boundaries_and_leap_years() -> None:
    assert _only("yesterday", dt.date(2024, 3, 1)) == _day(2024, 2, 29)  # leap year
    assert _only("yesterday", dt.date(2023, 3, 1)) == _day(2023, 2, 28)
    assert _only("tomorrow", dt.date(2023, 12, 31)) == _day(2024, 1, 1)
    assert _only("last month", dt.date(2023, 1, 15)).first == dt.date(2022, 12, 1)
    assert _only("el mes que viene", dt.date(2023, 12, 2)).last == dt.date(2024, 1, 31)
    assert _only("last month", dt.date(2024, 3, 31)).last == dt.date(2024, 2, 29)
    assert _only("last week", dt.date(2023, 1, 2)) == Span(
        dt.date(2022, 12, 26), dt.date(2023, 1, 1), "week"
    )
    assert _only("in May", dt.date(2023, 12, 1)).first == dt.date(2023, 5, 1)
    assert _only("last May", dt.date(2023, 5, 20)).first == dt.date(2022, 5, 1)
    assert _only("last May", dt.date(2023, 6, 1)).first == dt.date(2023, 5, 1)


def test_weekday_arithmetic_is_strictly_before_or_after_the_turns_day() -> None:
    friday = dt.date(2023, 5, 12)
    assert _only("last Friday", friday) == _day(2023, 5, 5)
    assert _only("next Friday", friday) == _day(2023, 5, 19)
    assert _only("last Saturday", friday) == _day(2023, 5, 6)
    assert _only("el próximo domingo", friday) == _day(2023, 5, 14)
    sunday = dt.date(2023, 5, 14)
    assert _only("this weekend", sunday) == Span(dt.date(2023, 5, 13), sunday, "weekend")
    assert _only("last weekend", sunday).first == dt.date(2023, 5, 6)


def test_dates_written_out_are_read_and_not_relative() -> None:
    assert _resolved("On 7 May 2023 and May 7, 2023 and 7 de maio de 2023") == [
        ("7 May 2023", "7 May 2023"),
        ("May 7, 2023", "7 May 2023"),
        ("7 de maio de 2023", "7 May 2023"),
    ]
    assert _resolved("What happened in December 2023?") == [("December 2023", "December 2023")]
    assert _resolved("It was May 7") == [("May 7", "7 May 2023")]
    assert all(not e.relative for e in find("in 2023, on 1 February, 2023", MON_8_MAY_2023))


def test_unknown_or_ambiguous_expressions_are_left_alone() -> None:
    for text in (
        "I may 2 go",  # the verb
        "on Friday we met",  # which Friday?
        "soon, recently, one day, some time",
        "in the morning, por la mañana",
        "10000 years ago",
        "in 999999999999 days",
        "9999 years from now",
        "in 100001 days",
    ):
        assert find(text, MON_8_MAY_2023) == (), text
    # no such day: only the month it names is read
    assert _resolved("31 April 2023") == [("April 2023", "April 2023")]


def test_manana_is_tomorrow_only_where_it_means_tomorrow() -> None:
    """Before: "mañana por la mañana" / "por la tarde" (tomorrow morning, afternoon) named
    no day (a "mañana" followed by "por" was refused), while "cada mañana" (every
    morning) and "una mañana" (one morning) were read as tomorrow."""
    assert _resolved("Mañana por la mañana voy al médico") == [("Mañana", "9 May 2023")]
    assert _resolved("mañana por la tarde") == [("mañana", "9 May 2023")]
    for text in ("Cada mañana corro", "una mañana de abril", "otra mañana", "a media mañana"):
        assert find(text, MON_8_MAY_2023) == (), text


def test_the_longest_expression_wins() -> None:
    assert _resolved("the day before yesterday") == [("the day before yesterday", "6 May 2023")]
    assert _resolved("pasado mañana") == [("pasado mañana", "10 May 2023")]


@pytest.mark.parametrize(
    ("text", "words", "meant"),
    [
        ("last May 2023", "May 2023", "May 2023"),
        ("next January 2026", "January 2026", "January 2026"),
        ("previous May, 2021", "May, 2021", "May 2021"),
        ("coming March of 2027", "March of 2027", "March 2027"),
        ("next May 7, 2026", "May 7, 2026", "7 May 2026"),
        ("last May 7", "May 7", "7 May 2024"),
    ],
)
def test_a_named_month_with_its_year_or_day_written_is_not_shifted(
    text: str, words: str, meant: str
) -> None:
    """Before: "last May 2023" said on 1 June 2024 meant May 2024 ("last May" and "May
    2023" are as long; the first won), and the block showed "next January (January
    2025) 2026". As "in May" already does, "last May" / "next May" before a year or a day
    is no relative expression: the month written out wins."""
    said = dt.date(2024, 6, 1)
    assert [(e.words, label(e.span)) for e in find(text, said)] == [(words, meant)]
    assert annotate(text, said) == text


@pytest.mark.parametrize(
    "text",
    [
        "the last week of May I was in Rome",
        "I travel the last weekend of June",
        "the last year of school was hard",
        "the next week of camp is in July",
        "this week of the course was easy",
    ],
)
def test_the_last_week_of_something_is_no_relative_week(text: str) -> None:
    """Before: "the last week of May" said on 12 June 2024 was stored and shown as "the
    last week (3-9 June) of May": "of" makes the period a part of what follows (the
    final week of May), not the week before the turn's."""
    said = dt.date(2024, 6, 12)
    assert [e for e in find(text, said) if e.span.granularity in ("week", "weekend", "year")] == []
    assert annotate(text, said) == text


def test_a_datetime_as_the_turns_day_gives_spans_of_dates() -> None:
    """A datetime is a date to the type checker: before, "yesterday" against 8 May 2023
    15:30 was the span 7 May 2023 15:30 to 15:30 (datetimes, whose ISO form
    "2023-05-07T15:30:00" compares after the stored day "2023-05-07", so the question's
    span missed it), while "last month" gave dates."""
    at = dt.datetime(2023, 5, 8, 15, 30)
    for text in ("yesterday", "last week", "a few days ago", "in 3 days", "next Friday"):
        (expression,) = find(text, at)
        assert expression.span == _only(text), text
        assert type(expression.span.first) is type(expression.span.last) is dt.date
    assert [s.first for s in times_of("What did I do yesterday?", at)] == [dt.date(2023, 5, 7)]
    assert annotate("today and yesterday", at) == "today and yesterday (7 May)"


def test_annotate_puts_the_absolute_date_beside_the_words() -> None:
    text = "I adopted a puppy yesterday, today is calm, last week was busy; see you in May."
    assert annotate(text, MON_8_MAY_2023) == (
        "I adopted a puppy yesterday (7 May), today is calm, last week (1-7 May) was busy;"
        " see you in May."
    )
    assert annotate("ontem", dt.date(2024, 1, 1)) == "ontem (31 December 2023)"
    assert annotate("yesterday", None) == "yesterday"
    assert annotate("On 7 May 2023", MON_8_MAY_2023) == "On 7 May 2023"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [*"0123456789 ,-ºáãñé", "days ago", "weeks ", "in ", "há ", "hace ", "May ",
             "maio ", "de ", "last ", "next ", "Friday", "sexta", "year", "ago", "yesterday",
             "semana passada", "😀", "\u0301", "99999999", "10000 "]
        ),
        max_size=30,
    ).map("".join),
    st.dates(min_value=dt.date(1, 1, 1), max_value=dt.date(9999, 12, 31)),
)
def test_odd_inputs_never_crash_and_spans_are_valid(text: str, at: dt.date) -> None:
    for expression in find(text, at):
        span = expression.span
        assert span.first <= span.last
        assert text[expression.start : expression.end] == expression.words
        assert label(span)
    annotate(text, at)


WRITTEN = [
    "7 May 2023", "May 7, 2023", "7th of May, 2023", "7 de maio de 2023", "7 May", "May 7",
    "7 de mayo", "May 2023", "maio de 2023", "in 2022", "em 2022", "during 1999",
    "segunda-feira passada", "na próxima sexta", "el martes que viene", "this Sunday",
    "nesta quarta", "last weekend", "o fim de semana passado", "el fin de semana que viene",
    "esta noche", "hoje de manhã", "ontem à noite", "last night", "this evening", "antier",
    "anteontem", "depois de amanhã", "mañana", "a few days ago", "há uns dias",
    "hace unos días", "alguns dias atrás", "in a couple of weeks", "daqui a dois meses",
    "três anos atrás", "last December", "dezembro passado", "next March", "marzo que viene",
    "during July", "durante agosto",
]  # fmt: skip
"""Written-out dates and one expression of each other kind of rule."""

_ODD = ["\u0131", "\u0130", "\u017f", "\u212a", "K", "_", "-", "º", "\u0301", "ß", "Σ", "😀",
        "\n", "1", "19", "2023", "99999", ",", ".", "  "]  # fmt: skip


@pytest.mark.parametrize("text", [t for t, *_ in RELATIVE] + WRITTEN)
def test_every_expression_holds_a_keyword_so_the_search_for_one_misses_none(text: str) -> None:
    odd = text.replace("s", "\u017f").replace("i", "\u0131").replace("k", "\u212a")  # re.I: s, i, k
    for said in (text, f"Well, {text}, you know.", text.upper(), f"_{text}", f"{text}x", odd):
        assert find(said, MON_8_MAY_2023) == _scan(said, MON_8_MAY_2023)
        for expression in _scan(said, MON_8_MAY_2023):
            assert _KEYWORDS.search(expression.words), expression
    assert _scan(text, MON_8_MAY_2023), text


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [w for t in [*(t for t, *_ in RELATIVE), *WRITTEN] for w in t.split()] + _ODD
        ),
        max_size=12,
    ).map(" ".join),
    st.lists(st.sampled_from(["", " ", "_", "x", "\u0131", "\u017f"]), min_size=1, max_size=3),
)
def test_find_equals_every_pattern_tried(words: str, glue: list[str]) -> None:
    """Words of every rule, glued oddly (inside words, letters that match others under
    IGNORECASE): the keyword search never makes :func:`find` miss what the patterns find."""
    text = glue[0].join(words.split(" ")) if len(glue) == 1 else words + glue[-1]
    assert find(text, MON_8_MAY_2023) == _scan(text, MON_8_MAY_2023)
    assert find(text.upper(), MON_8_MAY_2023) == _scan(text.upper(), MON_8_MAY_2023)


def test_look_alike_letters_matched_under_ignorecase_are_left_alone() -> None:
    """"\u0131" and "\u017f" match "i" and "s" in a case-blind pattern but name no weekday or unit:
    such an expression is no date (it used to raise KeyError, failing formation)."""
    assert find("last fr\u0131day", MON_8_MAY_2023) == ()
    assert find("3 day\u017f ago", MON_8_MAY_2023) == ()
    assert annotate("I saw it last fr\u0131day and 3 day\u017f ago", MON_8_MAY_2023).endswith("ago")


def test_the_edges_of_the_calendar_are_left_alone() -> None:
    assert find("tomorrow", dt.date(9999, 12, 31)) == ()
    assert find("yesterday", dt.date(1, 1, 1)) == ()
    assert find("next year", dt.date(9999, 6, 1)) == ()
    assert _only("last year", dt.date(2, 6, 1)).first == dt.date(1, 1, 1)


def test_a_questions_time_words_are_its_times() -> None:
    asked = dt.date(2024, 2, 10)
    assert times_of("What did she do last year?", asked) == (
        Span(dt.date(2023, 1, 1), dt.date(2023, 12, 31), "year"),
    )
    assert times_of("O que ela fez em maio?", asked)[0].first == dt.date(2024, 5, 1)
    assert times_of("¿Qué hizo el año pasado?", asked)[0].first == dt.date(2023, 1, 1)
    question = Question.of("What did Ana do on 7 May 2023?", at=asked)
    assert question.times == (_day(2023, 5, 7),)
    # asked at no known day: only what is written out with its year
    assert times_of("What did Ana do yesterday, on 7 May 2023, and in May?", None) == (
        _day(2023, 5, 7),
    )
    assert Question.of("What did Ana do?").times == ()


def _say(store: MemoryStore, *turns: tuple[str, float]) -> None:
    messages = []
    for text, ts in turns:
        messages.append(LogMessage({"role": "user", "name": "Ana", "content": text}, ts))
        messages.append(LogMessage({"role": "assistant", "content": "I see."}, ts + 1))
    store.append(messages, conversation="c1", source="ingest")
    store.form_all()


@pytest.fixture
def store(tmp_path: Path, backends: Backends) -> MemoryStore:
    memory = MemoryStore(tmp_path / "m.db", backends=backends)
    _say(
        memory,
        ("I adopted a puppy named Biscuit yesterday.", T0),
        ("We went hiking in the mountains, it was lovely.", T0 + 10),
        ("My sister visited Lisbon and loved the tiles.", T0 + 40 * DAY),
        ("I bought a new guitar and practise every evening.", T0 + 40 * DAY + 10),
        ("Ontem fui ao mercado comprar peixe.", T0 + 41 * DAY),
    )
    return memory


def _date_terms(store: MemoryStore, question: str, asked_at: float) -> dict[str, float]:
    recall = store.recall_area(question, limit=20, budget_tokens=3000, asked_at=asked_at)
    assert recall.area is not None
    texts = {h.fragment_id: h.text for h in recall.hits}
    return {
        texts[f["id"]]: f["terms"]["date"] for f in recall.area["fragments"] if f["id"] in texts
    }


def test_formation_keeps_the_expressions_beside_the_unchanged_words(store: MemoryStore) -> None:
    recall = store.recall_area("puppy Biscuit", limit=1, budget_tokens=300)
    hit = recall.hits[0]
    assert hit.text == "I adopted a puppy named Biscuit yesterday."
    with store.lookup() as conn:
        assert date_rows.expressions_of(conn, hit.fragment_id) == [
            ("yesterday", "2023-05-07", "2023-05-07", "day")
        ]


def test_the_candidates_matching_several_spans_are_those_matching_each(
    store: MemoryStore,
) -> None:
    """One statement for every span of a question: the union of what each span matches
    (said on a day of it, or speaking of one)."""
    day = dt.date(2023, 5, 7)
    spans = [
        date_rows.Days(day, day),  # "yesterday" of the first turn
        date_rows.Days(dt.date(2023, 6, 17), dt.date(2023, 6, 17)),  # said 40 days later
        date_rows.Days(dt.date(2020, 1, 1), dt.date(2020, 12, 31)),  # nothing
    ]
    with store.lookup() as conn:
        ids = [int(row[0]) for row in conn.execute("SELECT id FROM fragments")]
        each = [date_rows.matching(conn, ids, [span]) for span in spans]
        assert date_rows.matching(conn, ids, spans) == set().union(*each)
        assert each[0] and each[1] and not each[2]
        assert date_rows.matching(conn, ids[:1], spans) <= {ids[0]}


@pytest.mark.parametrize("question", ["7 May 2023", "May 7", "in May 2023"])
def test_a_fragment_saying_yesterday_is_found_by_the_absolute_date(
    store: MemoryStore, question: str
) -> None:
    terms = _date_terms(store, f"What happened {question}?", T0 + 50 * DAY)
    assert terms["I adopted a puppy named Biscuit yesterday."] == 1.0
    assert terms.get("My sister visited Lisbon and loved the tiles.", 0.0) == 0.0


def test_a_short_span_brings_the_fragments_said_within_it(store: MemoryStore) -> None:
    terms = _date_terms(store, "What did Ana talk about on 17 June 2023?", T0 + 60 * DAY)
    assert terms["My sister visited Lisbon and loved the tiles."] == 1.0
    assert terms["I adopted a puppy named Biscuit yesterday."] == 0.0


def test_a_questions_relative_time_words_are_resolved_when_asked(store: MemoryStore) -> None:
    terms = _date_terms(store, "What did Ana do last month?", T0 + 55 * DAY)  # 2 July 2023
    assert terms["My sister visited Lisbon and loved the tiles."] == 1.0  # said 17 June
    assert terms["I adopted a puppy named Biscuit yesterday."] == 0.0  # 7 May
    portuguese = _date_terms(store, "O que a Ana fez em maio?", T0 + 55 * DAY)
    assert portuguese["I adopted a puppy named Biscuit yesterday."] == 1.0


def test_the_block_shows_the_absolute_date_beside_relative_words(store: MemoryStore) -> None:
    recall = store.recall_area("What did Ana adopt, the puppy?", limit=2, budget_tokens=300)
    assert "I adopted a puppy named Biscuit yesterday (7 May)." in recall.context.text
    market = store.recall_area("mercado peixe", limit=1, budget_tokens=300)
    assert "Ontem (17 June) fui ao mercado" in market.context.text


def test_a_statement_with_relative_words_shows_the_absolute_date() -> None:
    hit = Hit(1, 1.0, "Ana moved to Porto last month.", "user", "Ana", "c1", T0, "h1", None)
    claim = Claim("Ana moved to Porto last month", (7,), (1,))
    block = reconstruct(
        [hit],
        budget_tokens=300,
        counter=counter_for("gpt-4o"),
        question=Question.of("Where did Ana move?"),
        evidence=Evidence((Statement("fact", (claim,), 0),)),
    )
    assert "- Ana moved to Porto last month (April) [1]" in block.text
    assert "[1] Ana: Ana moved to Porto last month (April)." in block.text


def test_a_store_formed_before_the_dates_were_kept_gets_them_when_opened(
    tmp_path: Path, backends: Backends
) -> None:
    path = tmp_path / "old.db"
    store = MemoryStore(path, backends=backends)
    _say(store, ("I adopted a puppy named Biscuit yesterday.", T0), ("No dates here.", T0 + 5))
    store.close()
    conn = connect(path)  # as a store of before migration 013 was
    with transaction(conn, journal=False):
        conn.execute("DROP TABLE fragment_dates; DROP INDEX fragments_ts")
        conn.execute("DELETE FROM migrations WHERE name = '013_fragment_dates'")
    conn.close()
    again = MemoryStore(path, backends=backends)
    hit = again.recall_area("puppy Biscuit", limit=1, budget_tokens=300).hits[0]
    with again.lookup() as reader:
        assert date_rows.expressions_of(reader, hit.fragment_id) == [
            ("yesterday", "2023-05-07", "2023-05-07", "day")
        ]
    again.close()


def _as_before_migration_013(path: Path) -> None:
    """The store at ``path`` as one formed before its fragments' expressions were kept."""
    conn = connect(path)
    with transaction(conn, journal=False):
        conn.execute("DROP TABLE fragment_dates; DROP INDEX fragments_ts")
        conn.execute("DELETE FROM migrations WHERE name = '013_fragment_dates'")
    conn.close()


def _dated(store: MemoryStore) -> dict[str, list[str]]:
    """Each fragment's text -> the words of its kept expressions."""
    with store.lookup() as reader:
        ids = [(int(i), str(t)) for i, t in reader.execute("SELECT id, text FROM fragments")]
        return {t: [e[0] for e in date_rows.expressions_of(reader, i)] for i, t in ids}


_DATED_TURNS = (
    ("I adopted a puppy named Biscuit yesterday.", T0),
    ("We went hiking last week.", T0 + 5),
    ("My sister visits next month.", T0 + 10),
    ("No dates here.", T0 + 15),
)


def test_a_backfill_stopped_partway_resumes_at_the_next_open(
    tmp_path: Path, backends: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dating of fragments formed before migration 013 ran only in the open that
    applied it: a kill after its first batch left every later fragment undated for good
    (a fragment without expressions looks like one that has none). Where it got to is
    now kept with each batch, and the next open goes on from there."""
    path = tmp_path / "old.db"
    store = MemoryStore(path, backends=backends)
    _say(store, *_DATED_TURNS)
    expected = _dated(store)
    store.close()
    _as_before_migration_013(path)
    monkeypatch.setattr("memory_core.formation.dates._BATCH", 1)
    kept = date_rows.insert
    calls = 0

    def killed_after_the_first_batch(conn: object, fragment_id: int, rows: object) -> None:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise RuntimeError("killed")
        kept(conn, fragment_id, rows)  # type: ignore[arg-type]

    monkeypatch.setattr(date_rows, "insert", killed_after_the_first_batch)
    with pytest.raises(RuntimeError, match="killed"):
        MemoryStore(path, backends=backends)
    conn = connect(path)
    least = conn.execute("SELECT min(id) FROM fragments").fetchone()
    assert least is not None
    first = int(least[0])
    assert date_rows.backfill_after(conn) == first  # the first batch committed with its place
    dated = conn.execute("SELECT count(DISTINCT fragment_id) FROM fragment_dates").fetchone()
    assert dated is not None and dated[0] == 1
    conn.close()
    monkeypatch.setattr(date_rows, "insert", kept)
    again = MemoryStore(path, backends=backends)
    assert _dated(again) == expected
    assert sum(map(bool, expected.values())) == 3
    with again.lookup() as reader:
        assert date_rows.backfill_after(reader) is None  # done: no open reads them again
    again.close()


def test_a_store_migrated_before_the_backfill_kept_its_place_is_dated_once_more(
    tmp_path: Path, backends: Backends
) -> None:
    """A store that passed migration 013 before migration 014 (where the backfill may have
    been cut short) has its undated fragments read once more at its next open."""
    path = tmp_path / "m.db"
    store = MemoryStore(path, backends=backends)
    _say(store, *_DATED_TURNS)
    expected = _dated(store)
    store.close()
    conn = connect(path)
    with transaction(conn, journal=False):
        conn.execute("DELETE FROM fragment_dates")
        conn.execute("DROP TABLE date_backfill")
        conn.execute("DELETE FROM migrations WHERE name = '014_date_backfill'")
    conn.close()
    again = MemoryStore(path, backends=backends)
    assert _dated(again) == expected and any(expected.values())
    again.close()


def test_only_the_first_characters_of_a_huge_text_are_read() -> None:
    assert find("x" * 20_000 + " yesterday", MON_8_MAY_2023) == ()
    crowded = find("hoy " * 5_000, MON_8_MAY_2023)
    assert len(crowded) == 5_000 and all(e.words == "hoy" for e in crowded)


def test_a_question_naming_many_times_reads_a_few() -> None:
    pasted = " ".join(f"on {d} May 2023," for d in range(1, 29))
    assert len(Question.of(pasted, at=MON_8_MAY_2023).times) == MAX_TIMES


def test_only_short_texts_are_kept_so_big_ones_cannot_fill_memory() -> None:
    """A turn or a sentence (at most 1,000 characters) is kept with its expressions and
    its annotation; a longer text is read every time and kept nowhere: 4,096 distinct
    megabyte messages formed, or as many 32,000-character lines shown, stay unkept."""
    short = "I adopted a puppy yesterday and we walk every morning."
    kept_find, kept_annotate = kept(find).cache_info(), kept(annotate).cache_info()
    for i in range(40):
        long = f"Entry {i}: " + "I adopted a puppy yesterday. " * 2_000  # ~58,000 characters
        assert annotate(long, MON_8_MAY_2023).startswith(
            f"Entry {i}: I adopted a puppy yesterday (7 May)."
        )
        assert find(long, MON_8_MAY_2023)  # read up to its first 20,000 characters
    assert kept(find).cache_info().currsize == kept_find.currsize
    assert kept(annotate).cache_info().currsize == kept_annotate.currsize
    once = annotate(short, MON_8_MAY_2023)
    assert once == "I adopted a puppy yesterday (7 May) and we walk every morning."
    assert annotate(short, MON_8_MAY_2023) == once
    assert annotate(short, at=MON_8_MAY_2023) == once  # the date by name works too
    assert kept(annotate).cache_info().hits > kept_annotate.hits
