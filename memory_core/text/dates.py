"""Time expressions resolved against the date they were said on: "yesterday" said on
8 May 2023 means 7 May 2023.

People say when things happened relative to when they speak ("last week", "há dois
dias", "el viernes pasado"), and memory keeps their words as they said them. Months
later those words mean nothing by themselves, so this module finds the time expressions
of a text (English, Portuguese, Spanish) and resolves each against the date of the turn
that said it into a :class:`Span` (first day, last day, granularity). Formation keeps the
spans beside the original words; retrieval matches a question's own time words (and the
dates it writes out, "7 May 2023", "in December 2023") against them; the block shows
the absolute date beside the relative words (:func:`annotate`).

Pure and deterministic: text and a date in, spans out; no clock is read. Conventions
(fixed, documented, never guessed per case):

* weeks run Monday to Sunday; a weekend is Saturday and Sunday; "last week" is the week
  before the one of the turn, "next weekend" the weekend of the week after ("the last
  week of May", a period of something, is neither);
* "last Friday" is the latest Friday strictly before the turn's day, "next Monday" the
  first Monday strictly after it, "this Friday" the Friday of the turn's week;
* "N days ago" is one day; "N weeks ago" the week holding the day N weeks before; "N
  months ago" that month; "N years ago" that year; "in N ..." the same forwards;
* "in May" (no year) is May of the turn's year; "last May" the latest May before the
  turn's month, "next May" the first after it (with a day or year written after them,
  "last May 2023", the month written out is read instead); "7 May" without a year is
  in the turn's year;
* "a few days ago" is the approximate range 2 to 5 days before (``approximate``);
* an expression whose date would fall outside years 1-9999 ("10000 years ago") is left
  alone, as is anything not listed here (a bare "Friday", "soon", "recently"): never a
  guessed date.

Invariant: every :class:`Span` has ``first <= last``, both valid dates.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from .kept import kept_when_short

__all__ = [
    "GRANULARITIES",
    "Span",
    "TimeExpression",
    "annotate",
    "day_of",
    "find",
    "label",
]

GRANULARITIES = ("day", "weekend", "week", "month", "year")
"""What a span covers."""

_MAX_N = 100_000
"""A count above this ("in 999999999 days") is no date anyone means: left alone."""
_MAX_TEXT = 20_000
"""The most characters of a text searched for time expressions (cost bounded in input)."""

_MONTHS_EN = ("january", "february", "march", "april", "may", "june", "july", "august",
              "september", "october", "november", "december")  # fmt: skip
_MONTHS_PT = ("janeiro", "fevereiro", "março", "abril", "maio", "junho", "julho", "agosto",
              "setembro", "outubro", "novembro", "dezembro")  # fmt: skip
_MONTHS_ES = ("enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto",
              "septiembre", "octubre", "noviembre", "diciembre")  # fmt: skip
_MONTH_ABBR = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_LABEL_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                 "Dec")  # fmt: skip
_FULL_MONTHS = tuple(m.capitalize() for m in _MONTHS_EN)

_WEEKDAYS = {
    **{d: i for i, d in enumerate(
        ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))},
    **{d: i for i, d in enumerate(("segunda", "terça", "quarta", "quinta", "sexta"))},
    "terca": 1, "sábado": 5, "sabado": 5, "domingo": 6,
    **{d: i for i, d in enumerate(("lunes", "martes", "miércoles", "jueves", "viernes"))},
    "miercoles": 2,
}  # fmt: skip

_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "fifteen": 15, "twenty": 20, "thirty": 30, "couple of": 2, "a couple of": 2,
    "um": 1, "uma": 1, "dois": 2, "duas": 2, "três": 3, "tres": 3, "quatro": 4,
    "cinco": 5, "seis": 6, "sete": 7, "oito": 8, "nove": 9, "dez": 10, "onze": 11,
    "doze": 12, "quinze": 15, "vinte": 20, "trinta": 30,
    "un": 1, "una": 1, "dos": 2, "cuatro": 4, "siete": 7, "ocho": 8, "nueve": 9,
    "diez": 10, "once": 11, "doce": 12, "quince": 15, "veinte": 20, "treinta": 30,
}  # fmt: skip

_UNITS = {
    "day": "day", "days": "day", "dia": "day", "dias": "day", "día": "day", "días": "day",
    "week": "week", "weeks": "week", "semana": "week", "semanas": "week",
    "month": "month", "months": "month", "mês": "month", "mes": "month", "meses": "month",
    "year": "year", "years": "year", "ano": "year", "anos": "year", "año": "year",
    "años": "year",
}  # fmt: skip

_PERIODS = {
    "week": "week", "semana": "week", "month": "month", "mês": "month", "mes": "month",
    "year": "year", "ano": "year", "año": "year", "weekend": "weekend",
    "fim de semana": "weekend", "fin de semana": "weekend",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Span:
    """The days an expression means: ``first`` to ``last`` inclusive, with what it covers
    (one of :data:`GRANULARITIES`); ``approximate`` for "a few days ago".
    Invariant: ``first <= last``."""

    first: dt.date
    last: dt.date
    granularity: str
    approximate: bool = False

    def overlaps(self, other: Span) -> bool:
        """Whether the two spans share a day."""
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True, slots=True)
class TimeExpression:
    """One time expression of a text: its words (``text[start:end]`` as written), what
    they mean, and whether they are relative (an absolute "7 May 2023" is not)."""

    start: int
    end: int
    words: str
    span: Span
    relative: bool = True


Resolver = Callable[[re.Match[str], dt.date], Span | None]


def _alt(words: Iterable[str]) -> str:
    return "|".join(sorted(map(re.escape, words), key=len, reverse=True))


_N = rf"(?P<n>\d{{1,9}}|{_alt(_NUMBERS)})"
_UNIT = rf"(?P<unit>{_alt(_UNITS)})"
_PERIOD = rf"(?P<period>{_alt(_PERIODS)})"
_WEEKDAY = rf"(?P<wd>{_alt(_WEEKDAYS)})(?:-feira)?"
_MONTH = rf"(?P<month>{_alt((*_MONTHS_EN, *_MONTHS_PT, *_MONTHS_ES))})"
_YEAR = r"(?P<year>(?:1[89]|2\d)\d\d)"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th|º)?"


def _day(shift: int) -> Resolver:
    def resolve(_: re.Match[str], at: dt.date) -> Span | None:
        return _one_day(at, shift)

    return resolve


def _one_day(at: dt.date, shift: int) -> Span | None:
    day = _add_days(at, shift)
    return None if day is None else Span(day, day, "day")


def _add_days(at: dt.date, days: int) -> dt.date | None:
    try:
        return at + dt.timedelta(days=days)
    except OverflowError:
        return None


def _add_months(year: int, month: int, months: int) -> tuple[int, int] | None:
    total = year * 12 + month - 1 + months
    y, m = divmod(total, 12)
    return (y, m + 1) if 1 <= y <= 9999 else None


def _month_span(year: int, month: int) -> Span:
    first = dt.date(year, month, 1)
    following = _add_months(year, month, 1)
    last = dt.date(9999, 12, 31) if following is None else dt.date(*following, 1) - dt.timedelta(1)
    return Span(first, last, "month")


def _year_span(year: int) -> Span | None:
    if not 1 <= year <= 9999:
        return None
    return Span(dt.date(year, 1, 1), dt.date(year, 12, 31), "year")


def _week_span(day: dt.date | None, granularity: str = "week") -> Span | None:
    if day is None:
        return None
    monday = _add_days(day, -day.weekday())
    if granularity == "weekend":
        first, last = _add_days(day, 5 - day.weekday()), _add_days(day, 6 - day.weekday())
    else:
        first, last = monday, _add_days(day, 6 - day.weekday())
    if first is None or last is None:
        return None
    return Span(first, last, granularity)


def _period(period: str, at: dt.date, shift: int) -> Span | None:
    """The week, weekend, month or year ``shift`` of them from the turn's."""
    kind = _PERIODS[period]
    if kind in ("week", "weekend"):
        return _week_span(_add_days(at, 7 * shift), kind)
    if kind == "month":
        moved = _add_months(at.year, at.month, shift)
        return None if moved is None else _month_span(*moved)
    return _year_span(at.year + shift)


def _shifted_period(shift: int) -> Resolver:
    def resolve(match: re.Match[str], at: dt.date) -> Span | None:
        return _period(match["period"].lower(), at, shift)

    return resolve


def _count(match: re.Match[str]) -> int | None:
    raw = " ".join(match["n"].lower().split())
    n = int(raw) if raw.isdigit() else _NUMBERS.get(raw)
    return n if n is not None and n <= _MAX_N else None


def _units(sign: int) -> Resolver:
    """"N units ago" (``sign`` -1) or "in N units" (+1)."""

    def resolve(match: re.Match[str], at: dt.date) -> Span | None:
        n = _count(match)
        if n is None:
            return None
        unit = _UNITS[match["unit"].lower()]
        if unit == "day":
            return _one_day(at, sign * n)
        if unit == "week":
            return _week_span(_add_days(at, sign * 7 * n))
        return _period(unit, at, sign * n)

    return resolve


def _few_days(match: re.Match[str], at: dt.date) -> Span | None:
    first, last = _add_days(at, -5), _add_days(at, -2)
    if first is None or last is None:
        return None
    return Span(first, last, "day", approximate=True)


def _weekday(direction: int) -> Resolver:
    """The weekday strictly before (-1) or after (+1) the turn's day, or in its week (0)."""

    def resolve(match: re.Match[str], at: dt.date) -> Span | None:
        wanted = _WEEKDAYS[match["wd"].lower()]
        if direction == 0:
            return _one_day(at, wanted - at.weekday())
        if direction < 0:
            return _one_day(at, -((at.weekday() - wanted - 1) % 7 + 1))
        return _one_day(at, (wanted - at.weekday() - 1) % 7 + 1)

    return resolve


def _month_number(name: str) -> int | None:
    """The month a name means; None for "may" written lowercase (the English verb)."""
    if name == "may":
        return None
    lowered = name.lower()
    for names in (_MONTHS_EN, _MONTHS_PT, _MONTHS_ES):
        if lowered in names:
            return names.index(lowered) + 1
    return _MONTH_ABBR.index(lowered[:3]) + 1


def _named_month(direction: int) -> Resolver:
    """A month by name: in the turn's year (0, or the year written), the latest before
    the turn's month (-1) or the first after it (+1)."""

    def resolve(match: re.Match[str], at: dt.date) -> Span | None:
        month = _month_number(match["month"])
        if month is None:
            return None
        year = int(match["year"]) if match.groupdict().get("year") else at.year
        if direction < 0:
            year = at.year if month < at.month else at.year - 1
        elif direction > 0:
            year = at.year if month > at.month else at.year + 1
        return _month_span(year, month) if 1 <= year <= 9999 else None

    return resolve


def _calendar_day(match: re.Match[str], at: dt.date) -> Span | None:
    """"7 May 2023", "May 7, 2023", "7 de maio": a day written out (the turn's year when
    none is written); an impossible one (31 April) is left alone."""
    year = int(match["year"]) if match.groupdict().get("year") else at.year
    month = _month_number(match["month"])
    if month is None:
        return None
    try:
        day = dt.date(year, month, int(match["day"]))
    except ValueError:
        return None
    return Span(day, day, "day")


def _written_year(match: re.Match[str], at: dt.date) -> Span | None:
    return _year_span(int(match["year"]))


_LAST = r"(?:last|previous)"
_NEXT = r"(?:next|coming)"
_PASSADO = r"(?:passad[oa]|pasad[oa])"
_PROXIMO = r"(?:próxim[oa]|proxim[oa])"
_QUE_VEM = r"(?:que vem|que viene)"
_FEW = r"(?:a few|several|some|uns|umas|alguns|algumas|unos|unas|algunos|algunas|poucos|pocos)"

_ART = r"(?:n?[oa] |el |la )?"
_MANANA = "".join(f"(?<!{w} )" for w in ("la", "por", "esta", "pasado", "una", "cada", "otra",
                                        "esa", "aquella", "media")) + "mañana"  # fmt: skip
"""Spanish "mañana" where it is tomorrow, not the morning ("por la mañana", "cada mañana",
"una mañana", "pasado mañana"): "mañana por la tarde" is tomorrow afternoon."""
_NOT_OF = r"(?! of\b)"
"""After "last week", "next year", "this weekend": "the last week of May" is May's final
week, not the week before the turn's."""
_NO_DATE = r"(?!,? (?:de |of )?\d)"
"""After a month named relatively ("in May", "last May", "next May"): no day or year
written after it. "last May 2023" is May 2023, not the May before the turn's month
(the two expressions are as long, and the first one would win)."""

# (patterns, resolver, relative): every pattern tried; the longest match at a place wins.
# One pattern per alternative: a pattern names each of its groups once.
_RULES: tuple[tuple[tuple[str, ...], Resolver, bool], ...] = (
    # days
    ((r"the day before yesterday|anteontem|anteayer|antier",), _day(-2), True),
    ((r"the day after tomorrow|depois de amanhã|pasado mañana",), _day(2), True),
    ((r"yesterday|ontem|ayer|last night|ontem à noite|anoche",), _day(-1), True),
    ((r"today|tonight|this (?:morning|afternoon|evening)|hoje(?: de manhã| à noite)?"
      r"|esta (?:manhã|tarde|noite|mañana|noche)|hoy",), _day(0), True),
    ((rf"tomorrow|amanhã|{_MANANA}",), _day(1), True),
    # periods
    ((rf"{_LAST} {_PERIOD}{_NOT_OF}", rf"{_ART}{_PERIOD} {_PASSADO}"), _shifted_period(-1), True),
    ((rf"{_NEXT} {_PERIOD}{_NOT_OF}", rf"{_ART}{_PROXIMO} {_PERIOD}",
      rf"{_ART}{_PERIOD} {_QUE_VEM}"), _shifted_period(1), True),
    ((rf"this {_PERIOD}{_NOT_OF}", rf"n?est[ea] {_PERIOD}"), _shifted_period(0), True),
    # counts
    ((rf"{_FEW} days ago|há {_FEW} dias|hace {_FEW} días|{_FEW} dias atrás",), _few_days, True),
    ((rf"{_N} {_UNIT} ago", rf"há {_N} {_UNIT}", rf"hace {_N} {_UNIT}", rf"{_N} {_UNIT} atrás"),
     _units(-1), True),
    ((rf"in {_N} {_UNIT}", rf"daqui a {_N} {_UNIT}", rf"dentro de {_N} {_UNIT}"), _units(1), True),
    # weekdays
    ((rf"{_LAST} {_WEEKDAY}", rf"(?:n[oa] |el )?{_WEEKDAY} {_PASSADO}"), _weekday(-1), True),
    ((rf"{_NEXT} {_WEEKDAY}", rf"(?:n[oa] |el )?{_PROXIMO} {_WEEKDAY}",
      rf"(?:el )?{_WEEKDAY} {_QUE_VEM}"), _weekday(1), True),
    ((rf"this {_WEEKDAY}", rf"n?est[ea] {_WEEKDAY}"), _weekday(0), True),
    # months by name
    ((rf"{_LAST} {_MONTH}{_NO_DATE}", rf"{_MONTH} {_PASSADO}"), _named_month(-1), True),
    ((rf"{_NEXT} {_MONTH}{_NO_DATE}", rf"{_PROXIMO} {_MONTH}{_NO_DATE}", rf"{_MONTH} {_QUE_VEM}"),
     _named_month(1), True),
    ((rf"(?:in|em|en|during|durante) {_MONTH}{_NO_DATE}",), _named_month(0), True),
    # written out (absolute): days, months of a year, years
    ((rf"{_DAY}(?: of)? {_MONTH},? {_YEAR}", rf"{_MONTH} {_DAY},? {_YEAR}",
      rf"{_DAY} de {_MONTH} de {_YEAR}"), _calendar_day, False),
    ((rf"{_DAY}(?: of)? {_MONTH}(?!,? \d)", rf"{_MONTH} {_DAY}(?!\d)(?!,? \d)",
      rf"{_DAY} de {_MONTH}(?! de \d)"), _calendar_day, False),
    ((rf"{_MONTH},? (?:de |of )?{_YEAR}",), _named_month(0), False),
    ((rf"(?:in|em|en|during|durante|of|de) {_YEAR}(?!\d)",), _written_year, False),
)  # fmt: skip

_FOUND_KEPT = 4096
"""Texts whose expressions :func:`find` keeps (the block annotates the same fragments'
lines question after question: about 0.15 ms of regular expressions a line, 1.6 ms a
block, saved)."""
_KEPT_CHARS = 1_000
"""Only texts of at most this many characters are kept (by :func:`find` and
:func:`annotate`): a turn or a sentence. A longer one is read every time, so the kept
texts stay under ~16 MB whatever memory holds (a megabyte message formed, or a block's
32,000-character line, kept 4,096 times over, would not)."""


_COMPILED = tuple(
    (re.compile(rf"(?<![^\W_])(?:{pattern})(?![^\W_])", re.IGNORECASE), resolver, relative)
    for patterns, resolver, relative in _RULES
    for pattern in patterns
)


_DAY_WORDS = ("yesterday", "anteontem", "anteayer", "antier", "tomorrow", "amanhã", "mañana",
              "ontem", "ayer", "night", "anoche", "today", "tonight", "morning", "afternoon",
              "evening", "hoje", "manhã", "tarde", "noite", "noche", "hoy")  # fmt: skip
_KEYWORDS_OF_RULES = (*_DAY_WORDS, *_WEEKDAYS, *_MONTHS_EN, *_MONTHS_PT, *_MONTHS_ES, *_UNITS,
                      *(period.split()[-1] for period in _PERIODS))  # fmt: skip
_KEYWORDS = re.compile(
    rf"(?<![^\W_])(?:{_alt(sorted(set(_KEYWORDS_OF_RULES)))}|(?:1[89]|2\d)\d\d)(?![^\W_])",
    re.IGNORECASE,
)
"""A word every expression of :data:`_RULES` holds whole (a word of the day rules, a
weekday, a month, a unit, a period's last word, a year), found with the same case rules
and the same word edges: a text without one holds no expression. One search for them
spares the ~40 patterns in the nine lines of chat in ten that name no time (LoCoMo dev5's
turns: 0.27 ms a turn against 0.79 ms)."""


@kept_when_short(_FOUND_KEPT, _KEPT_CHARS)
def find(text: str, at: dt.date) -> tuple[TimeExpression, ...]:
    """The time expressions of ``text`` said on ``at``, in text order, never overlapping
    (the longest wins where two start at one place or overlap: "the day before
    yesterday" is one expression, not "yesterday"). Only the first :data:`_MAX_TEXT`
    characters are read; a datetime ``at`` counts as its day (a span holds dates only)."""
    text = text[:_MAX_TEXT]
    if _KEYWORDS.search(text) is None:
        return ()
    return _scan(text, at.date() if isinstance(at, dt.datetime) else at)


def _scan(text: str, at: dt.date) -> tuple[TimeExpression, ...]:
    """:func:`find` by every pattern (no keyword looked for first)."""
    found: list[TimeExpression] = []
    for pattern, resolver, relative in _COMPILED:
        for match in pattern.finditer(text):
            span = _safely(resolver, match, at)
            if span is not None:
                found.append(TimeExpression(match.start(), match.end(), match.group(), span,
                                            relative))  # fmt: skip
    return tuple(_non_overlapping(found))


def _safely(resolver: Resolver, match: re.Match[str], at: dt.date) -> Span | None:
    try:
        return resolver(match, at)
    except (OverflowError, ValueError):  # a date outside years 1-9999
        return None
    except KeyError:  # a look-alike letter IGNORECASE matched (dotless i, long s)
        return None


def _non_overlapping(found: list[TimeExpression]) -> Iterator[TimeExpression]:
    """The longest first, each kept unless a kept one covers one of its characters
    (linear in the characters the expressions cover)."""
    taken: set[int] = set()
    kept: list[TimeExpression] = []
    for expression in sorted(found, key=lambda e: (-(e.end - e.start), e.start)):
        covered = range(expression.start, expression.end)
        if not any(i in taken for i in covered):
            taken.update(covered)
            kept.append(expression)
    yield from sorted(kept, key=lambda e: e.start)


def day_of(ts: float | None) -> dt.date | None:
    """The UTC day of a stored timestamp (the day the block's headings show), or None
    when it is unknown or not a date."""
    if ts is None:
        return None
    try:
        return dt.datetime.fromtimestamp(ts, dt.UTC).date()
    except (OverflowError, OSError, ValueError):
        return None


def label(span: Span, *, year: int | None = None) -> str:
    """A short absolute form: ``7 May 2023``, ``1-7 May 2023``, ``30 Apr-6 May 2023``,
    ``May 2023``, ``2023``; ``about`` before an approximate span. ``year``: the year the
    reader already sees (the block's date heading), left out of a span within it."""
    first, last = span.first, span.last
    tail = "" if year == first.year == last.year else f" {first.year}"
    if span.granularity == "year":
        text = str(first.year)
    elif span.granularity == "month":
        text = f"{_FULL_MONTHS[first.month - 1]}{tail}"
    elif first == last:
        text = f"{first.day} {_FULL_MONTHS[first.month - 1]}{tail}"
    elif (first.year, first.month) == (last.year, last.month):
        text = f"{first.day}-{last.day} {_FULL_MONTHS[first.month - 1]}{tail}"
    elif first.year == last.year:
        text = f"{first.day} {_LABEL_MONTHS[first.month - 1]}-{last.day} " \
               f"{_LABEL_MONTHS[last.month - 1]}{tail}"  # fmt: skip
    else:
        text = f"{first.day} {_LABEL_MONTHS[first.month - 1]} {first.year}-{last.day} " \
               f"{_LABEL_MONTHS[last.month - 1]} {last.year}"  # fmt: skip
    return f"about {text}" if span.approximate else text


@kept_when_short(_FOUND_KEPT, _KEPT_CHARS)
def annotate(text: str, at: dt.date | None) -> str:
    """``text`` with the absolute date after each relative time expression it holds
    ("yesterday" said on 8 May 2023: "yesterday (7 May)"), in as few words as say it: the
    year of ``at`` (the date heading the line) is left out, and nothing is added where
    the words already say it ("today", "in May"). The words themselves are unchanged and
    absolute dates left as written; ``at`` None (date unknown): ``text`` as it is. Kept
    for the latest texts, as :func:`find` is: a block shows the same fragments again
    and again."""
    if at is None:
        return text
    if isinstance(at, dt.datetime):
        at = at.date()
    out: list[str] = []
    end = 0
    for expression in find(text, at):
        short = label(expression.span, year=at.year)
        if not expression.relative or _says_it(expression, short, at):
            continue
        out.append(text[end : expression.end])
        out.append(f" ({short})")
        end = expression.end
    out.append(text[end:])
    return "".join(out)


def _says_it(expression: TimeExpression, short: str, at: dt.date) -> bool:
    """Whether the words already say what the label would ("today", "in May")."""
    span = expression.span
    if span.first == span.last == at:
        return True
    return short.casefold() in expression.words.casefold()
