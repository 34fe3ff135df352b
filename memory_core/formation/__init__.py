"""Formation: turning the durable log into memory (fragments, contexts, entities, relations).

Runs off the request path, from the durable queue, in stages (segmentation,
normalisation, NER, linking, relation extraction, mutation classification), each a
backend behind a small interface (:mod:`.interfaces`).
"""

from .backends import build_backends
from .config import FormationConfig, FormationConfigError, parse_formation
from .interfaces import BackendError, Interpretation
from .pipeline import Backends, FormationResult, FormationSummary, Former

__all__ = [
    "BackendError",
    "Backends",
    "FormationConfig",
    "FormationConfigError",
    "FormationResult",
    "FormationSummary",
    "Former",
    "Interpretation",
    "build_backends",
    "parse_formation",
]
