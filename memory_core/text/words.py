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

import functools
import re
import unicodedata

__all__ = [
    "MAX_QUERY_TERMS",
    "STOP_WORDS",
    "WORD",
    "content_stems",
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

_SUFFIXES = ("ing", "ed", "s")
_MIN_STEM = 4
_ARTICLES = re.compile(r"^(the|a|an|o|os|as|el|la|los|las|le|les|der|die|das)\s+")
_POSSESSIVE = re.compile(r"['\u2019]s$")
_NAME_WORD = re.compile(r"[\w'\u2019-]+")
_CAPTION = re.compile(r"(\[[^\]]*\])")
_SENTENCE_END = re.compile(
    r"(?<=[.!?…])(?<!\b[A-Z]\.)(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bSt\.)(?<!\bMrs\.)"
    r"(?<!\bvs\.)(?<!\be\.g\.)(?<!\bi\.e\.)\s+"
)


def words(text: str) -> list[str]:
    """Every word of ``text`` as written (case kept), in order."""
    return WORD.findall(text)


def query_terms(text: str) -> list[str]:
    """Content words of ``text``, lowercased, in first-occurrence order, at most
    :data:`MAX_QUERY_TERMS` of them."""
    terms: dict[str, None] = {}
    for word in WORD.findall(text.lower()):
        if word not in STOP_WORDS and (len(word) > 1 or word.isdigit()):
            terms.setdefault(word, None)
            if len(terms) == MAX_QUERY_TERMS:
                break
    return list(terms)


@functools.lru_cache(maxsize=1 << 16)
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


def normalise_name(name: str) -> str:
    """Case-folded, diacritics-free, article- and possessive-free form of a name."""
    folded = unicodedata.normalize("NFKD", name.casefold())
    plain = "".join(c for c in folded if not unicodedata.combining(c))
    plain = _POSSESSIVE.sub("", " ".join(_NAME_WORD.findall(plain)))
    return _ARTICLES.sub("", plain).strip()


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (stripped, none empty); a ``[bracketed]`` span is one."""
    parts: list[str] = []
    for piece in _CAPTION.split(text):
        if piece.startswith("["):
            parts.append(piece)
        else:
            parts.extend(s for s in _SENTENCE_END.split(piece.strip()) if s)
    return parts


_OPENS_AS_CORRECTION = re.compile(
    r"\W*(no|nope|actually|correction|sorry,? i meant|i meant|wait,? no|na verdade|afinal|"
    r"não|nao|corrijo|corrigindo|en realidad|perdón,? quise decir|quise decir|me equivoqué)\b",
    re.IGNORECASE,
)


def opens_as_correction(text: str) -> bool:
    """Whether ``text`` opens as a correction of something said before ("No, ...",
    "Actually, ...", "Na verdade", "En realidad"; English, Portuguese, Spanish). Stricter
    than a correction marker anywhere in the text (a reply that merely says "now")."""
    return _OPENS_AS_CORRECTION.match(text) is not None
