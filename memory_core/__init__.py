"""memory_core: the memory library (storage, formation, retrieval, reconstruction).

Usable without the proxy: it never imports aiohttp or anything from ``proxy``.

The names below are loaded on first use (PEP 562), so that importing one light module
(``memory_core.configuration`` from ``policies``, say) does not load SQLite, numpy or
torch through this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .errors import InvalidInputError, MemoryCoreError, StorageBusyError, StorageError
    from .formation import FormationResult
    from .log.chain import chain_hashes, conversation_id, message_text
    from .log.messages import (
        MAX_TIMESTAMP,
        MIN_TIMESTAMP,
        AppendResult,
        LogMessage,
        check_timestamp,
    )
    from .reconstruction.render import Reconstruction
    from .retrieval.bm25 import Hit
    from .retrieval.recall import Recall
    from .store.memory_store import DEFAULT_RECEIPT_LIMIT, MemoryStore, StoreStats
    from .text.names import NameIndex, extract_names
    from .text.question import Question
    from .text.tokens import TokenCounter, default_counter
    from .text.words import query_terms

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
    "Question",
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

_HOMES = {
    "log.chain": ("chain_hashes", "conversation_id", "message_text"),
    "errors": ("InvalidInputError", "MemoryCoreError", "StorageBusyError", "StorageError"),
    "formation": ("FormationResult",),
    "log.messages": (
        "MAX_TIMESTAMP",
        "MIN_TIMESTAMP",
        "AppendResult",
        "LogMessage",
        "check_timestamp",
    ),
    "text.names": ("NameIndex", "extract_names"),
    "reconstruction.render": ("Reconstruction",),
    "retrieval.bm25": ("Hit",),
    "retrieval.recall": ("Recall",),
    "store.memory_store": ("DEFAULT_RECEIPT_LIMIT", "MemoryStore", "StoreStats"),
    "text.question": ("Question",),
    "text.tokens": ("TokenCounter", "default_counter"),
    "text.words": ("query_terms",),
}
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
