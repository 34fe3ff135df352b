"""Dialogue topic segmentation: Pk, WindowDiff, dataset loaders and the baselines.

Conventions, used by every function here:

- A dialogue of ``n`` utterances has ``n - 1`` gaps; gap ``b`` lies between utterance
  ``b`` and ``b + 1`` (0-based). A segmentation is a sorted list of *boundary indices*,
  each a gap holding a topic boundary, so ``0 <= b <= n - 2``: ``[3, 9]`` over 12
  utterances means segments ``0..3``, ``4..9`` and ``10..11`` (lengths ``[4, 6, 2]``).
  No boundaries means one segment. :func:`segments_to_boundaries` and
  :func:`boundaries_to_segments` convert to and from segment lengths.
- A segmenter is any callable ``segment(utterances) -> boundary indices``
  (:data:`Segmenter`); :func:`no_boundaries` and :func:`texttiling` are the baselines.
- Pk (Beeferman et al., 1999) and WindowDiff (Pevzner & Hearst, 2002) slide a probe of
  width ``k`` over the ``n - k`` positions ``i = 0 .. n-k-1``, comparing utterances
  ``i`` and ``i + k``: Pk counts positions where reference and hypothesis disagree on
  whether the two lie in the same segment, WindowDiff positions where they disagree on
  how many boundaries lie between them. Both are error rates in [0, 1]; lower is better.
- ``k`` defaults to half the mean reference segment length, ``round(n / (2 * s))`` for
  ``s`` reference segments, with Python's :func:`round` (half to even, as in NLTK and
  segeval) and at least ``min_k`` = 1. (segeval raises its default to at least 2; pass
  ``min_k=2`` to match it: on short segments, as in SuperDialseg, the figures differ a
  lot.) A ``k`` of ``n`` or more is cut to ``n - 1`` (one probe, from the first
  utterance to the last). A dialogue of one utterance has no gaps: both
  metrics are 0 there, and it adds no probes to the pooled figures.
- Corpus figures (:func:`evaluate`) are the mean over dialogues of the per-dialogue
  scores, each dialogue with its own ``k``; the pooled variant (all probe errors over
  all probes) is returned alongside.

Everything is pure (lists and numpy arrays in and out) except the two loaders, which
read one file each and report malformed input as :class:`SegmentationDataError`.
"""

from __future__ import annotations

import itertools
import json
import math
import operator
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memory_core.errors import MemoryCoreError

__all__ = [
    "DEFDTS_BOUNDARY",
    "DEFDTS_NEWLINE",
    "Dialogue",
    "Idf",
    "Scores",
    "SegmentationDataError",
    "Segmenter",
    "Vectorize",
    "block_similarities",
    "boundaries_to_labels",
    "boundaries_to_segments",
    "default_window",
    "depth_scores",
    "evaluate",
    "load_defdts",
    "load_dialseg711",
    "no_boundaries",
    "pk",
    "segments_to_boundaries",
    "texttiling",
    "texttiling_from_vectors",
    "tfidf_vectors",
    "tokenize",
    "windowdiff",
]

DEFDTS_NEWLINE = "[NEWLINE]"
DEFDTS_BOUNDARY = "[BOUNDARY]"

Segmenter = Callable[[list[str]], Sequence[int]]
"""``segment(utterances) -> boundary indices`` (gaps after which a new topic starts)."""

Vectorize = Callable[[Sequence[str]], npt.NDArray[np.floating[Any]]]
"""Utterances to a ``len(utterances) x d`` matrix, one row per utterance."""

Matrix = npt.NDArray[np.float64]


class SegmentationDataError(MemoryCoreError, ValueError):
    """A segmentation data file is unreadable or not of the documented shape."""


@dataclass(frozen=True)
class Dialogue:
    """One reference dialogue: its utterances and the gold boundary indices."""

    id: str
    utterances: tuple[str, ...]
    boundaries: tuple[int, ...]


@dataclass(frozen=True)
class Scores:
    """Corpus figures for one method; ``pk``/``windowdiff`` are means over dialogues."""

    pk: float
    windowdiff: float
    pooled_pk: float
    pooled_windowdiff: float
    dialogues: int
    utterances: int
    mean_k: float


# --- representations -------------------------------------------------------------------


def segments_to_boundaries(lengths: Sequence[int]) -> list[int]:
    """Boundary indices of consecutive segments of ``lengths`` (``[4, 6, 2]`` -> ``[3, 9]``)."""
    if any(length < 1 for length in lengths):
        raise ValueError(f"segment lengths must be positive: {list(lengths)}")
    ends = np.cumsum(np.asarray(lengths, dtype=np.int64)) - 1
    return [int(end) for end in ends[:-1]]


def boundaries_to_segments(boundaries: Sequence[int], n: int) -> list[int]:
    """Segment lengths of ``n`` utterances cut at ``boundaries`` (``[3, 9], 12``: ``[4, 6, 2]``)."""
    cuts = [-1, *_checked(boundaries, n), n - 1]
    return [right - left for left, right in itertools.pairwise(cuts)]


def boundaries_to_labels(boundaries: Sequence[int], n: int) -> list[int]:
    """The segment number (0, 1, ...) of each of the ``n`` utterances."""
    labels = np.zeros(n, dtype=np.int64)
    for b in _checked(boundaries, n):
        labels[b + 1 :] += 1
    return [int(label) for label in labels]


def _checked(boundaries: Sequence[int], n: int) -> list[int]:
    """``boundaries`` sorted, after checking they are distinct gaps of ``n`` utterances."""
    if n < 1:
        raise ValueError(f"a dialogue needs at least one utterance, got n={n}")
    ordered = sorted(operator.index(b) for b in boundaries)
    if len(set(ordered)) != len(ordered):
        raise ValueError(f"duplicate boundary indices: {list(boundaries)}")
    if ordered and (ordered[0] < 0 or ordered[-1] > n - 2):
        raise ValueError(f"boundary indices must lie in 0..{n - 2} for n={n}: {ordered}")
    return ordered


# --- metrics -----------------------------------------------------------------------------


def default_window(reference: Sequence[int], n: int, *, min_k: int = 1) -> int:
    """Half the mean reference segment length, rounded half to even, at least ``min_k``."""
    if min_k < 1:
        raise ValueError(f"min_k must be at least 1, got {min_k}")
    mean_length = n / (len(_checked(reference, n)) + 1)
    return max(min_k, round(mean_length / 2))


def pk(
    reference: Sequence[int],
    hypothesis: Sequence[int],
    n: int,
    k: int | None = None,
    *,
    min_k: int = 1,
) -> float:
    """Pk of ``hypothesis`` against ``reference`` over ``n`` utterances (0 is perfect)."""
    counts = _probe_errors(reference, hypothesis, n, k, min_k)
    return _rate(counts.pk_errors, counts.probes)


def windowdiff(
    reference: Sequence[int],
    hypothesis: Sequence[int],
    n: int,
    k: int | None = None,
    *,
    min_k: int = 1,
) -> float:
    """WindowDiff of ``hypothesis`` against ``reference`` over ``n`` utterances (0 is perfect)."""
    counts = _probe_errors(reference, hypothesis, n, k, min_k)
    return _rate(counts.wd_errors, counts.probes)


@dataclass(frozen=True)
class _ProbeErrors:
    pk_errors: int
    wd_errors: int
    probes: int
    k: int


def _probe_errors(
    reference: Sequence[int], hypothesis: Sequence[int], n: int, k: int | None, min_k: int
) -> _ProbeErrors:
    ref = _checked(reference, n)
    hyp = _checked(hypothesis, n)
    if k is None:
        k = default_window(ref, n, min_k=min_k)
    if k < 1:
        raise ValueError(f"window k must be at least 1, got {k}")
    if n < 2:
        return _ProbeErrors(0, 0, 0, k)
    k = min(k, n - 1)
    ref_counts = _boundaries_per_probe(ref, n, k)
    hyp_counts = _boundaries_per_probe(hyp, n, k)
    pk_errors = int(np.count_nonzero((ref_counts > 0) != (hyp_counts > 0)))
    wd_errors = int(np.count_nonzero(ref_counts != hyp_counts))
    return _ProbeErrors(pk_errors, wd_errors, n - k, k)


def _boundaries_per_probe(boundaries: list[int], n: int, k: int) -> npt.NDArray[np.int64]:
    """Boundaries between utterances ``i`` and ``i + k`` for ``i = 0 .. n-k-1``."""
    gaps = np.zeros(n - 1, dtype=np.int64)
    gaps[boundaries] = 1
    before = np.concatenate(([0], np.cumsum(gaps)))
    return before[k:] - before[:-k]


def evaluate(
    dialogues: Sequence[Dialogue],
    hypotheses: Sequence[Sequence[int]],
    k: int | None = None,
    *,
    min_k: int = 1,
) -> Scores:
    """Mean (and pooled) Pk and WindowDiff of one hypothesis per dialogue, in order.

    Each dialogue uses its own default ``k`` (at least ``min_k``) unless ``k`` is given
    for all.
    """
    if len(dialogues) != len(hypotheses):
        raise ValueError(f"{len(dialogues)} dialogues but {len(hypotheses)} hypotheses")
    if not dialogues:
        raise ValueError("no dialogues to evaluate")
    counts = [
        _probe_errors(d.boundaries, hyp, len(d.utterances), k, min_k)
        for d, hyp in zip(dialogues, hypotheses, strict=True)
    ]
    probes = sum(c.probes for c in counts)
    return Scores(
        pk=float(np.mean([_rate(c.pk_errors, c.probes) for c in counts])),
        windowdiff=float(np.mean([_rate(c.wd_errors, c.probes) for c in counts])),
        pooled_pk=_rate(sum(c.pk_errors for c in counts), probes),
        pooled_windowdiff=_rate(sum(c.wd_errors for c in counts), probes),
        dialogues=len(dialogues),
        utterances=sum(len(d.utterances) for d in dialogues),
        mean_k=float(np.mean([c.k for c in counts])),
    )


def _rate(errors: int, probes: int) -> float:
    return errors / probes if probes else 0.0


# --- loaders -----------------------------------------------------------------------------


def load_dialseg711(path: str | Path) -> list[Dialogue]:
    """DialSeg711 in the data hub's form: a JSON list of ``{dial_id, utterances, segments}``.

    ``segments`` are segment lengths summing to the number of utterances; other keys
    (such as ``set``) are ignored.
    """
    try:
        items = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # see :data:`_UNREADABLE`
        raise SegmentationDataError(f"{path}: cannot read JSON: {exc}") from exc
    if not isinstance(items, list):
        raise SegmentationDataError(f"{path}: expected a JSON list of dialogues")
    dialogues = [_dialseg_item(item, path, i) for i, item in enumerate(items)]
    return _unique(dialogues, path)


def _dialseg_item(item: object, path: str | Path, index: int) -> Dialogue:
    where = f"{path}: item {index}"
    if not isinstance(item, dict) or not {"dial_id", "utterances", "segments"} <= item.keys():
        raise SegmentationDataError(f"{where}: expected keys dial_id, utterances, segments")
    where = f"{where} (dial_id {item['dial_id']!r})"
    utterances, segments = item["utterances"], item["segments"]
    if not isinstance(utterances, list) or not all(isinstance(u, str) for u in utterances):
        raise SegmentationDataError(f"{where}: utterances must be a list of strings")
    if not utterances:
        raise SegmentationDataError(f"{where}: no utterances")
    if not isinstance(segments, list) or not all(_positive_int(s) for s in segments):
        raise SegmentationDataError(f"{where}: segments must be a list of positive integers")
    if sum(segments) != len(utterances):
        raise SegmentationDataError(
            f"{where}: segments sum to {sum(segments)} but there are {len(utterances)} utterances"
        )
    boundaries = segments_to_boundaries(segments)
    return Dialogue(str(item["dial_id"]), tuple(utterances), tuple(boundaries))


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def load_defdts(path: str | Path) -> list[Dialogue]:
    """Def-DTS JSONL (TIAGE, SuperDialseg): one ``{"id", "dialogue"}`` object a line.

    ``dialogue`` is the turns joined by ``[NEWLINE]``; a topic change is a ``[BOUNDARY]``
    token standing alone between two ``[NEWLINE]`` tokens. A ``[BOUNDARY]`` at the start or
    end of a dialogue separates nothing and is dropped (two SuperDialseg validation
    lines end with one); repeated ones count once. Turns are kept as written, speaker
    prefix (``user:``/``agent:``) included. Blank lines are skipped.
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SegmentationDataError(f"{path}: cannot read: {exc}") from exc
    dialogues = [
        _defdts_line(line, f"{path}: line {number}")
        for number, line in enumerate(lines, start=1)
        if line.strip()
    ]
    return _unique(dialogues, path)


_UNREADABLE = (ValueError, RecursionError)
"""What :func:`json.loads` raises on text it cannot decode: JSONDecodeError, but also a
plain ValueError for an integer of over 4300 digits and RecursionError for arrays nested
too deep, neither of them a JSONDecodeError."""


def _defdts_line(line: str, where: str) -> Dialogue:
    try:
        item = json.loads(line)
    except _UNREADABLE as exc:
        raise SegmentationDataError(f"{where}: not valid JSON: {exc}") from exc
    if not isinstance(item, dict) or not isinstance(item.get("dialogue"), str) or "id" not in item:
        raise SegmentationDataError(f"{where}: expected an object with 'id' and 'dialogue' text")
    utterances, boundaries = _split_defdts(item["dialogue"], f"{where} (id {item['id']!r})")
    return Dialogue(str(item["id"]), tuple(utterances), tuple(boundaries))


def _split_defdts(text: str, where: str) -> tuple[list[str], list[int]]:
    utterances: list[str] = []
    boundaries: set[int] = set()
    for position, part in enumerate(text.split(DEFDTS_NEWLINE), start=1):
        turn = part.strip()
        if turn == DEFDTS_BOUNDARY:
            if utterances:
                boundaries.add(len(utterances) - 1)
            continue
        if DEFDTS_BOUNDARY in turn:
            raise SegmentationDataError(f"{where}: turn {position} has {DEFDTS_BOUNDARY} inside it")
        if not turn:
            raise SegmentationDataError(f"{where}: turn {position} is empty")
        utterances.append(turn)
    if not utterances:
        raise SegmentationDataError(f"{where}: no turns")
    return utterances, sorted(b for b in boundaries if b < len(utterances) - 1)


def _unique(dialogues: list[Dialogue], path: str | Path) -> list[Dialogue]:
    repeated = [name for name, count in Counter(d.id for d in dialogues).items() if count > 1]
    if repeated:
        raise SegmentationDataError(f"{path}: repeated dialogue ids: {repeated[:5]}")
    return dialogues


# --- baselines -----------------------------------------------------------------------------


def no_boundaries(utterances: Sequence[str]) -> list[int]:
    """The trivial baseline: the whole dialogue is one segment."""
    return []


_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_STOP_TEXT = """a about after again all am an and any are as at be because been before being both
    but by can could did do does doing don't down during each few for from had has have
    having he her here hers him his how i i'm i'd i'll i've if in into is it it's its just
    me more most my no nor not now of off on once only or other our ours out over own same
    she should so some such than that that's the their theirs them then there these they
    this those through to too under until up very was we were what when where which while
    who whom why will with would you you're your yours yes ok okay oh well also really"""
_STOP_WORDS = frozenset(_STOP_TEXT.split())


def tokenize(text: str) -> list[str]:
    """Lower-cased words of ``text`` without English stop words (TextTiling's terms)."""
    return [word for word in _TOKEN.findall(text.lower()) if word not in _STOP_WORDS]


@dataclass(frozen=True)
class Idf:
    """Document frequencies of terms over a corpus (each text one document)."""

    documents: int
    frequency: dict[str, int]

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> Idf:
        frequency: Counter[str] = Counter()
        documents = 0
        for text in texts:
            frequency.update(set(tokenize(text)))
            documents += 1
        return cls(documents, dict(frequency))

    def weight(self, term: str) -> float:
        """Smoothed IDF, ``ln((1 + N) / (1 + df)) + 1``: positive, unseen terms highest."""
        return math.log((1 + self.documents) / (1 + self.frequency.get(term, 0))) + 1.0


def tfidf_vectors(utterances: Sequence[str], idf: Idf | None = None) -> Matrix:
    """Raw term counts times IDF, one row per utterance, columns the dialogue's terms.

    Without ``idf`` the utterances themselves are the IDF corpus. Rows are not
    normalised, so a block (sum of rows) weighs terms as in Hearst's concatenated text.
    """
    tokens = [tokenize(text) for text in utterances]
    idf = idf if idf is not None else Idf.from_texts(utterances)
    terms = sorted({term for words in tokens for term in words})
    vocabulary = {term: column for column, term in enumerate(terms)}
    matrix = np.zeros((len(utterances), len(vocabulary)), dtype=np.float64)
    for row, words in enumerate(tokens):
        for term, count in Counter(words).items():
            matrix[row, vocabulary[term]] = count * idf.weight(term)
    return matrix


def block_similarities(vectors: npt.ArrayLike, window: int) -> Matrix:
    """Cosine similarity, at each gap, of the sums of the ``window`` rows either side.

    Gap ``b`` compares rows ``b-window+1 .. b`` with rows ``b+1 .. b+window`` (cut at the
    dialogue's ends); a block whose sum is the zero vector scores 0. Length ``n - 1``.
    """
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    rows = np.asarray(vectors, dtype=np.float64)
    n = rows.shape[0]
    before = np.concatenate((np.zeros((1, rows.shape[1])), np.cumsum(rows, axis=0)))
    gaps = np.arange(n - 1)
    left = before[gaps + 1] - before[np.maximum(gaps + 1 - window, 0)]
    right = before[np.minimum(gaps + 1 + window, n)] - before[gaps + 1]
    norms = np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
    dots = np.einsum("ij,ij->i", left, right)
    similarities: Matrix = np.divide(dots, norms, out=np.zeros(n - 1), where=norms > 0)
    return similarities


def depth_scores(scores: npt.ArrayLike) -> Matrix:
    """Hearst's depth at each gap: climbs to the highest score left and right, summed.

    From gap ``j`` the climb goes on while the next score is at least as high; the depth
    is ``(left peak - s_j) + (right peak - s_j)``, so 0 on a peak and large in a valley.
    """
    values = np.asarray(scores, dtype=np.float64)
    depths = np.zeros(len(values))
    for j, score in enumerate(values):
        left = j
        while left > 0 and values[left - 1] >= values[left]:
            left -= 1
        right = j
        while right < len(values) - 1 and values[right + 1] >= values[right]:
            right += 1
        depths[j] = values[left] + values[right] - 2 * score
    return depths


def texttiling(
    utterances: Sequence[str],
    vectorize: Vectorize = tfidf_vectors,
    *,
    window: int = 4,
    smoothing: int = 1,
    cutoff_std: float = 0.5,
) -> list[int]:
    """TextTiling (Hearst, 1997) over utterances; see :func:`texttiling_from_vectors`."""
    if len(utterances) < 2:
        return []
    vectors = vectorize(utterances)
    return texttiling_from_vectors(
        vectors, window=window, smoothing=smoothing, cutoff_std=cutoff_std
    )


def texttiling_from_vectors(
    vectors: npt.ArrayLike, *, window: int = 4, smoothing: int = 1, cutoff_std: float = 0.5
) -> list[int]:
    """Boundary indices from utterance vectors by block comparison and depth scores.

    Steps: :func:`block_similarities` with blocks of ``window`` utterances; optionally a
    moving average over ``2 * smoothing + 1`` gaps; :func:`depth_scores`; then a
    boundary at each valley whose depth exceeds ``mean - cutoff_std * std`` of the
    depths of all gaps (0.5 is Hearst's conservative cutoff and NLTK's default, 1.0 the
    liberal one). A valley is an interior gap scoring below its left neighbour and not
    above its right one: a plateau counts once, and the first and last gaps, whose
    blocks are cut short, never count. Flat score curves give no boundaries.

    The defaults (blocks of 4 utterances, one smoothing step either side) were chosen
    on TIAGE train and the DialSeg711 dev dialogues, never on the splits reported.
    """
    scores = _smoothed(block_similarities(vectors, window), smoothing)
    if scores.size == 0:
        return []
    depths = depth_scores(scores)
    cutoff = depths.mean() - cutoff_std * depths.std()
    return [j for j in range(len(scores)) if _is_valley(scores, j) and depths[j] > cutoff]


def _smoothed(scores: Matrix, half_width: int) -> Matrix:
    if half_width < 1 or scores.size == 0:
        return scores
    before = np.concatenate(([0.0], np.cumsum(scores)))
    index = np.arange(len(scores))
    low = np.maximum(index - half_width, 0)
    high = np.minimum(index + half_width + 1, len(scores))
    result: Matrix = (before[high] - before[low]) / (high - low)
    return result


def _is_valley(scores: Matrix, j: int) -> bool:
    """An interior gap below its left neighbour and not above its right one."""
    if j == 0 or j == len(scores) - 1:
        return False
    return bool(scores[j] < scores[j - 1] and scores[j] <= scores[j + 1])
