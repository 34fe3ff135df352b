"""Precision and recall of the offline pattern relation extractor on labelled sentences.

Runs :class:`memory_core.formation.stages.relations.PatternRelations` over each sentence of a
JSON-lines file (by default ``tests/data/relation_sentences.jsonl``, written by hand for
this purpose: no evaluation data) and compares the claims with the labelled ones::

    {"lang": "en|pt|es", "text": "...", "speaker": "Ana",
     "expected": [["<speaker>", "lives_in", "Porto"], ...]}

Labelling conventions: the subject is ``<speaker>`` for a first-person claim (I, we, a
first-person verb form) and the capitalised name otherwise; a claim about a pronoun or an
unnamed person ("she", "my mom") has no triple. Questions, wishes and plans ("I'd love to
work at..."), other people's reports about the speaker, past visits and origins state no
fact here. "I used to live in X" and "morava em X" are ``not_lives_in``; "I drive a X" is
``uses``; "I like to swim" likes ``swim``.

Only the predicates this set is about are scored (:data:`SCORED`: ``lives_in``,
``works_at``, ``owns``, ``uses``, ``likes``, ``named`` and the ``not_`` forms); the
extractor's other claims (``visited``, ``has_sister``, the ``alias`` a "call me" also
declares, ...) are left out of both sides. A claimed triple matches a labelled one when
subject, predicate and object are equal after case folding, dropping punctuation and
leading articles/possessives. Precision is ``tp / (tp + fp)``, recall ``tp / (tp + fn)``
(1.0 when the denominator is 0); a false positive counts under its claimed predicate, a
miss under its labelled one.

Usage (from the project root)::

    python scripts/eval_patterns.py
    python scripts/eval_patterns.py --data my_sentences.jsonl --show-errors

Exit status: 0 on success, 2 for a malformed data file.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _common import render_table

from memory_core.formation.interfaces import FragmentView, RelationExtractor
from memory_core.formation.stages.relations import NEGATABLE, PatternRelations

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT / "tests" / "data" / "relation_sentences.jsonl"
SCORED = frozenset({*NEGATABLE, "named"} | {"not_" + p for p in NEGATABLE})
LANGS = ("en", "pt", "es")

Triple = tuple[str, str, str]
_ARTICLES = re.compile(
    r"^(?:(?:a|an|the|my|o|a|os|as|um|uma|meu|minha|el|la|los|las|un|una|mi|mis)\s+)+"
)
_PUNCT = re.compile(r"[^\w\s<>'-]+")


class DataError(ValueError):
    """The sentence file is malformed (the message names the line)."""


@dataclass(frozen=True)
class Sentence:
    """One labelled sentence: its language, text, speaker and expected triples."""

    lang: str
    text: str
    speaker: str
    expected: frozenset[Triple]


@dataclass
class Counts:
    """True positives, false positives and misses of one row of the table."""

    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


@dataclass
class Report:
    """Counts per language, per predicate and overall, and every error."""

    by_lang: dict[str, Counts] = field(default_factory=lambda: defaultdict(Counts))
    by_predicate: dict[str, Counts] = field(default_factory=lambda: defaultdict(Counts))
    overall: Counts = field(default_factory=Counts)
    errors: list[tuple[str, Sentence, Triple]] = field(default_factory=list)
    sentences: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    negatives: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def normalise(triple: Sequence[str]) -> Triple:
    """A triple as compared: case folded, punctuation and leading articles dropped."""
    subject, predicate, obj = (" ".join(_PUNCT.sub(" ", t.casefold()).split()) for t in triple)
    return _ARTICLES.sub("", subject), predicate, _ARTICLES.sub("", obj)


def load(path: Path) -> list[Sentence]:
    """The labelled sentences of a JSON-lines file; DataError names a malformed line."""
    sentences = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            sentences.append(_sentence(line, f"{path}:{number}"))
    return sentences


def _sentence(line: str, where: str) -> Sentence:
    try:
        row = json.loads(line)
        lang, text, speaker = row["lang"], row["text"], row.get("speaker", "")
        expected = frozenset(normalise(t) for t in row["expected"] if len(t) == 3)
        if lang not in LANGS or not isinstance(text, str) or len(expected) != len(row["expected"]):
            raise DataError(f"{where}: lang must be one of {LANGS}, triples of three strings")
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise DataError(f"{where}: {exc}") from exc
    return Sentence(lang, text, str(speaker), expected)


def predicted(extractor: RelationExtractor, sentence: Sentence) -> frozenset[Triple]:
    """The scored triples the extractor claims for the sentence."""
    view = FragmentView(sentence.text, sentence.speaker, "user")
    claims = extractor.extract(view)
    return frozenset(
        normalise((c.subject, c.predicate, c.obj)) for c in claims if c.predicate in SCORED
    )


def score(sentences: Iterable[Sentence], extractor: RelationExtractor | None = None) -> Report:
    """Scores ``extractor`` (the pattern extractor by default) on the sentences."""
    extractor = extractor or PatternRelations()
    report = Report()
    for sentence in sentences:
        report.sentences[sentence.lang] += 1
        report.negatives[sentence.lang] += not sentence.expected
        claimed = predicted(extractor, sentence)
        for outcome, triples in (
            ("tp", claimed & sentence.expected),
            ("fp", claimed - sentence.expected),
            ("fn", sentence.expected - claimed),
        ):
            for triple in sorted(triples):
                _count(report, outcome, sentence, triple)
    return report


def _count(report: Report, outcome: str, sentence: Sentence, triple: Triple) -> None:
    for counts in (report.by_lang[sentence.lang], report.by_predicate[triple[1]], report.overall):
        setattr(counts, outcome, getattr(counts, outcome) + 1)
    if outcome != "tp":
        report.errors.append((outcome, sentence, triple))


def render(report: Report) -> str:
    """The table: one row per language, then per predicate, then overall."""
    headers = ["", "P", "R", "F1", "tp", "fp", "fn"]

    def row(label: str, c: Counts) -> list[str]:
        return [label, f"{c.precision:.3f}", f"{c.recall:.3f}", f"{c.f1:.3f}"] + [
            str(n) for n in (c.tp, c.fp, c.fn)
        ]

    rows = [row(f"lang {lang}", report.by_lang[lang]) for lang in LANGS if lang in report.by_lang]
    rows += [row(p, report.by_predicate[p]) for p in sorted(report.by_predicate)]
    rows.append(row("overall", report.overall))
    sizes = ", ".join(
        f"{lang} {report.sentences[lang]} ({report.negatives[lang]} without a fact)"
        for lang in LANGS
        if lang in report.sentences
    )
    return f"sentences: {sizes}\n\n" + render_table(headers, rows)


def render_errors(report: Report) -> str:
    """Every false positive and miss, with its sentence."""
    lines = [
        f"{outcome.upper()} [{s.lang}] {' | '.join(t)}  <-  {s.text}"
        for outcome, s, t in report.errors
    ]
    return "\n".join(lines) if lines else "no errors"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        sentences = load(args.data)
    except (OSError, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = score(sentences)
    print(render(report))
    if args.show_errors:
        print("\n" + render_errors(report))
    return 0


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Precision and recall of the pattern relation extractor."
    )
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help=f"JSON lines (default {DEFAULT_DATA})"
    )
    parser.add_argument(
        "--show-errors", action="store_true", help="list false positives and misses"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
