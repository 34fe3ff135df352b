"""The word bridge: a question's words that memory never uses, met by the words it does.

An English question about a Portuguese conversation shares only names with it: "When did
Jon lose his job?" finds nothing for "lose" and "job" in a memory that says "perdi o
emprego". Dense retrieval still finds the turn (the multilingual encoder puts a text and its
translation close), but BM25, the graph's word foci and the block's sentence choice all read
words, and they carried most of same-language recall (conv-30 in Portuguese, recall@10:
memory 0.721, dense alone 0.513).

So each content word of the question that memory's vocabulary lacks is encoded alone and
matched, by cosine, to the words memory's fragments use in *another* language than the
question's (:mod:`memory_core.index.words`, kept by formation with the language of the
fragment that used each word first): at most ``translations`` of them, each at least
``min_cosine`` (``min_cosine_names`` for a name) and within ``margin`` of the nearest.
multilingual-e5-small puts a word and its translation at 0.91-0.97 ("job" ~ "emprego"
0.91, "dance" ~ "dança" 0.95, "studio" ~ "estúdio" 0.95) and unrelated words at 0.86-0.90,
hence the defaults (``retrieval.bridge``; calibrated for e5's cosines). A name is matched
only when nearly the same word ("Rome" ~ "Roma" 0.97; "John" ~ "Jon" 0.94 is another
person). The translations join the question's BM25 terms, its graph word foci and the
words statements and sentences are matched on; the question's foci (the coverage note's
subject, and the share of its words memory knows, which scales the lexical weights:
:meth:`~.scoring.ScoringConfig.covering`) stay the question's own, so a translated word
counts as the weaker evidence it is (counting a matched word as half known, or a quarter,
gained on one language and lost on the other).

Why only other languages: within one language the nearest words are inflections and loose
associations ("current" ~ "present", "want" ~ "wants"), and matching them cost English
questions about English memory 0.04 of recall@10 on conv-30. Why not more: reranking the
matches by hubness (CSLS against each language's common words, so that words near
everything, "contagious", "clases", stop being everyone's translation) and matching words
memory does use but rarely ("dance" in one caption of a Spanish memory that says "baile")
moved recall by less than the noise of one conversation's 81 questions, both ways.

Words are encoded with e5's ``query: `` prefix (:meth:`~memory_core.text.e5.E5Encoder
.encode_words`): with ``passage: `` the same bridge found less (English questions about
the Spanish conversation 0.643, the Portuguese one 0.692).

Measured (``scripts/eval_locomo.py --encoder e5``, conv-30, categories 1-4, recall@10;
without -> with the bridge): English questions about the Portuguese conversation 0.547 ->
0.710, about the Spanish one 0.480 -> 0.704; Portuguese questions about the English
conversation (``--questions-from``) 0.437 -> 0.585, Spanish ones 0.538 -> 0.608;
same-language questions: en 0.784 -> 0.784, pt 0.721 -> 0.740, es 0.699 -> 0.706.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt
from pydantic import Field

from ..configuration import ConfigModel
from ..text.question import Question

__all__ = ["BridgeConfig", "Vocabulary", "bridge"]

F32 = npt.NDArray[np.float32]


class BridgeConfig(ConfigModel):
    """How a question's words that memory lacks are matched to memory's words
    (``retrieval.bridge`` in config.yaml; see the module docstring)."""

    translations: int = Field(
        3, ge=0, le=10, description="the most memory words a question word is matched to (0: off)"
    )
    min_cosine: float = Field(
        0.9, ge=-1, le=1, description="a match's least cosine to the question word (e5's scale)"
    )
    min_cosine_names: float = Field(
        0.95,
        ge=-1,
        le=1,
        description="the same for a name (Rome ~ Roma 0.97; John ~ Jon 0.94 is another person)",
    )
    margin: float = Field(
        0.02, ge=0, le=2, description="a match's most distance below the nearest word's cosine"
    )
    max_words: int = Field(
        8, ge=0, le=32, description="the most question words matched (each is encoded)"
    )


class Vocabulary(Protocol):
    """The words memory uses with their vectors (:class:`~memory_core.index.words.Words`)."""

    def __len__(self) -> int: ...

    def row_of(self, word: str) -> int | None:
        """The row of ``word``, or None when memory does not use it."""

    def any_besides(self, language: str | None) -> bool:
        """Whether memory uses a word first used in another language than ``language``
        (any word, with None)."""

    def nearest(
        self, vector: F32, k: int, *, besides: str | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` words nearest to ``vector``, nearest first, with their cosines; with
        ``besides``, only words first used in another language than that one."""


def bridge(
    question: Question,
    vocabulary: Vocabulary,
    encode: Callable[[Sequence[str]], F32],
    config: BridgeConfig,
) -> Question:
    """``question`` with its words that ``vocabulary`` lacks matched to words it holds
    (:meth:`Question.bridging`); ``encode`` turns words into vectors (one row each).
    The question itself when nothing is matched, the bridge is off or memory keeps no
    word vectors. Nothing is encoded when memory has no word of another language than
    the question's (an English question about English memory: every match would be
    dropped, and encoding its words cost a lookup 1 ms on average, 3.5 ms when it ran)."""
    if config.translations == 0 or config.max_words == 0 or len(vocabulary) == 0:
        return question
    foci = [
        f for f in question.foci if f.word.isalpha() and vocabulary.row_of(f.word) is None
    ][: config.max_words]
    besides = None if question.language == "und" else question.language
    if not foci or not vocabulary.any_besides(besides):
        return question
    vectors = np.asarray(encode([f.word for f in foci]), dtype=np.float32)
    matched: list[tuple[str, tuple[str, ...]]] = []
    for focus, vector in zip(foci, vectors, strict=True):
        length = float(np.linalg.norm(vector))
        if not np.isfinite(length) or length == 0:
            continue
        near = vocabulary.nearest(vector / length, config.translations, besides=besides)
        if not near:
            continue
        floor = config.min_cosine_names if focus.name else config.min_cosine
        bar = max(floor, near[0][1] - config.margin)
        kept = tuple(w for w, cosine in near if cosine >= bar and w != focus.word)
        if kept:
            matched.append((focus.word, kept))
    return question.bridging(tuple(matched)) if matched else question
