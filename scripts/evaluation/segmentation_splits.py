"""The segmentation splits the trained segmenter is trained and measured on, and their vectors.

Splits (shared/data/README.md): the trained segmenter learns from TIAGE train, DialSeg711
and the *first* half of SuperDialseg validation; it is measured on TIAGE validation and
the *second* half of SuperDialseg validation. A half is taken by dialogue id: the ids
sorted as strings (``sorted``), the first ``n // 2`` are the first half, the rest the
second. Nothing measured is ever read by ``scripts/train_segmenter.py``.

Turns are encoded as formation sees them: the text without the ``user:`` / ``agent:``
prefix TIAGE and SuperDialseg write before each turn (formation keeps the speaker apart
from the text, and the trained segmenter reads only the text and its vector).

Vectors are cached (``.npy`` under a cache folder outside the repository, keyed by the
encoder's name and runtime and a digest of the texts), because encoding the ~40,000 turns
takes minutes on two cores and both scripts read the same ones.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

from memory_core.text.embeddings import Encoder

from .segmentation import Dialogue

__all__ = ["HALVES", "encode_dialogues", "formation_text", "half", "texts_of"]

HALVES = ("all", "first", "second")
_SPEAKER = re.compile(r"^(?:user|agent)\s*:\s*", re.IGNORECASE)
_CHUNK = 256
Vectors = npt.NDArray[np.float32]


def formation_text(turn: str) -> str:
    """``turn`` without a leading ``user:`` / ``agent:`` speaker prefix."""
    return _SPEAKER.sub("", turn, count=1)


def texts_of(dialogue: Dialogue) -> list[str]:
    """The dialogue's turns as formation would read them."""
    return [formation_text(turn) for turn in dialogue.utterances]


def half(dialogues: Sequence[Dialogue], which: str) -> list[Dialogue]:
    """``all`` the dialogues, or the ``first`` or ``second`` half by sorted id (file order
    kept within the half)."""
    if which == "all":
        return list(dialogues)
    ids = sorted(d.id for d in dialogues)
    first = set(ids[: len(ids) // 2])
    keep = which == "first"
    return [d for d in dialogues if (d.id in first) == keep]


def encode_dialogues(
    dialogues: Sequence[Dialogue], encoder: Encoder, cache_dir: Path | None
) -> list[Vectors]:
    """Each dialogue's turn vectors (formation's texts), read from the cache when there."""
    texts = [t for d in dialogues for t in texts_of(d)]
    path = _cache_path(cache_dir, encoder, texts) if cache_dir is not None else None
    if path is not None and path.exists():
        vectors: Vectors = np.load(path, allow_pickle=False)
    else:
        vectors = _encode(texts, encoder)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, vectors, allow_pickle=False)
    ends = np.cumsum([len(d.utterances) for d in dialogues])
    return list(np.split(vectors, ends[:-1]))


def _encode(texts: Sequence[str], encoder: Encoder) -> Vectors:
    chunks = [np.zeros((0, encoder.dimension), np.float32)]
    with tqdm(total=len(texts), desc="encoding", unit="utt", leave=False) as progress:
        for start in range(0, len(texts), _CHUNK):
            chunks.append(np.asarray(encoder.encode(texts[start : start + _CHUNK]), np.float32))
            progress.update(len(chunks[-1]))
    return np.concatenate(chunks)


def _cache_path(cache_dir: Path, encoder: Encoder, texts: Sequence[str]) -> Path:
    digest = hashlib.sha256()
    identity = f"{encoder.name}\0{getattr(encoder, 'runtime', '')}\0{encoder.dimension}"
    digest.update(identity.encode())
    for text in texts:
        digest.update(b"\0" + text.encode("utf-8", "surrogatepass"))
    return cache_dir / f"{digest.hexdigest()[:32]}.npy"
