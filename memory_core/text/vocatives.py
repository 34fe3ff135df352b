"""Vocatives: the names a turn addresses its listener by ("Hey Kate!", "Obrigado, Zé").

People are often called by a name other than the label their turns carry, and ask about
them by that name. What the other speaker calls them is the evidence: a *vocative* is a
name set apart to address someone, in English, Portuguese or Spanish, in one of three
places only:

* after a greeting, thanks or an interjection that opens a sentence or follows a comma
  ("Cool, thanks Mel!"), an interjection's name set apart by punctuation ("Whoa, Mel,
  that's serious", not "Wow, Chicago sounds great"): "Hey Kate!",
  "Thanks, Jo.", "Yeah Mel, let's go", "Oi Bia, tudo bem?", "Obrigada Zé", "Hola
  Carlitos", "¿Qué tal, Pepa?", "Bom dia, Rui";
* at the start of the turn, one word before a comma and what goes on talking to the
  listener: "Kate, did you ...", "Bia, olha isto" (not "Edinburgh, Scotland would be
  great", nor "Emma Watson, she's a big supporter", nor a function word with a letter
  too many: "Shure, I will");
* after a comma, ending a sentence with ``!``, ``?`` or ``.``: "That's great, Mel!",
  "¿Vienes mañana, Pepa?" (not after a possessive or an article, which makes an
  apposition: "I saw my sister, Kate.").

A name is one or two capitalised words of letters (an apostrophe or hyphen inside), each
at most :data:`MAX_WORD` characters, followed by punctuation, an emoji, the end of the
text, or a lower-case word ("Hey Mel how are you"). It is never a function word, a
question word, an interjection ("Hey, What?", "Oh God,", "¡Dios mío!"), a common word
("Honey", "Guys", "Amigo"), a term of endearment or address ("Dude", "Bro", "Mate"), a
day or month, or a chat role ("user"). "I saw Kate yesterday" has no vocative: the name
is talked about, not addressed.

Which speaker a vocative addresses is formation's business (:mod:`memory_core.formation
.stages.addressing`); this module only reads the text. Cost: one regular-expression pass
over at most :data:`MAX_CHARS` characters.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from .lexicon import is_calendar_word, is_common_word, is_function_word, plain
from .names import ROLE_NAMES

__all__ = ["MAX_CHARS", "MAX_WORD", "Vocative", "vocatives"]

MAX_CHARS = 4_000
"""Only the head of a turn is read (a vocative opens or closes a short sentence)."""
MAX_WORD = 20
"""Longer words are no name a person is called by (a pasted token, a hash)."""

_GREETINGS = (
    r"hey|hi|hiya|heya|hello|howdy|thanks|thank\s+you|thx|cheers|congrats|congratulations"
    r"|good\s+(?:morning|afternoon|evening|night)|welcome\s+back|bye|goodbye"
    r"|oi|olá|ola|obrigad[oa]|valeu|parabéns|bom\s+dia|boa\s+(?:tarde|noite)|tchau|e\s+aí"
    r"|hola|gracias|oye|qué\s+tal|que\s+tal|buen[oa]s\s+(?:días|dias|tardes|noches)"
    r"|felicidades|adiós|adios|chao|chau"
)
_INTERJECTIONS = (
    r"yeah|yes|yep|oh|aw+|wow|whoa|woah|ok|okay|sure|hmm+|haha|gosh|sim|claro|nossa|uau"
    r"|sí|vale|bueno|guau|vaya"
)
_WORD = rf"[^\W\d_](?:[^\W\d_]|['\u2019-](?=[^\W\d_])){{0,{MAX_WORD - 1}}}"
_NAME = rf"(?P<name>{_WORD}(?:[ ]{_WORD})?)"
_AFTER = r"(?=[,.!?;:…)\s]|$|[^\w\s])"
_OPENS = r"(?:^|(?<=[.!?…\n,]))[¡¿\s]*"
_GREETED = re.compile(rf"{_OPENS}(?:{_GREETINGS})\b,?\s+{_NAME}{_AFTER}", re.IGNORECASE)
_EXCLAIMED = re.compile(
    rf"{_OPENS}(?:{_INTERJECTIONS})\b,?\s+(?P<name>{_WORD})\s*[,.!?…]", re.IGNORECASE
)
_LEADING = re.compile(rf"^[¡¿\s]*(?P<name>{_WORD}),\s*(?P<next>[^\W\d_]+)?")
_TRAILING = re.compile(rf"[^\W\d_]\s*,\s*{_NAME}\s*[!?.]+(?=\s|$|[^\w\s])")
_BEFORE = re.compile(r"[^\W\d_]+")
_DETERMINERS = frozenset(
    {"my", "your", "his", "her", "our", "their", "the", "a", "an", "meu", "minha", "teu"}
    | {"tua", "seu", "sua", "nosso", "nossa", "o", "os", "as", "um", "uma", "mi", "tu", "su"}
    | {"el", "la", "los", "las", "un", "una", "nuestro", "nuestra", "mis", "tus", "sus"}
)
"""A determiner among the two words before ", Name." makes an apposition ("I saw my
sister, Kate."; "the advice, Mel!" is lost with it: a wrong name is the worse error)."""
_LISTING = frozenset({"and", "e", "y", "or", "ou", "o", "called", "named", "chamado"})
_LISTING |= {"chamada", "llamado", "llamada"}
"""A word just before ", Name." that makes it one of a list or a name given."""
_REPLY_WORDS = frozenset(
    {"sure", "yeah", "yes", "well", "okay", "right", "thanks", "totally", "agreed", "great"}
    | {"exactly", "nice", "cool", "awesome", "claro", "vale", "bueno", "valeu", "obrigado"}
)
_GREETING = re.compile(rf"(?:{_GREETINGS}|{_INTERJECTIONS})", re.IGNORECASE)
_NOT_NAMES = frozenset(
    {"god", "dios", "deus", "jesus", "jesús", "lord", "christ", "cristo", "senhor", "señor"}
    | {"dude", "bro", "sis", "mate", "babe", "baby", "buddy", "bud", "pal", "bestie", "dear"}
    | {"darling", "sweetie", "sweetheart", "hun", "hon", "fam", "folks", "y'all", "yall"}
    | {"mom", "mum", "mama", "mamma", "dad", "daddy", "papa", "mamãe", "mãe", "pai", "papá"}
    | {"mamá", "madre", "padre", "tía", "tío", "tia", "tio", "mano", "mana", "cara", "gente"}
    | {"pessoal", "galera", "chicos", "chicas", "chica", "chico", "amor", "querida", "querido"}
    | {"mío", "mio", "mía", "mia", "meu", "minha", "omg", "lol", "haha", "wow", "yay", "ok"}
    | {"okay", "yes", "yeah", "no", "nope", "sure", "man", "girl", "boy", "everyone"}
    | {"everybody", "all", "guys", "team", "there", "again", "so", "much", "a", "lot"}
)
"""Words that address nobody in particular, or exclaim."""


@dataclass(frozen=True, slots=True)
class Vocative:
    """A name that addresses the listener: ``text[start:end]``, and the pattern that
    found it (``greeting``, ``leading`` or ``trailing``)."""

    name: str
    start: int
    end: int
    cue: str


def vocatives(text: str) -> list[Vocative]:
    """The vocatives of ``text`` (see the module), in order, one per span.

    Invariant: each is a name by :func:`_is_name`, and ``text[start:end] == name``.
    """
    head = text[:MAX_CHARS]
    found: dict[int, Vocative] = {}
    for match in _GREETED.finditer(head):
        _keep(found, match, "greeting")
    for match in _EXCLAIMED.finditer(head):
        _keep(found, match, "greeting")
    leading = _LEADING.match(head)
    if leading is not None and _goes_on(leading.group("next")) and not _typo(leading["name"]):
        _keep(found, leading, "leading")
    for match in _TRAILING.finditer(head):
        if _addressing(head[max(0, match.start() - 80) : match.start() + 1]):
            _keep(found, match, "trailing")
    return [found[start] for start in sorted(found)]


def _typo(word: str) -> bool:
    """Whether a word of five letters or more is a word that opens replies with one
    letter too many ("Shure, I will", "Yeahh, ..."): a turn's first word is a typo more
    often than a name nobody has used yet."""
    key = word.casefold()
    return len(key) >= 5 and any(key[:i] + key[i + 1 :] in _REPLY_WORDS for i in range(len(key)))


def _goes_on(following: str | None) -> bool:
    """Whether the word after "Name," goes on talking to the listener ("Kate, did you",
    "Kate, I think") rather than naming more ("Edinburgh, Scotland")."""
    return following is None or following[0].islower() or is_function_word(following)


def _addressing(before: str) -> bool:
    """Whether the words before ", Name." leave it a call, not an apposition or a list."""
    words = [plain(w) for w in _BEFORE.findall(before)]
    if not words or words[-1] in _LISTING:
        return False
    return not _DETERMINERS.intersection(words[-3:-1])


def _keep(found: dict[int, Vocative], match: re.Match[str], cue: str) -> None:
    name, start = match.group("name"), match.start("name")
    name = _trimmed(name)
    if name is not None and start not in found and not _cut(match.string, start + len(name)):
        found[start] = Vocative(name, start, start + len(name), cue)


def _cut(text: str, end: int) -> bool:
    """Whether the word goes on past ``end`` by a combining mark or a joiner (an accent
    of decomposed text, "Zoe\u0301"; a zero-width joiner): a name found there is its
    head ("Zoe", "Ka"), not the name."""
    after = text[end : end + 1]
    return after in _JOINERS or unicodedata.category(after or " ") in _MARKS


_MARKS = frozenset({"Mn", "Mc", "Me"})
_JOINERS = frozenset("\u200c\u200d\u2060\u00ad")
"""Zero-width (non-)joiner, word joiner, soft hyphen: inside a word. Other format
characters (a direction mark after a name in right-to-left text) end it."""


def _trimmed(name: str) -> str | None:
    """The name, or its first word when the second is no name ("Kate Thanks" is not
    one name), or None when it is no name at all."""
    words = name.split(" ")
    if not _is_name(words[0]):
        return None
    if len(words) == 2 and not _is_name(words[1]):
        return words[0]
    return name


def _is_name(word: str) -> bool:
    """A capitalised word that can call a person (see the module)."""
    if not word[:1].isupper() or not 2 <= len(word) <= MAX_WORD:
        return False
    if word.endswith(("'s", "\u2019s")):
        return False  # a possessive ("Aragorn's brave attitude") talks about someone
    if len(word) > 3 and word.isupper():
        return False  # shouting ("HEY JOHN") is not a name's spelling we can trust
    key = word.casefold()
    return not (
        key in _NOT_NAMES
        or key in ROLE_NAMES
        or plain(key) in _NOT_NAMES
        or _GREETING.fullmatch(word) is not None
        or is_function_word(word)
        or is_calendar_word(word)
        or is_common_word(word)
    )
