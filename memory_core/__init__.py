"""memory_core: the memory library (storage, formation, retrieval, reconstruction).

Usable without the proxy: it never imports aiohttp or anything from ``proxy``.
"""

from .chain import chain_hashes, conversation_id, message_text
from .errors import InvalidInputError, MemoryCoreError, StorageError
from .formation import FormationResult
from .log import AppendResult, LogMessage
from .names import NameIndex, extract_names
from .reconstruction import Reconstruction
from .retrieval import Hit, query_terms
from .store import MemoryStore, Recall, StoreStats
from .tokens import TokenCounter, default_counter

__all__ = [
    "AppendResult",
    "FormationResult",
    "Hit",
    "InvalidInputError",
    "LogMessage",
    "MemoryCoreError",
    "MemoryStore",
    "NameIndex",
    "Recall",
    "Reconstruction",
    "StorageError",
    "StoreStats",
    "TokenCounter",
    "chain_hashes",
    "conversation_id",
    "default_counter",
    "extract_names",
    "message_text",
    "query_terms",
]
