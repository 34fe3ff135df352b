"""What a word is, once for the whole library: tokens, stems, content words, names, sentences.

The memory graph's word nodes, the question's word foci, BM25's query, sentence
selection in reconstruction and entity linking all read text through this module, so
they agree on what a word is: a fragment's word node ``paint`` is the stem the question
"Did she paint?" focuses on and the stem the renderer looks for in a sentence. Before
there was one module the graph and the renderer used two stemmers, so "puppies" was a
different word to each.

* A *word* is a maximal run of Unicode letters or digits (``[^\\W_]+``): any script,
  apostrophes and hyphens split words ("don't" is "don", "t").
* A *content word* (:func:`query_terms`) is a lowercased word that is not an English
  stop word and is at least two characters long unless it is a number.
* The *stem* (:func:`stem`) is a light English suffix stripper, deliberately weaker than
  Porter: it joins the inflections a question and a memory most often disagree on
  ("paint", "paints", "painted", "painting"; "participate", "participated"; "puppy",
  "puppies") and leaves words of other languages almost untouched (only words longer
  than four letters lose a final ``s`` (not ``ss``: "dress" and "dresses" meet at
  "dress"), ``ed`` or ``ing``, then a final ``e``, and a final ``y`` becomes ``i``).
  Stems are computed from whole words only, never from stems.
* A *name key* (:func:`normalise_name`) is case-folded, diacritics-free, without a
  leading article or a trailing possessive: the key aliases are matched on.
* *Sentences* (:func:`split_sentences`) end at ``. ! ? …`` followed by space, except
  after common abbreviations and initials; a bracketed span (an image caption) is one.
"""

from __future__ import annotations

import re
import unicodedata

from .kept import kept_when_short

__all__ = [
    "KEPT_WORD_CHARS",
    "MAX_QUERY_TERMS",
    "MISTAKE_MARKERS",
    "STOP_WORDS",
    "STOP_WORDS_BY_LANGUAGE",
    "WORD",
    "content_stems",
    "fold",
    "normalise_name",
    "opens_as_correction",
    "query_terms",
    "split_sentences",
    "stem",
    "words",
]

MAX_QUERY_TERMS = 32
"""The most content words :func:`query_terms` returns (a pasted page is not 5,000 foci)."""

WORD = re.compile(r"[^\W_]+")
"""A word: a maximal run of Unicode letters or digits."""

_STOP_LIST = (
    "a", "about", "above", "after", "again", "all", "am", "an", "and", "any", "are",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both",
    "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each",
    "few", "for", "from", "further", "had", "has", "have", "having", "he", "her",
    "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into",
    "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no",
    "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our",
    "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some",
    "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then",
    "there", "these", "they", "this", "those", "through", "to", "too", "under", "until",
    "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who",
    "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself",
    "yourselves", "s", "t", "don", "didn", "doesn", "isn", "wasn", "weren", "ll", "ve",
    "re", "d", "m",
)  # fmt: skip
STOP_WORDS = frozenset(_STOP_LIST)
"""English stop words (NLTK's list, abridged): never content words, never foci."""

_PT_STOP = (
    "o", "os", "as", "um", "uma", "uns", "umas", "de", "do", "da", "dos", "das", "em", "no",
    "na", "nos", "nas", "num", "numa", "ao", "aos", "à", "às", "pelo", "pela", "pelos",
    "pelas", "por", "para", "pra", "pro", "com", "sem", "sobre", "entre", "até", "e", "ou",
    "mas", "nem", "que", "se", "eu", "tu", "você", "voce", "vocês", "voces", "ele", "ela",
    "eles", "elas", "nós", "me", "te", "lhe", "lhes", "meu", "minha", "meus", "minhas",
    "teu", "tua", "teus", "tuas", "seu", "sua", "seus", "suas", "nosso", "nossa", "nossos",
    "nossas", "dele", "dela", "deles", "delas", "isso", "isto", "aquilo", "esse", "essa",
    "esses", "essas", "este", "esta", "estes", "estas", "aquele", "aquela", "aqueles",
    "aquelas", "é", "são", "sao", "foi", "foram", "era", "eram", "ser", "sido", "estar",
    "está", "estou", "estava", "estão", "tem", "têm", "tinha", "ter", "há", "já", "ja",
    "não", "nao", "sim", "muito", "muita", "mais", "menos", "também", "tambem", "como",
    "quando", "onde", "qual", "quais", "quem", "porque", "porquê", "quê", "quanto",
    "quantos", "quanta", "quantas",
)  # fmt: skip
_ES_STOP = (
    "el", "la", "los", "las", "lo", "un", "una", "unos", "unas", "de", "del", "al", "en",
    "por", "para", "con", "sin", "sobre", "entre", "hasta", "y", "e", "o", "u", "ni", "pero",
    "que", "si", "yo", "tú", "tu", "él", "ella", "ellos", "ellas", "usted", "ustedes",
    "nosotros", "nosotras", "me", "te", "se", "le", "les", "nos", "mi", "mis", "tus", "su",
    "sus", "nuestro", "nuestra", "nuestros", "nuestras", "eso", "esto", "ese", "esa", "esos",
    "esas", "este", "esta", "estos", "estas", "aquel", "aquella", "es", "son", "fue",
    "fueron", "era", "eran", "ser", "sido", "estar", "está", "estoy", "estaba", "están", "ha",
    "han", "he", "has", "hay", "había", "ya", "no", "sí", "muy", "más", "mas", "también",
    "tambien", "como", "cómo", "cuando", "cuándo", "donde", "dónde", "qué", "cuál", "cual",
    "cuáles", "quién", "quien", "quiénes", "cuánto", "cuántos", "cuánta", "cuántas",
    "porque",
)  # fmt: skip
STOP_WORDS_BY_LANGUAGE: dict[str, frozenset[str]] = {
    "pt": STOP_WORDS | frozenset(_PT_STOP),
    "es": STOP_WORDS | frozenset(_ES_STOP),
}
"""A Portuguese or Spanish question's stop words: its language's articles, prepositions,
pronouns, conjunctions, auxiliaries and question words as well as English's. Only for a
text :func:`~.language.detect_language` reads as that language: "la" and "eu" are words
of an English question ("LA", "the EU")."""

_SUFFIXES = ("ing", "ed", "s")
_MIN_STEM = 4
_ARTICLES = re.compile(r"^(the|a|an|o|os|as|el|la|los|las|le|les|der|die|das)\s+")
_POSSESSIVE = re.compile(r"['\u2019]s$")
_NAME_WORD = re.compile(r"[\w'\u2019-]+")
_SENTENCE_END = re.compile(
    r"(?<=[.!?…])(?<!\b[A-Z]\.)(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bSt\.)(?<!\bMrs\.)"
    r"(?<!\bvs\.)(?<!\be\.g\.)(?<!\bi\.e\.)\s+"
)


def words(text: str) -> list[str]:
    """Every word of ``text`` as written (case kept), in order."""
    return WORD.findall(text)


def query_terms(text: str, stop: frozenset[str] = STOP_WORDS) -> list[str]:
    """Content words of ``text``, lowercased, in first-occurrence order, at most
    :data:`MAX_QUERY_TERMS` of them; ``stop``: the words that are none (English's, or
    :data:`STOP_WORDS_BY_LANGUAGE`'s for a question in another language)."""
    terms: dict[str, None] = {}
    for word in WORD.findall(text.lower()):
        if word not in stop and (len(word) > 1 or word.isdigit()):
            terms.setdefault(word, None)
            if len(terms) == MAX_QUERY_TERMS:
                break
    return list(terms)


KEPT_WORD_CHARS = 64
"""Words of at most this many characters have their stem (and their lexicon answers,
:mod:`.lexicon`) kept (:mod:`.kept`); a longer "word" (a pasted hash, a megabyte run of
letters) is read every time."""


@kept_when_short(1 << 16, KEPT_WORD_CHARS)
def stem(word: str) -> str:
    """The stem of a lowercased word (see the module docstring)."""
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix) and not word.endswith("ss"):
            word = word[: -len(suffix)]
            break
    if len(word) > _MIN_STEM and word.endswith("e"):
        word = word[:-1]
    return word[:-1] + "i" if len(word) >= _MIN_STEM and word.endswith("y") else word


def content_stems(text: str) -> frozenset[str]:
    """The stems of the content words of ``text`` (:func:`query_terms`, then :func:`stem`)."""
    return frozenset(map(stem, query_terms(text)))


def fold(word: str) -> str:
    """Case-folded, diacritics-free (``"Não"`` is ``"nao"``): how words are compared
    across the accents people type or leave out, as ``fragments_fts`` matches them.
    ASCII is only lowered: nothing in it decomposes or folds otherwise (most words a
    lookup folds are ASCII, and the general path cost a lookup 0.2 ms)."""
    if word.isascii():
        return word.lower()
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def normalise_name(name: str) -> str:
    """Case-folded, diacritics-free, article- and possessive-free form of a name."""
    plain = _POSSESSIVE.sub("", " ".join(_NAME_WORD.findall(fold(name))))
    return _ARTICLES.sub("", plain).strip()


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (stripped, none empty); a ``[bracketed]`` span is one."""
    parts: list[str] = []
    for piece in _caption_pieces(text):
        if piece.startswith("["):
            parts.append(piece)
        else:
            parts.extend(s for s in _SENTENCE_END.split(piece.strip()) if s)
    return parts


def _caption_pieces(text: str) -> list[str]:
    r"""``text`` cut around its bracketed spans (each ``[`` to the first ``]`` after it),
    as ``re.split(r"(\[[^\]]*\])")`` cuts it: the text before, the span, the text
    between, ..., the text after. One pass: the regular expression searched to the end
    from every ``[`` that no ``]`` follows (quadratic in a pasted run of them)."""
    pieces: list[str] = []
    start = 0
    while (opening := text.find("[", start)) >= 0:
        closing = text.find("]", opening + 1)
        if closing < 0:
            break  # no "]" after this "[", nor after any later one
        pieces += [text[start:opening], text[opening : closing + 1]]
        start = closing + 1
    pieces.append(text[start:])
    return pieces


_AP = "['\u2019]"
MISTAKE_MARKERS = (
    # English: owning up to a mistake, or taking back what was said
    rf"i\s+was\s+wrong|i(?:{_AP}m|\s+am)\s+wrong|i\s+(?:was|am)\s+mistaken|i{_AP}m\s+mistaken|"
    r"i\s+(?:got|had)\s+(?:it|that|this)\s+wrong|i\s+made\s+a\s+mistake|my\s+(?:mistake|bad|error)|"
    r"i\s+mis-?(?:spoke|typed|remembered|read|heard|said)|i\s+mixed\s+(?:it|that|them)\s+up|"
    r"i\s+meant|correction|let\s+me\s+correct|to\s+correct\s+(?:myself|that)|scratch\s+that|"
    r"strike\s+that|(?:forget|ignore)\s+what\s+i\s+said|on\s+second\s+thoughts?|or\s+rather|"
    r"come\s+to\s+think\s+of\s+it|(?:it\s+)?turns\s+out|"
    rf"that{_AP}?s\s+(?:wrong|not\s+right|not\s+true|incorrect)|actually|"
    # Portuguese
    r"me\s+enganei|enganei-me|enganei|estava\s+(?:enganad[oa]|errad[oa])|"
    r"estou\s+(?:enganad[oa]|errad[oa])|errei|foi\s+(?:um\s+)?engano|engano\s+meu|erro\s+meu|"
    r"(?:cometi|foi)\s+um\s+erro|me\s+confundi|confundi-me|quis\s+dizer|queria\s+dizer|"
    r"corrijo|corrigindo|corre(?:c?ç|cc)ão|retiro\s+o\s+que\s+disse|"
    r"esque(?:ce|ça)\s+o\s+que\s+(?:eu\s+)?disse|pensando\s+(?:bem|melhor)|na\s+verdade|"
    r"na\s+realidade|afinal|"
    # Spanish
    r"me\s+equivoqu[ée]|me\s+he\s+equivocado|estaba\s+equivocad[oa]|estoy\s+equivocad[oa]|"
    r"me\s+confund[íi]|me\s+he\s+confundido|error\s+m[íi]o|(?:cometí|fue)\s+un\s+error|"
    r"quise\s+decir|quer[íi]a\s+decir|corrijo|corrigiendo|correcci[óo]n|mejor\s+dicho|"
    r"retiro\s+lo\s+dicho|olvida\s+lo\s+que\s+dije|pens[áa]ndolo\s+(?:bien|mejor)|en\s+realidad"
)
"""Words that say something said before was a mistake, in English, Portuguese and
Spanish ("I was wrong", "my mistake", "scratch that", "on second thought", "me enganei",
"erro meu", "afinal", "me equivoqué", "me confundí", "mejor dicho"): a regular expression
source, matched case-insensitively between word boundaries."""

_APOLOGY = (
    r"sorry|oops|whoops|oh|ah|hmm|wait|ok|okay|well|desculpa|desculpe|perdão|perdao|ops|opa|"
    r"olha|bem|pois|perdón|perdon|perdona|disculpa|disculpe|uy|vaya|bueno|oye|pues"
)
_OPENS_AS_CORRECTION = re.compile(
    rf"\W*(?:(?:{_APOLOGY})\b\W*)*(?:no|nope|não|nao|{MISTAKE_MARKERS})\b",
    re.IGNORECASE,
)


def opens_as_correction(text: str) -> bool:
    """Whether ``text`` opens as a correction of something said before ("No, ...",
    "Actually, ...", "Sorry, I was wrong: ...", "My mistake", "Desculpa, enganei-me",
    "Na verdade", "Perdón, me equivoqué", "En realidad"; English, Portuguese, Spanish):
    a mistake marker (:data:`MISTAKE_MARKERS`) or a plain "no" first, after an apology or
    interjection at most. Stricter than a correction marker anywhere in the text (a
    reply that merely says "now")."""
    return _OPENS_AS_CORRECTION.match(text) is not None
