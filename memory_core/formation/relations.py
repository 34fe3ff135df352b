"""Pattern relations, the offline default extractor: a small grammar of explicit claims.

Each pattern yields a typed, directed claim with the words that matched as evidence.
First-person claims ("I live in Porto", "my sister Ana") have the speaker as subject.
A claim marked as an update ("actually", "no longer", "moved to", "now") is flagged as a
correction so mutation classification can tell a change from a conflict. Predicates are
snake_case; :data:`FUNCTIONAL` lists those that hold one value at a time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .interfaces import FragmentView, Interpretation, RelationCandidate

__all__ = ["CORRECTION", "FUNCTIONAL", "SPEAKER", "PatternRelations"]

SPEAKER = "<speaker>"
FUNCTIONAL = frozenset({"lives_in", "works_at", "born_in", "age", "job"})
FUNCTIONAL_PREFIXES = ("favourite_",)
CORRECTION = re.compile(
    r"\b(actually|correction|i meant|not anymore|no longer|instead|changed|now|moved|"
    r"these days|any more)\b|^\s*no[,!. ]",
    re.IGNORECASE,
)

# A name starts where no name character precedes (so a scan tries each run of name
# characters once) and its words are matched possessively: every pattern is linear in the
# text, even over a megabyte of "A-A-A-..." (without both, each capital re-scanned the
# rest of the run: quadratic, minutes for 20 KB).
_START = r"(?<![\w'\u2019-])"
_NAME = _START + r"(?P<{g}>(?:[A-Z][\w'\u2019-]++)(?:\s++[A-Z][\w'\u2019-]++){{0,3}})"
_SUBJ = _START + r"(?P<subj>I|[A-Z][\w'\u2019-]++(?:\s++[A-Z][\w'\u2019-]++){0,2})"
_KIN = (
    r"sister|brother|mother|father|mom|mum|dad|wife|husband|partner|friend|best friend|"
    r"boss|colleague|coworker|son|daughter|cousin|aunt|uncle|grandma|grandmother|"
    r"grandpa|grandfather|girlfriend|boyfriend|fiancée?|neighbou?r|dog|cat|kid|child"
)


def _name(group: str) -> str:
    return _NAME.format(g=group)


_PATTERNS: tuple[tuple[str, re.Pattern[str], bool], ...] = (
    ("has_{rel}", re.compile(r"\b[Mm]y (?P<rel>" + _KIN + r"),? " + _name("obj")), True),
    ("has_{rel}", re.compile(_name("obj") + r" is my (?P<rel>" + _KIN + r")\b"), True),
    (
        "lives_in",
        re.compile(
            _SUBJ + r" (?:now )?(?:live|lives|living|moved|moving|relocated)"
            r" (?:in|to) " + _name("obj")
        ),
        True,
    ),
    (
        "works_at",
        re.compile(
            _SUBJ + r" (?:now )?(?:work|works|working|started working)"
            r" (?:at|for) " + _name("obj")
        ),
        True,
    ),
    ("born_in", re.compile(_SUBJ + r" (?:was|were) born in " + _name("obj")), True),
    (
        "visited",
        re.compile(
            _SUBJ + r" (?:visited|went to|traveled to|travelled to|flew to) " + _name("obj")
        ),
        True,
    ),
    (
        "likes",
        re.compile(
            _SUBJ + r" (?:really )?(?:like|likes|love|loves|enjoy|enjoys|adore) " + _name("obj")
        ),
        True,
    ),
    ("age", re.compile(_SUBJ + r" (?:am|is|are|turned) (?P<obj>\d{1,3}) years? old"), False),
    (
        "job",
        re.compile(
            _SUBJ + r" (?:am|is|are|work as|works as) an? (?P<obj>(?:[a-z]+ ){0,2}"
            r"(?:teacher|nurse|doctor|engineer|developer|designer|counselor|counsellor|"
            r"writer|artist|lawyer|chef|student|manager|musician|painter|"
            r"photographer|scientist|researcher|accountant))\b"
        ),
        False,
    ),
    (
        "favourite_{what}",
        re.compile(
            r"(?:\b[Mm]y|" + _START + r"(?P<subj>[A-Z][\w'-]+)'s) favou?rite "
            r"(?P<what>[a-z]+) is (?P<obj>[\w' -]{2,40}?)[.,!?;]"
        ),
        False,
    ),
    (
        "alias",
        re.compile(
            _name("subj") + r",? (?:also known as|aka|a\.k\.a\.|but everyone "
            r"calls (?:him|her|them|me)|who goes by) " + _name("obj")
        ),
        True,
    ),
    ("alias", re.compile(r"\b[Cc]all me " + _name("obj")), True),
)


class PatternRelations:
    """Extracts explicit claims with regular patterns (English canonical text)."""

    interpretation = Interpretation("relations", "patterns", "areamem-patterns", "1")

    def extract(self, fragment: FragmentView) -> list[RelationCandidate]:
        correction = CORRECTION.search(fragment.text) is not None
        found: dict[tuple[str, str, str], RelationCandidate] = {}
        for candidate in self._matches(fragment.text, correction):
            found.setdefault((candidate.subject, candidate.predicate, candidate.obj), candidate)
        return list(found.values())

    def _matches(self, text: str, correction: bool) -> Iterator[RelationCandidate]:
        for template, pattern, obj_is_entity in _PATTERNS:
            for match in pattern.finditer(text):
                groups = match.groupdict()
                subject = groups.get("subj") or SPEAKER
                if subject in ("I", "Me", "My"):
                    subject = SPEAKER
                predicate = template.format(
                    rel=(groups.get("rel") or "").lower().replace(" ", "_"),
                    what=(groups.get("what") or "").lower(),
                )
                obj = groups["obj"].strip()
                yield RelationCandidate(
                    subject=subject,
                    predicate=predicate,
                    obj=obj,
                    obj_is_entity=obj_is_entity,
                    confidence=0.8,
                    correction=correction,
                    evidence=match.group(0),
                )


def is_functional(predicate: str) -> bool:
    """Whether the predicate holds a single value at a time (a new value is a change)."""
    return predicate in FUNCTIONAL or predicate.startswith(FUNCTIONAL_PREFIXES)
