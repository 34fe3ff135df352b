"""Pattern relations, the offline default extractor: a small grammar of explicit claims.

Each pattern yields a typed, directed claim with the words that matched as evidence, in
English, Portuguese and Spanish (the offline defaults do not translate, so the text is
read as it was said). First-person claims ("I live in Porto", "moro em Braga", "vivo en
Sevilla", "my sister Ana") have the speaker (:data:`SPEAKER`) as subject; a third-person
claim needs a capitalised name as subject ("Rui lives in Porto", "O Rui mora em Braga"):
pronouns are not resolved, and the verb must agree with a single person ("Tomatoes love
sun" is no claim; "Ana loves sun" is). A claim marked as an update ("actually", "no longer", "moved
to", "now", "já não", "ya no", or wording that is itself an update: "sold", "used to",
"deixei de", "dejé de") is flagged as a correction so mutation classification can tell a
change from a conflict; so is one in a text that owns up to a mistake ("Sorry, I was
wrong: ...", "my mistake", "scratch that", "enganei-me", "erro meu", "me equivoqué", "me
confundí": :data:`CORRECTION`), and one that a contrast sets against another value ("Ana
moved to Porto, not Lisbon", "não mora em Madrid, mas em Valência", "no vive en Madrid
sino en Valencia", "lives not in Madrid but in Valencia": :class:`_Contrast`). A contrast
denies the other value too (``not_<P>``), except for a functional predicate, whose change
already supersedes it. :func:`denied_spans` says where a text denies something, for a
forget that must tell what asserts a word from what negates it.

The vocabulary (:data:`PREDICATES`; an entry ending in ``_`` is a prefix, completed by the
matched words). *Entity* objects are names linked to entities; *value* objects are kept as
said. *Functional* predicates (:func:`is_functional`) hold one value at a time.

=====================  ==========================================  ===========  ==========
predicate              meaning (rendering)                         object       functional
=====================  ==========================================  ===========  ==========
``lives_in``           subject lives in the place                  entity       yes
``works_at``           subject works at/for the organisation       entity       yes
``named``              subject is called the value ("call me Jo")  value        yes
``owns``               subject has/owns/bought the thing           value [1]_   no
``uses``               subject uses the thing; also "I drive a X"  value [1]_   no
``likes``              subject likes/loves/enjoys the thing        value [1]_   no
``not_<P>``            subject denies ``P`` for the object, for P  as ``P``     no
                       in :data:`NEGATABLE` ("I sold my car" is
                       ``not_owns``, "I used to live in X" is
                       ``not_lives_in``)
``born_in``            subject was born in the place               entity       yes
``visited``            subject visited the place                   entity       no
``age``                subject's age in years                      value        yes
``job``                subject's occupation                        value        yes
``favourite_<what>``   subject's favourite <what>                  value        yes
``has_<kin>``          the object is the subject's <kin>           entity       no
``alias``              the object is another name of the subject   entity       n/a [2]_
=====================  ==========================================  ===========  ==========

.. [1] An entity when the whole phrase is a name ("a Tesla", "Linux"; "Italian food" is a
   value).
.. [2] Not stored as a relation: the writer learns it as an alias before linking.

Driving is ``uses`` rather than ``owns``: a driven car may be a company or rented one.
Questions ("Do you live in Porto?"), hypotheticals and other people's reports ("he thinks
I live in Madrid", "se eu morasse", "cree que vivo") state nothing and are skipped, as are
demonstratives and abstract nouns as objects ("I like that idea", "I have a question").
A positive claim inside a negated one ("no *me gusta el café*") is dropped for it.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from ...text.words import MISTAKE_MARKERS
from ..interfaces import FragmentView, Interpretation, RelationCandidate

__all__ = [
    "CORRECTION",
    "FUNCTIONAL",
    "NEGATABLE",
    "PREDICATES",
    "SPEAKER",
    "PatternRelations",
    "denied_spans",
    "is_functional",
    "opposite",
]

SPEAKER = "<speaker>"
FUNCTIONAL = frozenset({"lives_in", "works_at", "born_in", "age", "job", "named"})
FUNCTIONAL_PREFIXES = ("favourite_",)
NEGATABLE = frozenset({"lives_in", "works_at", "owns", "uses", "likes"})
"""Predicates with a denying ``not_`` form (see :func:`opposite`)."""
PREDICATES = frozenset(
    {"lives_in", "works_at", "named", "owns", "uses", "likes", "born_in", "visited", "age"}
    | {"job", "alias", "favourite_", "has_"}
    | {"not_" + p for p in NEGATABLE}
)
"""Every predicate the patterns can yield; an entry ending in ``_`` is a prefix."""
CORRECTION = re.compile(
    rf"\b(?:{MISTAKE_MARKERS}|not anymore|no longer|instead|changed|now|moved|these days|"
    r"any more|anymore|used to|já não|agora|mudei|deixei de|não\s++\w++\s++mais|ahora|ya no|"
    r"me mudé|dejé de)\b"
    r"|^\s*(?:no|não)\s*[,!.]|^\s*no\s+(?=(?:it|that|i|we|you|he|she|they)\b)",
    re.IGNORECASE,
)
"""A mistake owned up to (:data:`~memory_core.text.words.MISTAKE_MARKERS`: "I was wrong",
"me enganei", "me equivoqué") or an update ("now", "no longer", "já não", "ya no")
anywhere in a text, or a text opening with "No,": its claims correct earlier ones. A
contrast marks the claims it joins besides (see :class:`_Contrast`)."""

# A name starts where no name character precedes (so a scan tries each run of name
# characters once) and its words are matched possessively: every pattern is linear in the
# text, even over a megabyte of "A-A-A-..." (without both, each capital re-scanned the
# rest of the run: quadratic, minutes for 20 KB). Every repetition below is bounded or
# possessive for the same reason.
_CH = r"[\w'\u2019-]"
_END = rf"(?!{_CH})"
_START = rf"(?<!{_CH})"
_CAP = r"[A-Z\u00c0-\u00d6\u00d8-\u00de]"
_AP = r"['\u2019]"
_NOT_NAMES = (
    "I|A|O|E|Y|An|The|My|Our|Your|His|Her|Its|Their|We|You|He|She|It|They|This|That|These|"
    "Those|Eu|Ele|Ela|Eles|Elas|Nós|Você|Vocês|Tu|Meu|Minha|Os|As|Um|Uma|Yo|Él|Ella|Ellos|"
    "Ellas|Usted|Mi|Mis|Su|Sus|El|La|Los|Las|Un|Una|Me|Se|Te|Today|Now|Actually|Also|Well|"
    "So|But|And|Then|Yes|No|Hi|Hello|Hey|Hoje|Agora|Na|Sim|Não|Olá|Oi|Hoy|Ahora|En|Sí|Ya|Já|"
    "Hola|Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
)
_CONNECT = r"(?:of|the|de|da|do|dos|das|del|la|du|von|van)"


def _name_words(words: int, subject: bool = False) -> str:
    # a subject stops before "'s" ("Ana" in "Ana's working"); "O'Brien", "St Mary's" do not
    char = rf"(?:[\w-]|{_AP}(?!s(?!\w)))" if subject else _CH
    first = rf"(?!(?:{_NOT_NAMES}){_END}|I{_AP}){_CAP}{char}++"
    more = rf"(?:\s++(?:{_CONNECT}\s++){{0,2}}(?!I{_END}){_CAP}{char}++){{0,{words}}}"
    return first + more


def _name(group: str, words: int = 4, subject: bool = False) -> str:
    """A capitalised name of up to ``words + 1`` words ("Póvoa de Varzim"), in ``group``."""
    return rf"{_START}(?P<{group}>{_name_words(words, subject)})"


# "I"/"we" (group ``me``) or a name (``subj``); English verbs agree with it: ``(?(me)...)``
_SUBJ = rf"{_START}(?:(?P<me>I|[Ww]e)(?![\w-])|(?P<subj>{_name_words(2, True)}))"
_WHO = _name("subj", 2, True)  # a third-person subject: a name, never a pronoun

_STOPWORDS = (
    "de|do|da|das|del|of|morning|evening|night|manhã|tarde|noite|noche|"
    "a|an|the|and|or|but|because|since|for|from|with|without|at|in|on|to|into|about|by|as|"
    "than|when|while|if|that|which|who|so|yesterday|today|tonight|tomorrow|now|last|this|"
    "next|these|those|every|each|ago|already|too|also|anymore|again|please|though|any|more|"
    "very|much|lately|recently|instead|then|here|there|is|are|was|were|be|been|am|has|have|"
    "had|do|does|did|will|would|can|could|should|it|its|you|him|her|them|us|me|my|your|our|"
    "their|his|everything|nothing|something|anything|all|not|no|never|always|really|just|"
    "even|still|until|after|before|like|i|we|he|she|they|either|neither|called|named|"
    "e|ou|mas|porque|pois|desde|para|pra|por|pelo|pela|com|sem|em|no|na|nos|nas|ao|aos|à|"
    "às|num|numa|quando|se|que|quem|hoje|ontem|amanhã|agora|mais|muito|muita|muitos|muitas|"
    "já|também|há|todos|todas|todo|toda|cada|este|esta|estes|estas|esse|essa|isso|isto|"
    "aquele|aquela|aquilo|disso|disto|dessa|desse|desta|deste|neste|nesta|nisso|ele|ela|"
    "eles|elas|você|vocês|te|lhe|mim|tudo|nada|algo|é|são|era|foi|está|estão|tem|bem|mal|"
    "sempre|nunca|ainda|bastante|imenso|demais|tanto|o|os|as|um|uma|uns|umas|meu|minha|"
    "meus|minhas|seu|sua|teu|tua|não|sim|mesmo|aqui|ali|lá|como|sobre|entre|até|chamado|"
    "chamada|chamados|chamadas|"
    "y|u|pero|pues|con|sin|en|al|mientras|si|quien|hoy|ayer|mañana|ahora|más|mucho|mucha|"
    "muchos|muchas|muchísimo|ya|también|hace|estos|ese|esos|esas|eso|esto|aquel|aquello|él|"
    "ella|ellos|ellas|usted|le|les|mí|lo|la|los|las|el|un|unos|unas|mi|mis|tu|tus|su|sus|"
    "es|son|fue|tiene|siempre|todavía|aún|demasiado|sí|allí|allá|hasta|llamado|llamada"
)
_STOP = rf"(?i:(?:{_STOPWORDS}){_END})"
_WORD = rf"(?!{_STOP}){_CH}++"
# "bolo de chocolate" is one phrase, "correr de manhã" likes "correr"
_NP1 = rf"(?!I{_AP}){_WORD}(?:\s++(?:(?i:de|do|da|dos|das|del|of)\s++)?{_WORD}){{0,3}}"
_DET = (
    r"(?:(?i:the|an?|my|our|his|her|their|o|a|os|as|um|uma|o\s++meu|a\s++minha|meu|minha|"
    r"meus|minhas|el|la|los|las|un|una|mi|mis)\s++)?"
)
_CONJ = r"(?:\s*+,)?\s++(?:and|or|e|ou|y)\s++"
_LINK = r"(?:(?:de|do|da|dos|das|del|of)\s++)?"


def _things(group: str = "obj") -> str:
    """A noun phrase, lowercase or capitalised, or a list of up to four ending in a
    conjunction ("a cat, a dog and two fish": "sun, water them" is no list)."""
    item = _LINK + _DET + _NP1
    return rf"(?P<{group}>{_NP1}(?:(?:\s*+,\s*+{item}){{0,2}}{_CONJ}{item})?)"


_NPS = _things()
_LIKED = _NPS + r"(?!\s++(?:que|that)(?!\w))"  # "gosto de saber que..." likes no thing
_QTY = r"(?=(?i:an?|two|three|four|five|six|several|\d+)\s)(?:(?i:an?)\s++)?"
_ART = r"(?:(?i:the|o|a|os|as|el|la|los|las)\s++)?"  # "en El Corte Inglés"
_NAMED = _name("obj")
_CALLED = (
    r"(?:(?:(?:an?|uma?|una?)\s++)?(?:[a-z\u00e0-\u00ff]++\s++){1,2}?(?:called|named|"
    r"chamad[ao]|llamad[ao])\s++)?"
)
_ORG = _CALLED + _NAMED  # "a startup called Lumen"
_NAMED3 = _name("obj", 3)
# English auxiliaries and adverbs
_ADV = (
    r"(?:(?:now|currently|still|also|actually|mostly|mainly|only|really|just|finally|"
    r"recently|even)\s++)?"
)
_BE = rf"(?(me)(?:{_AP}m|{_AP}re|\s++(?:am|are))|(?:{_AP}s|\s++is))"
_HAVE = rf"(?(me)(?:{_AP}ve|\s++have)|(?:{_AP}s|\s++has))"
_DONT = rf"(?:{_ADV}(?(me)do|does)(?:n{_AP}t|\s++not)|no\s++longer|never)"
# Portuguese and Spanish
_PT_NEG = r"(?<!\w)(?:[Jj]á\s++n[ãa]o|[Nn][ãa]o)"
_ES_NEG = r"(?<!\w)(?:[Yy]a\s++no|[Nn]o)"
_PT_IN = r"(?:em|no|na|nos|nas)"
_PT_AT = r"(?:(?:em|no|na|nos|nas|num|numa|pelo|pela)\s++|(?:para|pra)\s++(?:(?:o|a)\s++)?)"
_PT_OF = r"(?:de|do|da|dos|das)\s++"
_PT_DET = r"(?:(?:o|a|os|as|um|uma)\s++)?"
_PT_QTY = r"(?=(?:um|uma|uns|umas|dois|duas|três|quatro|cinco|\d+)\s)(?:(?:um|uma|uns|umas)\s++)?"
_PT_BUSY = r"(?:[Ee]st(?:ou|amos)|[Aa]nd(?:o|amos))"  # "estou a", "ando a": doing now
_PT_ADV = r"(?:(?:agora|atualmente|actualmente|hoje|ainda|também|sempre|muito)\s++)?"
_ES_IN = r"en\s++(?:(?i:el|la|los|las)\s++)?"
_ES_AT = r"(?:en|para)\s++(?:(?i:el|la|los|las)\s++)?"
_ES_DET = r"(?:(?:el|la|los|las|un|una)\s++)?"
_ES_QTY = r"(?=(?:un|una|unos|unas|dos|tres|cuatro|cinco|\d+)\s)(?:(?:un|una|unos|unas)\s++)?"
_ES_BUSY = (  # "estoy viviendo", "llevo tres años viviendo": doing now
    r"(?:[Ee]st(?:oy|amos)|[Ll]lev(?:o|amos)(?:\s++\w++){0,3}?)"
)
_ES_ADV = r"(?:(?:ahora|actualmente|todavía|también|siempre|mucho)\s++)?"
# a verb form that is first and third person alike ("morava", "vivía") is the speaker's
# only when nothing but "eu"/"yo" or a clause boundary precedes it
_OWN_CLAUSE = r"(?:(?<=\b[Ee]u )|(?<=\b[Yy]o )|(?<![\w,] ))(?<!\w)"


@dataclass(frozen=True)
class _Rule:
    """One pattern: its predicate (a template), how to read its object, whether its
    wording is itself an update ("moved to", "sold", "deixei de"), and its keys.

    Invariant: every match of ``pattern`` contains one of ``keys`` once case folded, so a
    text holding none of them is not scanned (a scan costs per character and rule, and
    most texts hold the keys of a few rules only).

    ``regex`` is compiled on the rule's first use, not at import: compiling all the rules
    took 3.7 s, paid by every process that imports formation (the proxy, each worker,
    every CLI command) whether it ever extracts or not.
    """

    template: str
    keys: tuple[str, ...]
    regex: str
    kind: str = "entity"  # "entity" | "value" | "things" (phrases: entities when names)
    update: bool = False
    guarded: bool = True  # skipped in questions, hypotheticals and reported speech

    @property
    def pattern(self) -> re.Pattern[str]:
        return _compiled(self.regex)


@functools.cache
def _compiled(regex: str) -> re.Pattern[str]:
    return re.compile(regex)


def _rule(
    template: str,
    keys: str,
    regex: str,
    kind: str = "entity",
    *,
    update: bool = False,
    guarded: bool = True,
) -> _Rule:
    return _Rule(template, tuple(keys.split("|")), regex, kind, update, guarded)


_KIN = (
    r"sister|brother|mother|father|mom|mum|dad|wife|husband|partner|friend|best friend|"
    r"boss|colleague|coworker|son|daughter|cousin|aunt|uncle|grandma|grandmother|"
    r"grandpa|grandfather|girlfriend|boyfriend|fiancée?|neighbou?r|dog|cat|kid|child"
)
_JOBS = (
    r"teacher|nurse|doctor|engineer|developer|designer|counselor|counsellor|writer|artist|"
    r"lawyer|chef|student|manager|musician|painter|photographer|scientist|researcher|"
    r"accountant"
)

_GENERAL = (
    _rule("has_{rel}", "my ", rf"\b[Mm]y (?P<rel>{_KIN}),? {_NAMED3}", guarded=False),
    _rule("has_{rel}", "is my", rf"{_NAMED3} is my (?P<rel>{_KIN})\b", guarded=False),
    _rule("born_in", "born", rf"{_SUBJ} (?:was|were) born in {_NAMED3}"),
    _rule(
        "visited",
        "visited|went to|traveled to|travelled to|flew to",
        rf"{_SUBJ} (?:visited|went to|traveled to|travelled to|flew to) {_NAMED3}",
    ),
    _rule("age", "old", rf"{_SUBJ} (?:am|is|are|turned) (?P<obj>\d{{1,3}}) years? old", "value"),
    _rule(
        "job",
        "am a|is a|are a|work as|works as",
        rf"{_SUBJ} (?:am|is|are|work as|works as) an? (?P<obj>(?:[a-z]+ ){{0,2}}(?:{_JOBS}))\b",
        "value",
    ),
    _rule(
        "favourite_{what}",
        "favo",
        rf"(?:\b[Mm]y|{_START}(?P<subj>[A-Z][\w'-]+)'s) favou?rite "
        r"(?P<what>[a-z]+) is (?P<obj>[\w' -]{2,40}?)[.,!?;]",
        "value",
    ),
    _rule(
        "alias",
        "known as|aka|a.k.a.|calls|goes by",
        _name("subj", 3) + r",? (?:also known as|aka|a\.k\.a\.|but everyone "
        r"calls (?:him|her|them|me)|who goes by) " + _NAMED3,
        guarded=False,
    ),
    _rule("alias", "call me", rf"\b[Cc]all me {_NAMED3}", guarded=False),
)

_ENGLISH = (
    _rule(
        "lives_in",
        "live|reside|living|based|settled",
        rf"{_SUBJ}(?:\s++{_ADV}(?(me)(?:live|reside)|(?:lives|resides))|{_BE}\s++{_ADV}(?:living|based|"
        rf"settled)|{_HAVE}\s++(?:lived|been\s++(?:living|based)))\s++in\s++{_ART}{_NAMED}",
    ),
    _rule(
        "lives_in",
        "moved|relocated",
        rf"{_SUBJ}\s++{_ADV}(?:moved|relocated)\s++(?:back\s++)?to\s++{_ART}{_NAMED}",
        update=True,
    ),
    _rule("lives_in", "home", rf"(?:\b[Mm]y\s++home|(?:^|(?<=[.!?;:]\s))Home)\s++is\s++{_NAMED}"),
    _rule(
        "not_lives_in",
        "live|living|based",
        rf"{_SUBJ}(?:\s++{_DONT}\s++(?:live|lives)|{_BE}\s++(?:not|no\s++longer)\s++(?:living|"
        rf"based))\s++in\s++{_ART}{_NAMED}",
    ),
    _rule(
        "not_lives_in",
        "used|moved",
        rf"{_SUBJ}\s++(?:used\s++to\s++live\s++in|moved\s++(?:out\s++of|away\s++from))"
        rf"\s++{_ART}{_NAMED}",
        update=True,
    ),
    _rule(
        "works_at",
        "work",
        rf"{_SUBJ}(?:\s++{_ADV}(?(me)work|works)(?:\s++as\s++an?(?:\s++[a-z-]++){{1,3}}?)?|"
        rf"{_BE}\s++{_ADV}working|{_HAVE}\s++been\s++working)\s++(?:at|for)\s++{_ART}{_ORG}",
    ),
    _rule(
        "works_at",
        "job|position|role|internship|working",
        rf"{_SUBJ}\s++{_ADV}(?:(?:got|landed|accepted|started|took)\s++(?:(?:a|an|the|my)\s++)?"
        rf"(?:new\s++)?(?:job|position|role|internship)\s++(?:at|with)|(?:started|began)"
        rf"\s++working\s++(?:at|for))\s++{_ART}{_NAMED}",
        update=True,
    ),
    _rule(
        "works_at",
        "m a|s a|re a",
        rf"{_SUBJ}{_BE}\s++an?\s++(?:[a-z-]++\s++){{1,3}}?at\s++{_ART}{_NAMED}",
    ),
    _rule(
        "not_works_at",
        "work|not|no",
        rf"{_SUBJ}(?:\s++{_DONT}\s++(?:work|works)|{_BE}\s++(?:not|no\s++longer)"
        rf"(?:\s++working)?)\s++(?:at|for)\s++{_ART}{_NAMED}",
    ),
    _rule(
        "not_works_at",
        "used|stopped|quit|left|lost",
        rf"{_SUBJ}\s++(?:used\s++to\s++work\s++(?:at|for)|stopped\s++working\s++(?:at|for)|"
        rf"(?:quit|left|lost)\s++(?:my|his|her|their|the|a)\s++(?:job|position|role)\s++"
        rf"(?:at|with))\s++{_ART}{_NAMED}",
        update=True,
    ),
    _rule(
        "owns",
        "have|has|own|got",
        rf"{_SUBJ}(?:\s++{_ADV}(?(me)(?:have|own)|(?:has|owns))|{_HAVE}\s++got)\s++{_QTY}{_NPS}",
        "things",
    ),
    _rule("owns", "bought", rf"{_SUBJ}\s++{_ADV}bought\s++{_QTY}{_NPS}", "things", update=True),
    _rule(
        "not_owns",
        "have|has|own",
        rf"{_SUBJ}\s++{_DONT}\s++(?:have|has|own|owns)\s++(?:(?:an?|any)\s++)?{_NPS}",
        "things",
    ),
    _rule(
        "not_owns",
        "sold|gave|rid|donated|used",
        rf"{_SUBJ}\s++(?:{_ADV}(?:sold|gave\s++away|got\s++rid\s++of|donated)|used\s++to\s++"
        rf"(?:have|own))\s++{_DET}{_NPS}",
        "things",
        update=True,
    ),
    _rule(
        "uses",
        "use|using|drive",
        rf"{_SUBJ}(?:\s++{_ADV}(?(me)(?:use|drive)|(?:uses|drives))|(?:{_BE}|{_HAVE}\s++been)\s++{_ADV}"
        rf"using)\s++{_DET}{_NPS}",
        "things",
    ),
    _rule(
        "uses",
        "switched|changed",
        rf"{_SUBJ}\s++{_ADV}(?:switched|changed)\s++(?:over\s++)?to\s++(?:using\s++)?{_DET}{_NPS}",
        "things",
        update=True,
    ),
    _rule(
        "not_uses",
        "use|using|drive",
        rf"{_SUBJ}(?:\s++{_DONT}\s++(?:use|uses|drive)|{_BE}\s++(?:not|no\s++longer)\s++using)"
        rf"\s++{_DET}{_NPS}",
        "things",
    ),
    _rule(
        "not_uses",
        "using|used",
        rf"{_SUBJ}\s++(?:stopped\s++using|quit\s++using|used\s++to\s++use)\s++{_DET}{_NPS}",
        "things",
        update=True,
    ),
    _rule(
        "likes",
        "like|love|enjoy|adore|into|fond|passionate|crazy|obsessed|keen|fan",
        rf"{_SUBJ}(?:\s++{_ADV}(?(me)(?:like|love|enjoy|adore)|(?:likes|loves|enjoys|adores))\s++"
        rf"(?:to\s++)?|{_BE}\s++{_ADV}(?:(?:so|very)\s++)?(?:into|fond\s++of|passionate\s++"
        rf"about|crazy\s++about|obsessed\s++with|keen\s++on|an?\s++(?:(?:big|huge|massive|"
        rf"great|real)\s++)?fan\s++of)\s++){_DET}{_LIKED}",
        "things",
    ),
    _rule(
        "not_likes",
        "like|love|enjoy|hate|dislike|detest|stand|into|fond|keen|fan",
        rf"{_SUBJ}(?:\s++{_DONT}\s++(?:really\s++)?(?:like|love|enjoy)|\s++{_ADV}(?(me)(?:hate|"
        rf"dislike|detest)|(?:hates|dislikes|detests))|\s++(?:can{_AP}t|cannot|can\s++not)\s++"
        rf"stand|{_BE}\s++"
        rf"(?:not|no\s++longer)\s++(?:really\s++)?(?:into|fond\s++of|keen\s++on|an?\s++"
        rf"(?:(?:big|huge)\s++)?fan\s++of))\s++(?:to\s++)?{_DET}{_NPS}",
        "things",
    ),
    _rule(
        "not_likes",
        "used",
        rf"{_SUBJ}\s++used\s++to\s++(?:like|love|enjoy)\s++{_DET}{_NPS}",
        "things",
        update=True,
    ),
    _rule(
        "named",
        "name|call|i'm|i\u2019m|i am|go by",
        rf"\b(?:[Mm]y\s++(?:(?:full|first|real)\s++)?name(?:{_AP}s|\s++is)|(?:[Cc]all|[Cc]alls|"
        rf"[Cc]alled)\s++me|(?:[Hh]i|[Hh]ello|[Hh]ey)(?:\s++(?:there|all|everyone))?\s*+[,!.]?"
        rf"\s*+I(?:{_AP}m|\s++am)|I(?:{_AP}m|\s++am)\s++called|I\s++go\s++by)\s++{_NAMED3}",
        "value",
    ),
)

_PORTUGUESE = (
    _rule(
        "lives_in",
        "mor|viv|resid",
        rf"(?:\b(?:[Mm]oro|[Vv]ivo|[Rr]esido|[Mm]oramos|[Vv]ivemos|{_PT_BUSY}\s++"
        rf"(?:a\s++morar|morando|a\s++viver|vivendo))|{_WHO}\s++{_PT_ADV}(?:mora|vive|reside|"
        rf"(?:está|anda)\s++(?:a\s++morar|morando|a\s++viver|vivendo)))\s++{_PT_ADV}{_PT_IN}"
        rf"\s++{_NAMED}",
    ),
    _rule(
        "lives_in", "morar", rf"\b[Ff]ui\s++morar\s++(?:{_PT_IN}|para|pra|pro)\s++{_ART}{_NAMED}"
    ),
    _rule(
        "lives_in",
        "mud",
        rf"(?:{_WHO}\s++(?:mudou-se|se\s++mudou)|\b(?:[Mm]udei-me|[Mm]e\s++mudei|[Mm]udámo-nos|"
        rf"[Mm]udamo-nos|[Nn]os\s++mudamos))\s++(?:para|pra|pro)\s++{_ART}{_NAMED}",
        update=True,
    ),
    _rule(
        "not_lives_in",
        "mor|viv|resid",
        rf"(?:{_WHO}\s++(?:já\s++)?não\s++(?:mora|vive)|{_PT_NEG}\s++(?:moro|vivo|moramos|"
        rf"vivemos|resido))\s++(?:mais\s++)?{_PT_IN}\s++{_NAMED}",
    ),
    _rule(
        "not_lives_in",
        "morava|vivia|deixei",
        rf"(?:(?:{_WHO}\s++|{_OWN_CLAUSE})(?:[Mm]orava|[Vv]ivia)|\b[Dd]eixei\s++de\s++"
        rf"(?:morar|viver))\s++{_PT_IN}\s++{_NAMED}",
        update=True,
    ),
    _rule(
        "works_at",
        "trabalh|sou",
        rf"(?:\b(?:[Tt]rabalho(?:\s++como\s++[a-z\u00e0-\u00ff]++)?|[Tt]rabalhamos|{_PT_BUSY}\s++"
        rf"(?:a\s++trabalhar|trabalhando)"
        rf"|[Ss]ou\s++(?:(?:um|uma)\s++)?[a-z\u00e0-\u00ff]++(?:\s++[a-z\u00e0-\u00ff]++)?(?=\s++"
        rf"(?:no|na|em|num|numa)\s))|{_WHO}\s++(?:trabalha|está\s++(?:a\s++trabalhar|"
        rf"trabalhando)))\s++{_PT_ADV}{_PT_AT}{_ORG}",
    ),
    _rule(
        "works_at",
        "consegui|arranjei|arrumei|trabalhar",
        rf"\b(?:(?:[Cc]onsegui|[Aa]rranjei|[Aa]rrumei)\s++(?:um\s++)?(?:novo\s++)?(?:emprego|"
        rf"trabalho|estágio|lugar)|(?:[Cc]omecei|[Pp]assei)\s++a\s++trabalhar)\s++{_PT_AT}"
        rf"{_NAMED}",
        update=True,
    ),
    _rule(
        "not_works_at",
        "trabalh",
        rf"(?:{_WHO}\s++(?:já\s++)?não\s++trabalha|{_PT_NEG}\s++trabalh(?:o|amos))\s++"
        rf"(?:mais\s++)?{_PT_AT}{_NAMED}",
    ),
    _rule(
        "not_works_at",
        "trabalh",
        rf"(?:(?:{_WHO}\s++|{_OWN_CLAUSE})[Tt]rabalhava|\b[Dd]eixei\s++de\s++trabalhar)\s++"
        rf"{_PT_AT}{_NAMED}",
        update=True,
    ),
    _rule(
        "owns",
        "tenho|tem|possu",
        rf"(?:\b(?:[Tt]enho|[Tt]emos|[Pp]ossuo)|{_WHO}\s++(?:tem|possui))\s++{_PT_ADV}{_PT_QTY}"
        rf"{_NPS}",
        "things",
    ),
    _rule(
        "owns",
        "compr",
        rf"(?:\b(?:[Cc]omprei|[Cc]ompramos|[Cc]omprámos)|{_WHO}\s++comprou)\s++"
        rf"(?:(?:agora|finalmente|ontem)\s++)?{_PT_QTY}{_NPS}",
        "things",
        update=True,
    ),
    _rule(
        "not_owns",
        "tenho|tem|possu",
        rf"(?:{_PT_NEG}\s++(?:tenho|temos|possuo)|{_WHO}\s++(?:já\s++)?não\s++tem)\s++"
        rf"(?:mais\s++)?(?:(?:um|uma|nenhum|nenhuma|o|a|os|as)\s++)?{_NPS}",
        "things",
    ),
    _rule(
        "not_owns",
        "vend|tinha|tínhamos",
        rf"(?:\b(?:[Vv]endi|[Vv]endemos)\s++{_DET}|{_OWN_CLAUSE}(?:[Tt]inha|[Tt]ínhamos)\s++"
        rf"{_PT_QTY})(?:(?:meu|minha|meus|minhas)\s++)?{_NPS}",
        "things",
        update=True,
    ),
    _rule(
        "uses",
        "uso|usa|utiliz|conduz|guio",
        rf"(?:\b(?:[Uu]so|[Uu]tilizo|[Uu]samos|[Uu]tilizamos|[Cc]onduzo|[Gg]uio|{_PT_BUSY}"
        rf"\s++(?:a\s++usar|usando|a\s++utilizar|utilizando))|{_WHO}\s++(?:usa|utiliza|conduz|"
        rf"está\s++(?:a\s++usar|usando)))\s++{_PT_ADV}{_PT_DET}{_NPS}",
        "things",
    ),
    _rule("uses", "dirijo", rf"\b[Dd]irijo\s++{_PT_DET}{_NAMED}"),
    _rule(
        "uses",
        "usa|utiliz",
        rf"\b(?:[Pp]assei|[Cc]omecei)\s++a\s++(?:usar|utilizar)\s++{_PT_DET}{_NPS}",
        "things",
        update=True,
    ),
    _rule(
        "not_uses",
        "uso|usa|utiliz",
        rf"(?:{_PT_NEG}\s++(?:uso|utilizo|usamos)|{_WHO}\s++(?:já\s++)?não\s++usa)\s++"
        rf"(?:mais\s++)?{_PT_DET}{_NPS}",
        "things",
    ),
    _rule(
        "not_uses",
        "deixei",
        rf"\b[Dd]eixei\s++de\s++(?:usar|utilizar)\s++{_PT_DET}{_NPS}",
        "things",
        update=True,
    ),
    _rule(
        "likes",
        "gost",
        rf"(?:\b(?:[Gg]osto|[Gg]ostamos)|{_WHO}\s++gosta)\s++{_PT_ADV}"
        rf"(?:(?:muito|bastante|imenso|mesmo|tanto)\s++)?{_PT_OF}{_LIKED}",
        "things",
    ),
    _rule(
        "likes",
        "ador|amo|ama|curt|sou|somos",
        rf"(?:(?:\b(?:[Aa]doro|[Aa]mo|[Cc]urto|[Aa]doramos|[Aa]mamos)|{_WHO}\s++(?:adora|ama|"
        rf"curte))\s++(?:(?:muito|mesmo|bué)\s++)?{_PT_DET}|\b(?:[Ss]ou|[Ss]omos)\s++(?:(?:muito|"
        rf"um|uma|grande|super)\s++){{0,2}}(?:fã|fãs|adepto|adepta|apaixonad[oa]|doid[oa]|"
        rf"louc[oa])\s++(?:de|do|da|dos|das|por|pelo|pela|pelos|pelas)\s++){_LIKED}",
        "things",
    ),
    _rule(
        "not_likes",
        "gost|odei|detest|abomin",
        rf"(?:(?:{_PT_NEG}\s++(?:gosto|gostamos)|{_WHO}\s++(?:já\s++)?não\s++gosta)\s++"
        rf"(?:(?:mais|muito|nada)\s++)?{_PT_OF}|\b(?:[Oo]deio|[Dd]etesto|[Aa]bomino)\s++"
        rf"{_PT_DET}){_NPS}",
        "things",
    ),
    _rule(
        "not_likes", "odeia|detesta", rf"{_WHO}\s++(?:odeia|detesta)\s++{_PT_DET}{_NPS}", "things"
    ),
    _rule(
        "not_likes",
        "deixei",
        rf"\b[Dd]eixei\s++de\s++gostar\s++{_PT_OF}{_NPS}",
        "things",
        update=True,
    ),
    _rule(
        "named",
        "nome|cham|sou|trat",
        rf"\b(?:[Mm]eu\s++nome\s++[ée]|[Mm]e\s++chamo|[Cc]hamo-me|[Cc]hamam-me|[Cc]hama-me|"
        rf"[Mm]e\s++chamam(?:\s++de)?|[Mm]e\s++chama\s++de|[Pp]odes?\s++chamar-me|[Pp]odes?\s++"
        rf"me\s++chamar(?:\s++de)?|[Mm]e\s++chame\s++de|[Cc]hame-me|[Ss]ou\s++(?:a|o)|"
        rf"(?:[Pp]odes?\s++)?(?:tratar-me|me\s++tratar|trata-me|me\s++tratam)\s++por|"
        rf"(?:[Oo]lá|[Oo]i)\s*+[,!.]?\s*+(?:eu\s++)?sou)\s++{_NAMED3}",
        "value",
    ),
)

_SPANISH = (
    _rule(
        "lives_in",
        "viv|resid",
        rf"(?:\b(?:[Vv]ivo|[Rr]esido|[Vv]ivimos|[Rr]esidimos|{_ES_BUSY}\s++viviendo)|{_WHO}"
        rf"\s++(?:vive|reside|está\s++viviendo))\s++{_ES_ADV}{_ES_IN}{_NAMED}",
    ),
    _rule(
        "lives_in",
        "mud|vivir",
        rf"(?:\b(?:[Mm]e\s++mudé|[Nn]os\s++mudamos|[Mm]e\s++(?:fui|vine)\s++a\s++vivir)|{_WHO}\s++se\s++"
        rf"mudó)\s++(?:a\s++{_ART}|al\s++|en\s++{_ART})?{_NAMED}",
        update=True,
    ),
    _rule(
        "not_lives_in",
        "viv|resid",
        rf"(?:{_ES_NEG}\s++(?:vivo|vivimos|resido)|{_WHO}\s++(?:ya\s++)?no\s++vive)\s++"
        rf"(?:más\s++)?{_ES_IN}{_NAMED}",
    ),
    _rule(
        "not_lives_in",
        "viví|dej",
        rf"(?:(?:{_WHO}\s++|{_OWN_CLAUSE})(?:[Vv]ivía|[Vv]ivíamos)|\b[Dd]ejé\s++de\s++vivir)\s++"
        rf"{_ES_IN}{_NAMED}",
        update=True,
    ),
    _rule(
        "works_at",
        "trabaj|soy",
        rf"(?:(?:\b(?:[Tt]rabajo(?:\s++(?:como|de)\s++[a-z\u00e0-\u00ff]++)?|[Tt]rabajamos|"
        rf"{_ES_BUSY}\s++trabajando)|{_WHO}\s++(?:trabaja|está\s++trabajando))\s++{_ES_ADV}{_ES_AT}|\b[Ss]oy\s++(?:(?:un|una)\s++)?"
        rf"[a-z\u00e0-\u00ff]++(?:\s++[a-z\u00e0-\u00ff]++)?\s++{_ES_IN}){_ORG}",
    ),
    _rule(
        "works_at",
        "consegu|encontr|trabajar",
        rf"\b(?:(?:[Cc]onseguí|[Ee]ncontré)\s++(?:un\s++)?(?:nuevo\s++)?(?:trabajo|empleo|puesto|"
        rf"curro)|(?:[Ee]mpecé|[Cc]omencé)\s++a\s++trabajar)\s++{_ES_AT}{_NAMED}",
        update=True,
    ),
    _rule(
        "not_works_at",
        "trabaj",
        rf"(?:{_ES_NEG}\s++trabaj(?:o|amos)|{_WHO}\s++(?:ya\s++)?no\s++trabaja)\s++(?:más\s++)?"
        rf"{_ES_AT}{_NAMED}",
    ),
    _rule(
        "not_works_at",
        "trabaj",
        rf"(?:(?:{_WHO}\s++|{_OWN_CLAUSE})[Tt]rabajaba|\b[Dd]ejé\s++de\s++trabajar)\s++{_ES_AT}"
        rf"{_NAMED}",
        update=True,
    ),
    _rule(
        "owns",
        "ten|tien|pose",
        rf"(?:\b(?:[Tt]engo|[Tt]enemos|[Pp]oseo)|{_WHO}\s++(?:tiene|posee))\s++{_ES_ADV}{_ES_QTY}"
        rf"{_NPS}",
        "things",
    ),
    _rule(
        "owns",
        "compr",
        rf"(?:\b(?:(?:[Mm]e|[Nn]os)\s++)?(?:[Cc]ompr(?:é|amos)|h(?:e|emos)\s++comprado)|{_WHO}"
        rf"\s++(?:se\s++)?compró)\s++"
        rf"(?:(?:ya|ayer)\s++)?{_ES_QTY}{_NPS}",
        "things",
        update=True,
    ),
    _rule(
        "not_owns",
        "ten|tien|pose",
        rf"(?:{_ES_NEG}\s++(?:tengo|tenemos|poseo)|{_WHO}\s++(?:ya\s++)?no\s++tiene)\s++"
        rf"(?:más\s++)?(?:(?:un|una|ningún|ninguna|el|la|los|las|mi|mis)\s++)?{_NPS}",
        "things",
    ),
    _rule(
        "not_owns",
        "vend|ten",
        rf"(?:\b(?:[Vv]endí|[Vv]endimos)\s++(?:(?:el|la|los|las|mi|mis)\s++)?|(?:{_WHO}\s++|"
        rf"{_OWN_CLAUSE})[Tt]enía\s++{_ES_QTY}){_NPS}",
        "things",
        update=True,
    ),
    _rule(
        "uses",
        "uso|usa|utiliz|condu",
        rf"(?:\b(?:[Uu]so|[Uu]tilizo|[Uu]samos|[Uu]tilizamos|[Cc]onduzco|{_ES_BUSY}\s++"
        rf"(?:usando|utilizando))|{_WHO}\s++(?:usa|utiliza|conduce|está\s++usando))\s++{_ES_ADV}"
        rf"{_ES_DET}{_NPS}",
        "things",
    ),
    _rule("uses", "manejo", rf"\b[Mm]anejo\s++{_ES_DET}{_NAMED}"),
    _rule(
        "uses",
        "usa|utiliz",
        rf"\b(?:[Ee]mpecé|[Cc]omencé)\s++a\s++(?:usar|utilizar)\s++{_ES_DET}{_NPS}",
        "things",
        update=True,
    ),
    _rule(
        "not_uses",
        "uso|usa|utiliz",
        rf"(?:{_ES_NEG}\s++(?:uso|utilizo|usamos)|{_WHO}\s++(?:ya\s++)?no\s++usa)\s++"
        rf"(?:más\s++)?{_ES_DET}{_NPS}",
        "things",
    ),
    _rule(
        "not_uses",
        "dej",
        rf"\b[Dd]ejé\s++de\s++(?:usar|utilizar)\s++{_ES_DET}{_NPS}",
        "things",
        update=True,
    ),
    _rule(
        "likes",
        "gust|encant|fascin|apasion|ador|amo|ama|disfrut|soy|somos",
        rf"(?:(?:\b(?:[Mm]e|[Nn]os)|\b[Aa]\s++{_WHO}\s++le)\s++(?:gusta|gustan|encanta|"
        rf"encantan|fascina|fascinan|apasiona|apasionan)\s++{_ES_ADV}(?:(?:muchísimo|bastante)"
        rf"\s++)?|\b(?:[Aa]doro|[Aa]mo|[Dd]isfruto|[Aa]doramos|[Dd]isfrutamos)\s++(?:(?:mucho|"
        rf"muchísimo)\s++)?(?:(?:de|del)\s++)?|\b(?:[Ss]oy|[Ss]omos)\s++(?:(?:muy|un|una|gran)"
        rf"\s++){{0,2}}(?:fan|fanático|fanática|aficionado|aficionada|hincha|seguidor|seguidora)"
        rf"\s++(?:de|del)\s++){_ES_DET}{_LIKED}",
        "things",
    ),
    _rule(
        "not_likes",
        "gust|encant|odi|detest|soport|aguant",
        rf"(?:(?:{_ES_NEG}\s++(?:me|nos)|\b[Aa]\s++{_WHO}\s++(?:ya\s++)?no\s++le)\s++"
        rf"(?:gusta|gustan|encanta|encantan)\s++(?:(?:mucho|nada|más)\s++)?|\b(?:[Oo]dio|"
        rf"[Dd]etesto|[Nn]o\s++soporto|[Nn]o\s++aguanto)\s++){_ES_DET}{_NPS}",
        "things",
    ),
    _rule(
        "likes",
        "adora|ama|disfruta",
        rf"{_WHO}\s++(?:adora|ama|disfruta)\s++(?:(?:de|del)\s++)?{_ES_DET}{_NPS}",
        "things",
    ),
    _rule("not_likes", "odia|detesta", rf"{_WHO}\s++(?:odia|detesta)\s++{_ES_DET}{_NPS}", "things"),
    _rule(
        "not_likes",
        "gustarme",
        rf"\b[Dd]ej[óé]\s++de\s++gustarme\s++{_ES_DET}{_NPS}",
        "things",
        update=True,
    ),
    _rule(
        "named",
        "llam|llám|nombre|dicen|soy",
        rf"\b(?:(?:[Yy]o\s++)?[Mm]e\s++llamo|[Mm]i\s++nombre\s++es|[Mm]e\s++(?:dicen|llaman)|"
        rf"[Mm]e\s++llama|[Ll]l[áa]mame|[Pp]uedes?\s++llamarme|[Ss]oy)\s++{_NAMED3}",
        "value",
    ),
)

_RULES = _GENERAL + _ENGLISH + _PORTUGUESE + _SPANISH
_KEYS = frozenset(key for rule in _RULES for key in rule.keys)

_SENTENCE_END = re.compile(r"[.!?]++|\n")
_HEDGE = re.compile(
    r"\b(?:if|whether|thinks|believes|says|said|claims|assumes|wish|wishes|imagine|pretend|"
    r"suppose|maybe|perhaps|acha|acham|pensa|pensam|disse|disseram|diz|dizem|acredita|talvez|"
    r"caso|imagina|cree|creen|piensa|piensan|dice|dijo|dijeron|si|quizás|quizá|ojalá|supone)\b",
    re.IGNORECASE,
)
_HEDGE_WINDOW = 60
_SPLIT = re.compile(r"\s*,\s*(?:(?:and|e|y)\s+)?|\s+(?:and|or|e|ou|y)\s+")
_LEADING = re.compile(
    r"^(?:(?:de|do|da|dos|das|del|of|the|an?|my|our|his|her|their|o|os|as|um|uma|meu|minha|"
    r"meus|minhas|el|la|los|las|un|una|mi|mis)\s+)+",
    re.IGNORECASE,
)
_LEADING_NAME = re.compile(_name("name"))


def _words(text: str, sep: str | None = None) -> frozenset[str]:
    return frozenset(text.casefold().split(sep))


_NOT_THINGS = _words(
    "question questions problem problems idea ideas chance doubt plan plans point reason "
    "suggestion issue concern sense hunch clue thing things way kind sort lot lots bit "
    "moment minute choice need habit job sister brother mother father mom mum dad wife "
    "husband partner son daughter kids kid children child family friend friends boyfriend "
    "girlfriend pergunta perguntas problema problemas ideia ideias dúvida dúvidas plano "
    "planos jeito coisa coisas emprego irmã irmão irmãos filho filha filhos mãe pai marido "
    "mulher namorado namorada família amigo amiga amigos amigas pregunta preguntas duda "
    "dudas plan planes cosa cosas trabajo hermano hermana hermanos hijo hija hijos madre "
    "padre esposa esposo novio novia familia"
)
"""Abstract nouns and people: no object of owns, uses or likes ("I like the idea")."""
_NOT_OWNED = _NOT_THINGS | _words(
    "meeting appointment headache cold fever feeling dream class exam test date call flight "
    "break favour favor interview deadline time party trip reunião consulta dor sonho aula "
    "aulas exame teste encontro chamada voo fome sede medo frio calor pressa razão sono "
    "tempo vontade certeza festa viagem reunión cita dolor sueño clase clases examen prueba "
    "llamada vuelo hambre sed miedo frío prisa razón tiempo ganas fiesta viaje"
)
"""States and events besides: had, not owned ("I have a meeting", "tengo frío")."""
_PLACES = _words(
    "Lisboa|Lisbon|Porto|Braga|Coimbra|Faro|Aveiro|Viseu|Madrid|Barcelona|Sevilla|Seville|"
    "Valencia|Bilbao|Málaga|Malaga|Granada|Zaragoza|São Paulo|Sao Paulo|Rio de Janeiro|"
    "Brasília|Curitiba|Salvador|Recife|Fortaleza|Belo Horizonte|Porto Alegre|Buenos Aires|"
    "México|Mexico|Ciudad de México|Bogotá|Lima|Santiago|Quito|Caracas|Montevideo|Londres|"
    "London|Paris|París|Berlin|Berlim|Berlín|Roma|Rome|Nova Iorque|Nueva York|New York|"
    "Portugal|Espanha|España|Spain|Brasil|Brazil|Argentina|Chile|Colombia|Colômbia|Perú|"
    "Peru|França|Francia|France|Alemanha|Alemania|Germany|Itália|Italia|Italy|Inglaterra|"
    "England|Europa|Europe",
    "|",
)
"""Places: "trabalho em Lisboa" and "trabajo en Madrid" say where, not for whom."""


# --- contrast: what is so, set against what is not -------------------------------------------

_CLAUSE_END = (  # a contrasted object ends where its clause does, or a conjunction follows
    r"(?=\s*+(?:[.,;:!?)\]\u2014\u2013]|$)|\s++(?i:and|or|but|now|e|ou|mas|agora|y|pero|sino|"
    r"ahora)(?!\w))"
)


@dataclass(frozen=True)
class _Contrast:
    """How one language sets what is so against what is not, around a claim:

    - *denied after*: a claim, then the object it denies ("Ana moved to Porto, not
      Lisbon", "mudou-se para o Porto, e não para Lisboa", "vive en Valencia, no en
      Madrid", "I use Vim instead of Emacs"): the claim is a correction, and denies
      that object (``not_<P>``, for P in :data:`NEGATABLE`; a functional P's change
      supersedes the other value already, see ``_replacing``);
    - *asserted after*: a denial, then the object that is so ("I don't live in Madrid but
      in Valencia", "não mora em Madrid, mas em Valência", "no vive en Madrid sino en
      Valencia"): the denial is a correction, and asserts that object (``P``);
    - *swapped*: both inside one claim ("lives not in Madrid but in Valencia", "mora não
      em Madrid mas em Valência", "vive no en Madrid sino en Valencia"), read as
      "lives in Valencia, not in Madrid" before the rules read the text.

    Each field is a regular expression source, matched in any case; each rule contrasts
    in its own language, so Portuguese "no" ("in the") is never read as Spanish "no". A
    contrasted object is a name, or for things a phrase with its article or a single
    word, and its clause ends right after it ("but Valencia is nice" asserts nothing of
    Valencia).
    """

    neg: str  # the negation word
    conj: str  # what may join the denied object to the claim before "not": "and", "but"
    preps: str  # a preposition the contrasted object may repeat: "not *in* Lisbon"
    arts: str  # an article or possessive before it
    instead: str  # "instead of X": X denied
    but: str  # "not X but Y": Y asserted


_CONTRASTS = {
    "en": _Contrast(
        neg="not",
        conj="and|but",
        preps="in|at|for|to|from|with|on|into",
        arts="the|an?|my|our|his|her|their",
        instead=r"instead\s++of|rather\s++than",
        but=r"but(?:\s++rather)?",
    ),
    "pt": _Contrast(
        neg="n[ãa]o",
        conj="e|mas",
        preps="em|no|na|nos|nas|num|numa|para|pra|pro|a|ao|à|aos|às|de|do|da|dos|das|com",
        arts="o|a|os|as|um|uma|meu|minha",
        instead=r"em\s++vez\s++d[eoa]s?|ao\s++inv[ée]s\s++d[eoa]s?|em\s++lugar\s++d[eoa]s?",
        but=r"mas(?:\s++sim)?|e\s++sim",
    ),
    "es": _Contrast(
        neg="no",
        conj="y|pero",
        preps="en|a|al|para|de|del|con",
        arts="el|la|los|las|un|una|mi|mis",
        instead=r"en\s++vez\s++de|en\s++lugar\s++de",
        but="sino",
    ),
}
_LANG_OF = {
    rule: lang
    for lang, rules in (("en", _GENERAL + _ENGLISH), ("pt", _PORTUGUESE), ("es", _SPANISH))
    for rule in rules
}


def _contrasted_object(c: _Contrast, kind: str) -> str:
    """A contrasted object (group ``obj``) after an optional preposition and article."""
    lead = rf"(?:(?i:{c.preps})\s++)?(?:(?i:{c.arts})\s++)?"
    if kind == "entity":
        return lead + _NAMED + _CLAUSE_END
    phrase = rf"(?:(?i:{c.arts})\s++(?P<obj>{_NP1})|(?P<one>{_WORD}))"
    return rf"(?:(?i:{c.preps})\s++)?{phrase}{_CLAUSE_END}"


def _denied_after(c: _Contrast, kind: str) -> str:
    lead = rf"(?:\s*+[,(\u2014\u2013]\s*+(?:(?i:{c.conj})\s++)?|\s++(?i:{c.conj})\s++)"
    return rf"(?:{lead}(?i:{c.neg})|\s++(?i:{c.instead}))\s++{_contrasted_object(c, kind)}"


def _asserted_after(c: _Contrast, kind: str) -> str:
    return rf"(?:\s*+,)?\s++(?i:{c.but})\s++{_contrasted_object(c, kind)}"


def _swapped(c: _Contrast) -> str:
    side = rf"(?:(?i:{c.preps})\s++)?(?:(?i:{c.arts})\s++)?{_name_words(4)}"
    return (
        rf"(?<!\w)(?P<neg>(?i:{c.neg}))\s++(?P<x>{side})(?:\s*+,)?\s++(?i:{c.but})\s++(?P<y>{side})"
    )


def _follows(rule: _Rule) -> re.Pattern[str]:
    """What may follow a match of ``rule`` to contrast it (see :class:`_Contrast`)."""
    c = _CONTRASTS[_LANG_OF[rule]]
    kind = "entity" if rule.kind == "entity" else "things"
    after = _asserted_after if rule.template.startswith("not_") else _denied_after
    return _compiled(after(c, kind))


def _unswapped(text: str) -> str:
    """``text`` with each "not X but Y" inside a claim read as "Y, not X"."""
    for contrast in _CONTRASTS.values():
        pattern = _compiled(_swapped(contrast))
        text = pattern.sub(lambda m: f"{m['y']}, {m['neg']} {m['x']}", text)
    return text


# --- extraction --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Found:
    """A claim as the text holds it: the span its words matched, and the span of its
    object where the text says the object is not so (None when it asserts it)."""

    span: tuple[int, int]
    claim: RelationCandidate
    denied: tuple[int, int] | None = None


class PatternRelations:
    """Extracts explicit claims with regular patterns (English, Portuguese, Spanish)."""

    interpretation = Interpretation("relations", "patterns", "areamem-patterns", "3")

    def extract(self, fragment: FragmentView) -> list[RelationCandidate]:
        text = fragment.text
        if _NEGATIONS.search(text):
            text = _unswapped(text)
        found: dict[tuple[str, str, str], RelationCandidate] = {}
        for candidate in _replacing(_without_negated(_read(text))):
            key = (candidate.subject, candidate.predicate, candidate.obj.casefold())
            found.setdefault(key, candidate)
        return list(found.values())


def denied_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` says something is not so, as ``(start, end)`` spans, sorted: the
    object of a denial ("I don't live in *Lisbon*", "a Ana não mora em *Lisboa*"), the
    denied side of a contrast ("Porto, not *Lisbon*", "no *en Madrid* sino en Valencia",
    "instead of *tea*") and what a negation opens ("..., not *the bakery*", "nem *Lisboa*").
    A denial worded as an update ("I sold *my car*", "I used to live in *Lisbon*") says the
    object was so, and is no span."""
    spans = [f.denied for f in _read(text) if f.denied is not None]
    return sorted(spans + _negated_phrases(text))


def _read(text: str) -> list[_Found]:
    """Every claim the rules find in ``text``, in rule order (a claim a contrast implies
    right by the claim it follows)."""
    correction = CORRECTION.search(text) is not None
    folded = text.casefold()
    present = {key for key in _KEYS if key in folded}
    sentences = _Sentences(text)
    found: list[_Found] = []
    for rule in _RULES:
        if present.isdisjoint(rule.keys):
            continue
        for match in rule.pattern.finditer(text):
            if not (rule.guarded and sentences.unasserted(match.start(), match.end())):
                found.extend(_readings(rule, match, correction))
    return found


def _readings(rule: _Rule, match: re.Match[str], correction: bool) -> list[_Found]:
    """The claims of one match, and those of a contrast right after it: "Porto, not
    Lisbon" adds the denial of Lisbon after the claim; "not Madrid but Valencia" adds
    the claim of Valencia before the denial (the claim is classified first, so its
    change is what supersedes Madrid)."""
    groups = match.groupdict()
    subject = groups.get("subj") or SPEAKER  # no name: "I", "we" or a first-person verb
    predicate = rule.template.format(
        rel=(groups.get("rel") or "").lower().replace(" ", "_"),
        what=(groups.get("what") or "").lower(),
    )
    follow = _follows(rule).match(match.string, match.end())
    marked = correction or rule.update or follow is not None
    denies = predicate.startswith("not_") and not rule.update
    own = [
        _Found(match.span(), claim, match.span("obj") if denies else None)
        for claim in _candidates(subject, predicate, rule.kind, groups["obj"], marked, match[0])
    ]
    other = opposite(predicate)
    if follow is None or other is None:
        return own
    obj = "obj" if follow["obj"] is not None else "one"
    implied = [
        _Found(follow.span(), claim, None if denies else follow.span(obj))
        for claim in _candidates(subject, other, rule.kind, follow[obj], True, follow[0])
    ]
    return implied + own if denies else own + implied


def _replacing(claims: Iterator[RelationCandidate]) -> Iterator[RelationCandidate]:
    """The claims of a text that denies one value of a functional predicate and asserts
    another for the same subject ("I don't live in Madrid, I live in Valencia", "no vive
    en Madrid sino en Valencia"): the assertion, marked as a correction (the text
    replaces the one value by the other, so the change supersedes what it denies), and
    not the denial, which says no more than that change. Other claims are kept as
    they are."""
    listed = list(claims)
    denied = {
        (c.subject, c.predicate[4:]): c.obj.casefold()
        for c in listed
        if c.predicate.startswith("not_")
    }
    replaced = {
        (c.subject, c.predicate)
        for c in listed
        if is_functional(c.predicate)
        and denied.get((c.subject, c.predicate)) not in (None, c.obj.casefold())
    }
    for claim in listed:
        if (claim.subject, claim.predicate.removeprefix("not_")) not in replaced:
            yield claim
        elif not claim.predicate.startswith("not_"):
            yield dataclasses.replace(claim, correction=True)


class _Sentences:
    """Where the sentences of a text end, to tell a question or a hedged clause (one
    pass over the text, on the first lookup; each lookup is a bisection and a bounded
    window search)."""

    def __init__(self, text: str) -> None:
        self._text = text

    @functools.cached_property
    def _bounds(self) -> tuple[list[int], list[int], list[bool]]:
        ends = list(_SENTENCE_END.finditer(self._text))
        return [m.start() for m in ends], [m.end() for m in ends], ["?" in m[0] for m in ends]

    def unasserted(self, start: int, end: int) -> bool:
        """Whether text[start:end] sits in a question or after a hedge in its sentence."""
        starts, ends, questions = self._bounds
        after = bisect_left(starts, end)
        if after < len(starts) and questions[after]:
            return True
        before = bisect_right(ends, start) - 1
        begin = max(ends[before] if before >= 0 else 0, start - _HEDGE_WINDOW)
        return _HEDGE.search(self._text, begin, start) is not None


def _candidates(
    subject: str, predicate: str, kind: str, text: str, correction: bool, evidence: str
) -> Iterator[RelationCandidate]:
    excluded = _NOT_OWNED if predicate.endswith("owns") else _NOT_THINGS
    for obj, is_entity in _objects(kind, text, excluded):
        if predicate.endswith("works_at") and obj.casefold() in _PLACES:
            continue
        yield RelationCandidate(
            subject=subject,
            predicate=predicate,
            obj=obj,
            obj_is_entity=is_entity,
            confidence=0.8,
            correction=correction,
            evidence=evidence,
        )


def _objects(kind: str, text: str, excluded: frozenset[str]) -> Iterator[tuple[str, bool]]:
    """The objects a match names: one entity or value, or each phrase of a list (less
    those with an ``excluded`` word)."""
    if kind != "things":
        yield text.strip(), kind == "entity"
        return
    for index, piece in enumerate(_SPLIT.split(text)):
        # the rule consumed the first phrase's article; a later one keeps its own ("e o gato")
        phrase = _LEADING.sub("", piece.strip()) if index else piece.strip()
        if not phrase or any(w.casefold() in excluded for w in phrase.split()):
            continue
        name = _LEADING_NAME.fullmatch(phrase) if phrase[0].isupper() else None
        yield phrase, name is not None  # an entity when all of it is a name


def _without_negated(found: list[_Found]) -> Iterator[RelationCandidate]:
    """The candidates, less each positive claim whose words overlap a negated one of the
    same predicate ("no *me gusta el café*", "já não *gosto de jazz*"); O(n log n)."""
    negated: dict[str, list[tuple[int, int]]] = {}
    for f in found:
        if f.claim.predicate.startswith("not_"):
            negated.setdefault(f.claim.predicate[4:], []).append(f.span)
    reach = {p: _Reach(spans) for p, spans in negated.items()}
    for f in found:
        spans = reach.get(f.claim.predicate)
        if spans is None or not spans.overlaps(*f.span):
            yield f.claim


class _Reach:
    """Spans sorted by start with the running maximum of their ends: whether any span
    overlaps ``[start, end)`` is one bisection."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        spans = sorted(spans)
        self._starts = [s for s, _ in spans]
        self._reach = list(itertools.accumulate((e for _, e in spans), max))

    def overlaps(self, start: int, end: int) -> bool:
        before = bisect_left(self._starts, end)  # the spans that start before ``end``
        return before > 0 and self._reach[before - 1] > start


# --- negated phrases, claim or none --------------------------------------------------------------

_NEGATIONS = re.compile(r"(?<!\w)(?i:not|n[ãa]o|no|nem|nor|neither)(?!\w)|n['\u2019]t(?!\w)")
_INSTEAD = re.compile(r"(?i:instead|rather|vez|inv[ée]s|lugar)")
_PHRASE = r"(?P<x>[^\n,.;:!?()\[\]\u2014\u2013]{1,80}+)"
_ANY_PREP = (
    "in|at|for|to|from|with|on|into|the|an?|my|em|no|na|nos|nas|num|numa|para|pra|pro|ao|à|"
    "de|do|da|dos|das|com|o|os|as|um|uma|en|al|del|el|la|los|las|un|una|mi"
)
_NOT_NEGATED = (  # "not only", "não sei", "no sé": no phrase denied
    "only|just|because|that|to|even|yet|so|too|sure|really|quite|very|all|exactly|"
    "necessarily|much|many|always|ever|once|long|far|s[óo]|apenas|sei|que|é\\s++que|e"
)
_NEGATED_PHRASES = (
    # a negation opening a clause: "..., not the bakery", "e não em Lisboa", "nem Lisboa"
    rf"(?:^|(?<=[,;:.!?(\n\u2014\u2013])|(?<![\w'\u2019])(?i:and|but|or|e|mas|ou|pero)\s++)"
    rf"\s*+(?i:not|n[ãa]o|nem|nor|neither)\s++(?!(?i:{_NOT_NEGATED})(?!\w)){_PHRASE}",
    # a negation before a preposition, an article or a name: "not in Lisbon", "não o Porto",
    # "it isn't Lisbon"
    rf"(?<![\w'\u2019])(?i:not|n[ãa]o|(?:is|was|are|were)n{_AP}t)\s++"
    rf"(?=(?i:{_ANY_PREP})\s|[A-Z\u00c0-\u00de]){_PHRASE}",
    # Spanish "no" before a preposition or a copula, or after "y" ("no en Madrid", "no es
    # Madrid", "y no Madrid"): never "no" alone, Portuguese for "in the" ("no Porto")
    r"(?<!\w)(?:(?i:no)\s++(?=(?i:en|a|al|para|con|del?|es|era|fue)\s)|(?i:y)\s++(?i:no)\s++)"
    + _PHRASE,
    r"(?<!\w)(?i:no)\s++(?P<x>[^\n,.;:!?]{1,60}?)(?=(?:\s*+,)?\s++(?i:sino)(?!\w))",
    # "instead of tea", "em vez do Porto", "en lugar de Madrid"
    r"(?<!\w)(?i:instead\s++of|rather\s++than|em\s++vez\s++d[eoa]s?|ao\s++inv[ée]s\s++"
    rf"d[eoa]s?|em\s++lugar\s++d[eoa]s?|en\s++vez\s++de|en\s++lugar\s++de)\s++{_PHRASE}",
)
_JOIN = re.compile(r"\s(?:but|and|or|mas|e|ou|sino|pero|y|porque|because)\s", re.IGNORECASE)


def _negated_phrases(text: str) -> list[tuple[int, int]]:
    """The spans negations open in ``text``, each to the end of its clause (a
    conjunction ends it: "not in Madrid *but* in Valencia")."""
    if not _NEGATIONS.search(text) and not _INSTEAD.search(text):
        return []
    spans = []
    for regex in _NEGATED_PHRASES:
        for match in _compiled(regex).finditer(text):
            start, end = match.span("x")
            join = _JOIN.search(text, start, end)
            spans.append((start, join.start() if join else end))
    return spans


def is_functional(predicate: str) -> bool:
    """Whether the predicate holds a single value at a time (a new value is a change)."""
    return predicate in FUNCTIONAL or predicate.startswith(FUNCTIONAL_PREFIXES)


def opposite(predicate: str) -> str | None:
    """The predicate that denies ``predicate`` and back (``likes`` <-> ``not_likes``), or
    None for a predicate without a negated form."""
    if predicate in NEGATABLE:
        return "not_" + predicate
    if predicate.startswith("not_") and predicate[4:] in NEGATABLE:
        return predicate[4:]
    return None
