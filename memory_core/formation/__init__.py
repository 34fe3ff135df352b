"""Formation: turning the durable log into memory (fragments, contexts, entities, relations).

Runs off the request path, from the durable queue, in stages (segmentation,
normalisation, NER, linking, relation extraction, mutation classification), each a
backend behind a small interface (:mod:`.interfaces`).
"""

from .pipeline import FormationResult, process_queue

__all__ = ["FormationResult", "process_queue"]
