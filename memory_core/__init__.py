"""memory_core: the memory library (storage, formation, retrieval, reconstruction).

Usable without the proxy: it never imports aiohttp or anything from ``proxy``.
"""

from .chain import chain_hashes, conversation_id, message_text
from .errors import InvalidInputError, MemoryCoreError, StorageBusyError, StorageError
from .formation import FormationResult
from .log import MAX_TIMESTAMP, MIN_TIMESTAMP, AppendResult, LogMessage, check_timestamp
from .names import NameIndex, extract_names
from .reconstruction import Reconstruction
from .retrieval import Hit, query_terms
from .store import DEFAULT_RECEIPT_LIMIT, MemoryStore, Recall, StoreStats
from .tokens import TokenCounter, default_counter

__all__ = [
    "DEFAULT_RECEIPT_LIMIT",
    "MAX_TIMESTAMP",
    "MIN_TIMESTAMP",
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
    "StorageBusyError",
    "StorageError",
    "StoreStats",
    "TokenCounter",
    "chain_hashes",
    "check_timestamp",
    "conversation_id",
    "default_counter",
    "extract_names",
    "message_text",
    "query_terms",
]
