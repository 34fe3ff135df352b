"""memory_core: the memory library (storage, formation, retrieval, reconstruction).

Usable without the proxy: it never imports aiohttp or anything from ``proxy``. What its
users need is named here (the proxy imports nothing else of it but the configuration
dialect, :mod:`.configuration`, the typed views people see, :mod:`.views`, and the
formation worker's protocol, :mod:`.worker`; a test checks that).

The names below are loaded on first use (PEP 562), so that importing one light module
(``memory_core.configuration`` from ``policies``, say) does not load SQLite, numpy or
torch through this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .blas import limit_blas_threads
    from .dream import DreamConfig, DreamReport, Step
    from .errors import (
        DreamBusyError,
        ExportFileError,
        InvalidInputError,
        MemoryChangedError,
        MemoryCoreError,
        MemoryNotEmptyError,
        SnapshotNotFoundError,
        StorageBusyError,
        StorageError,
    )
    from .formation import (
        BackendError,
        Backends,
        FormationConfig,
        FormationResult,
        FormationSummary,
        build_backends,
    )
    from .formation.config import FormationSection
    from .formation.models.llm import litellm_module
    from .graph import GraphSettings
    from .history.snapshots import HeldRow, Restored, SnapshotRow, describe_snapshot, undo_of
    from .history.views import Diff, HistoryState
    from .log.chain import chain_hashes, conversation_id, message_text
    from .log.continuation import Continuation
    from .log.messages import (
        MAX_TIMESTAMP,
        MIN_TIMESTAMP,
        AppendResult,
        LogMessage,
        check_timestamp,
        stored_timestamp,
    )
    from .reconstruction.config import DEFAULT_RECONSTRUCTION, ReconstructionConfig
    from .reconstruction.render import Reconstruction
    from .retrieval.bm25 import Hit
    from .retrieval.recall import Recall, restated_by
    from .retrieval.strategies import STRATEGIES
    from .storage.tables.forgets import ForgetRow
    from .storage.tables.receipts import ReceiptRow
    from .store.controls import MAX_FORGET, Forgotten
    from .store.memory_store import (
        DEFAULT_RECEIPT_AGE_S,
        DEFAULT_RECEIPT_LIMIT,
        DreamStatus,
        MemoryStore,
    )
    from .text.names import NameIndex, extract_names
    from .text.question import Question, question_excerpt
    from .text.tokens import TokenCounter, default_counter, warm_tokenizers
    from .text.words import query_terms
    from .transfer import Manifest
    from .views import StoreStats

__all__ = [
    "DEFAULT_RECEIPT_AGE_S",
    "DEFAULT_RECEIPT_LIMIT",
    "DEFAULT_RECONSTRUCTION",
    "MAX_FORGET",
    "MAX_TIMESTAMP",
    "MIN_TIMESTAMP",
    "STRATEGIES",
    "AppendResult",
    "BackendError",
    "Backends",
    "Continuation",
    "Diff",
    "DreamBusyError",
    "DreamConfig",
    "DreamReport",
    "DreamStatus",
    "ExportFileError",
    "ForgetRow",
    "Forgotten",
    "FormationConfig",
    "FormationResult",
    "FormationSection",
    "FormationSummary",
    "GraphSettings",
    "HeldRow",
    "HistoryState",
    "Hit",
    "InvalidInputError",
    "LogMessage",
    "Manifest",
    "MemoryChangedError",
    "MemoryCoreError",
    "MemoryNotEmptyError",
    "MemoryStore",
    "NameIndex",
    "Question",
    "Recall",
    "ReceiptRow",
    "Reconstruction",
    "ReconstructionConfig",
    "Restored",
    "SnapshotNotFoundError",
    "SnapshotRow",
    "Step",
    "StorageBusyError",
    "StorageError",
    "StoreStats",
    "TokenCounter",
    "build_backends",
    "chain_hashes",
    "check_timestamp",
    "conversation_id",
    "default_counter",
    "describe_snapshot",
    "extract_names",
    "limit_blas_threads",
    "litellm_module",
    "message_text",
    "query_terms",
    "question_excerpt",
    "restated_by",
    "stored_timestamp",
    "undo_of",
    "warm_tokenizers",
]

_HOMES = {
    "blas": ("limit_blas_threads",),
    "dream": ("DreamConfig", "DreamReport", "Step"),
    "errors": (
        "DreamBusyError",
        "ExportFileError",
        "InvalidInputError",
        "MemoryChangedError",
        "MemoryCoreError",
        "MemoryNotEmptyError",
        "SnapshotNotFoundError",
        "StorageBusyError",
        "StorageError",
    ),
    "formation": (
        "BackendError",
        "Backends",
        "FormationConfig",
        "FormationResult",
        "FormationSummary",
        "build_backends",
    ),
    "formation.config": ("FormationSection",),
    "formation.models.llm": ("litellm_module",),
    "graph": ("GraphSettings",),
    "history.snapshots": ("HeldRow", "Restored", "SnapshotRow", "describe_snapshot", "undo_of"),
    "history.views": ("Diff", "HistoryState"),
    "log.chain": ("chain_hashes", "conversation_id", "message_text"),
    "log.continuation": ("Continuation",),
    "log.messages": (
        "MAX_TIMESTAMP",
        "MIN_TIMESTAMP",
        "AppendResult",
        "LogMessage",
        "check_timestamp",
        "stored_timestamp",
    ),
    "reconstruction.config": ("DEFAULT_RECONSTRUCTION", "ReconstructionConfig"),
    "reconstruction.render": ("Reconstruction",),
    "retrieval.bm25": ("Hit",),
    "retrieval.recall": ("Recall", "restated_by"),
    "retrieval.strategies": ("STRATEGIES",),
    "storage.tables.forgets": ("ForgetRow",),
    "storage.tables.receipts": ("ReceiptRow",),
    "store.controls": ("MAX_FORGET", "Forgotten"),
    "store.memory_store": (
        "DEFAULT_RECEIPT_AGE_S",
        "DEFAULT_RECEIPT_LIMIT",
        "DreamStatus",
        "MemoryStore",
    ),
    "text.names": ("NameIndex", "extract_names"),
    "text.question": ("Question", "question_excerpt"),
    "text.tokens": ("TokenCounter", "default_counter", "warm_tokenizers"),
    "text.words": ("query_terms",),
    "transfer": ("Manifest",),
    "views": ("StoreStats",),
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
