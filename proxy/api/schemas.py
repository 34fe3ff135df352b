"""The typed shapes of the proxy's own bodies: receipts, health, models, ingest, search,
errors, and the parts of request bodies the proxy reads.

Response models forbid unknown keys and are frozen; they are served as
``model_dump(mode="json")``, the same JSON the hand-built dictionaries were. Bodies that
belong to an upstream (chat completions and their stream chunks, an upstream's own error)
and the chat request (clients send far more than the proxy reads, all forwarded) allow
unknown keys: the proxy describes them, it does not own them. The views of memory itself
live in :mod:`memory_core.views`; the responses here wrap them with the query or tenant.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, model_validator

from memory_core.views import (
    AreaExplanation,
    AreaSummary,
    ContextView,
    EntityView,
    RelationView,
    StoreStats,
)

__all__ = [
    "AreaResponse",
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatCompletionRequest",
    "ChatMessage",
    "ContentPart",
    "ContextsResponse",
    "EntitiesResponse",
    "ErrorDetail",
    "ErrorResponse",
    "FormationWorker",
    "Health",
    "HeldMessage",
    "HeldResponse",
    "ImportResponse",
    "IngestMessage",
    "IngestRequest",
    "IngestResponse",
    "ModelCard",
    "ModelList",
    "Readiness",
    "Receipt",
    "ReceiptArea",
    "ReceiptDecision",
    "ReceiptFragment",
    "ReceiptSummary",
    "ReceiptsResponse",
    "RelationsResponse",
    "RollbackRequest",
    "RollbackResponse",
    "SearchHit",
    "SearchResponse",
    "SnapshotDetail",
    "SnapshotSummary",
    "SnapshotsResponse",
    "StatsResponse",
    "UpstreamErrorDetail",
    "UpstreamErrorResponse",
]


class _Body(BaseModel):
    """A frozen body with no keys beyond its fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class _Open(BaseModel):
    """A body the proxy reads or relays but does not own: unknown keys are kept."""

    model_config = ConfigDict(extra="allow", frozen=True)


# --- errors ------------------------------------------------------------------------------


class ErrorDetail(_Body):
    """An error as the OpenAI API writes it."""

    message: str = Field(description="What went wrong, for a person.")
    type: str = Field(
        description="``invalid_request_error``, ``server_error`` or ``upstream_error``."
    )
    param: str | None = Field(description="The request parameter at fault, if one is.")
    code: str | None = Field(description="A stable machine-readable code.")


class ErrorResponse(_Body):
    """Every error the proxy answers itself: ``{"error": {...}}``."""

    error: ErrorDetail = Field(description="The error.")


class UpstreamErrorDetail(_Open):
    """An upstream's own error object, relayed as it sent it (or the proxy's own)."""

    message: str | None = Field(default=None, description="What went wrong.")
    type: str | None = Field(default=None, description="Error type.")
    param: str | None = Field(default=None, description="Parameter at fault.")
    code: str | int | None = Field(default=None, description="Error code.")


class UpstreamErrorResponse(_Open):
    """An error status relayed from the upstream, with its body when it was an OpenAI-style
    error object, else the proxy's own (``type: upstream_error``)."""

    error: UpstreamErrorDetail = Field(description="The error.")


# --- health and models -------------------------------------------------------------------


class FormationWorker(_Body):
    """A formation worker process (``memory.formation_workers``)."""

    index: int = Field(description="Its position; tenant ``t`` goes to ``crc32(t) % count``.")
    pid: int | None = Field(description="Its process id (none before its first start).")
    alive: bool = Field(description="Whether its process runs.")
    ready: bool = Field(description="Whether it has loaded its models and takes work.")
    restarts: int = Field(description="How often it died and was started again.")
    priority: str | None = Field(
        description="How it yields the CPU to the proxy, once ready: ``idle`` (under "
        "SCHED_IDLE while it keeps up, lifted to nice 19 when work waits), or ``nice`` "
        "(nice 19 only, where the process may not leave SCHED_IDLE)."
    )


class TenantPlaceReport(_Body):
    """A tenant a cluster node holds, or held."""

    tenant: str
    state: Literal["claiming", "restoring", "ready", "lost", "released", "failed"] = Field(
        description="``claiming``: waiting for the lease; ``restoring``: putting the "
        "database in place; ``ready``: served with memory; ``lost``: another node took "
        "the lease; ``released``: idle, given up; ``failed``: the claim failed (the next "
        "request claims again)."
    )
    epoch: int | None = Field(description="The lease's epoch (one more at each takeover).")
    acquired_at: float | None = Field(description="When the lease was taken (Unix time).")
    released_at: float | None = Field(description="When the node let the tenant go.")
    restore_ms: float | None = Field(description="From the lease taken to memory ready.")
    restored_from_epoch: int | None = Field(
        description="The epoch whose replica was restored (none: the local database was "
        "kept, or the tenant is new)."
    )
    error: str | None = Field(description="Why the claim failed.")


class ClusterTenants(_Body):
    """``GET /cluster/tenants``: where this node stands in the cluster."""

    node: str | None = Field(description="This node's name (none: not in a cluster).")
    replication_lag_s: float = Field(
        description="The longest a commit of a held tenant has waited for its upload."
    )
    tenants: list[TenantPlaceReport]


class Health(_Body):
    """Liveness: always 200 while the process serves."""

    status: Literal["starting", "ok", "stopping"] = Field(
        description="``starting`` until models and graphs are loaded, ``ok`` then, "
        "``stopping`` during shutdown."
    )
    policy: str = Field(description="The trigger-policy file in effect.")
    policy_error: str | None = Field(
        description="Why the last edit of the policy was refused (previous policy kept)."
    )
    tenants_open: int = Field(description="Tenant stores open in this process.")
    formation_workers: list[FormationWorker] = Field(
        description="The formation worker processes (none: formation runs in this process)."
    )


class Readiness(_Body):
    """Readiness: 200 once warm, 503 while starting or stopping."""

    status: Literal["starting", "ready", "stopping"] = Field(description="Process state.")


class ModelCard(_Body):
    """A model the proxy routes."""

    id: str = Field(description="Model name to send as ``model``.")
    object: Literal["model"] = Field(description="Always ``model``.")
    created: int = Field(description="Epoch seconds (the config file's modification time).")
    owned_by: str = Field(description="Always ``areamem``.")


class ModelList(_Body):
    """The advertised models, as ``GET /v1/models`` of the OpenAI API."""

    object: Literal["list"] = Field(description="Always ``list``.")
    data: list[ModelCard] = Field(description="The models.")


# --- chat --------------------------------------------------------------------------------


class ContentPart(_Open):
    """A content part; the proxy reads ``text`` parts, and forwards every part as sent."""

    type: str = Field(min_length=1, description="Part type (``text``, ``image_url``, …).")
    text: str | None = Field(default=None, description="The text of a ``text`` part.")


class ChatMessage(_Open):
    """A chat message; fields the proxy does not read are forwarded unchanged."""

    role: Literal["system", "developer", "user", "assistant", "tool", "function"] = Field(
        description="Author role."
    )
    content: str | list[ContentPart] | None = Field(
        default=None, description="Text, content parts, or null (tool calls)."
    )
    name: str | None = Field(default=None, description="Speaker name; kept as the speaker.")
    tool_call_id: str | None = Field(default=None, description="The tool call answered.")
    tool_calls: list[dict[str, Any]] | None = Field(default=None, description="Tool calls.")


class ChatCompletionRequest(_Open):
    """A chat completion request; only the fields the proxy reads are described, every
    other field (tools, response_format, temperature, …) is forwarded unchanged."""

    model: str = Field(min_length=1, max_length=256, description="Model name to route.")
    messages: list[ChatMessage] = Field(
        min_length=1, description="The conversation; at least one ``user`` message."
    )
    stream: bool = Field(default=False, description="Stream the answer as server-sent events.")


class ChatCompletion(_Open):
    """The upstream's chat completion, relayed byte for byte."""

    id: str = Field(description="Completion id.")
    object: str = Field(description="``chat.completion``.")
    created: int = Field(description="Epoch seconds.")
    model: str = Field(description="Model that answered.")
    choices: list[dict[str, Any]] = Field(description="The answers.")
    usage: dict[str, Any] | None = Field(default=None, description="Token usage.")


class ChatCompletionChunk(_Open):
    """One ``data:`` event of a streamed answer, relayed as the upstream sent it."""

    id: str = Field(description="Completion id.")
    object: str = Field(description="``chat.completion.chunk``.")
    created: int = Field(description="Epoch seconds.")
    model: str = Field(description="Model that answers.")
    choices: list[dict[str, Any]] = Field(description="Deltas.")


# --- receipts ----------------------------------------------------------------------------


class ReceiptDecision(_Body):
    """The trigger policy's decision for the request."""

    retrieve: bool = Field(description="Whether memory was consulted.")
    reason: str = Field(description="Why, in words.")
    rule: str | None = Field(description="The rule that decided, if one did.")
    budget_tokens: int = Field(description="Token budget for the injected context.")
    max_fragments: int = Field(description="Most fragments retrieved.")


class ReceiptFragment(_Body):
    """A retrieved fragment as the receipt keeps it."""

    id: int = Field(description="Fragment id.")
    score: float = Field(description="Retrieval score (4 decimals).")
    conversation_id: str = Field(description="The fragment's conversation.")
    ts: float | None = Field(description="Epoch seconds; null when unknown.")
    role: str = Field(description="Author role.")
    speaker: str | None = Field(description="Speaker name, when known.")
    text: str = Field(description="The text, cut at 2,000 characters.")
    text_chars: int = Field(description="The text's full length in characters.")
    kind: str = Field(
        default="stated",
        description="What it does: ``stated``, ``asked`` (a question) or ``restated`` (an "
        "answer that restated the memory it was shown).",
    )
    ext_id: str | None = Field(default=None, description="The id the client gave its message.")
    shown: bool = Field(default=False, description="Whether the injected block shows its line.")
    cited: bool = Field(
        description="Whether the injected block cites it by number (``[n]``, from a statement "
        "or a correction); a cited fragment is always shown."
    )
    number: int | None = Field(default=None, description="Its ``[n]`` in the block, if cited.")


class ReceiptArea(_Body):
    """What retrieval found."""

    kind: str = Field(
        description="The label of the retrieval strategy used (``memory.retrieval``): "
        "``area (graph + bm25)`` or ``fts5-bm25 fragments``."
    )
    fragments: list[ReceiptFragment] = Field(description="Retrieved fragments, best first.")


class ReceiptStatement(_Body):
    """A statement of the injected block and what it was rendered from."""

    kind: str = Field(
        description="``fact``, ``change`` (current, then superseded) or ``conflict``."
    )
    text: str = Field(description="The statement as injected (without the leading ``- ``).")
    relation_ids: list[int] = Field(description="The stored relations it renders.")
    fragment_ids: list[int] = Field(description="The fragments it cites.")


class ReceiptCitation(_Body):
    """What a citation number of the injected block stands for."""

    number: int = Field(description="The ``[n]`` of the block.")
    fragment_id: int = Field(description="The stored fragment it names.")


class ReceiptFocus(_Body):
    """One content focus of the question and whether the block holds it."""

    focus: str = Field(description="The word, as the question wrote it (lowercased).")
    covered: bool = Field(description="Whether a rendered fragment, statement or speaker holds it.")
    where: str | None = Field(description="``fragment <id>``, ``statement`` or ``speaker``.")


class ReceiptCoverage(_Body):
    """The coverage verdict of the question's foci (``reconstruction.coverage``)."""

    foci: list[ReceiptFocus] = Field(description="Every content focus, in question order.")
    nothing_found: bool = Field(description="No focus covered and nothing similar found.")


class Receipt(_Body):
    """What one request that consulted memory did (``X-Memory-Receipt`` names it)."""

    id: str = Field(description="Receipt id (``rcpt_…``).")
    created_at: float = Field(description="Epoch seconds.")
    tenant: str = Field(description="The tenant the request acted for.")
    model: str = Field(description="Requested model.")
    conversation_id: str = Field(description="Conversation id (explicit or derived).")
    decision: ReceiptDecision = Field(description="The policy's decision.")
    memory_error: str | None = Field(
        description="Why memory was skipped or failed (the request went on without it)."
    )
    area: ReceiptArea = Field(description="What retrieval found.")
    injected_text: str = Field(description="The memory block injected (empty: none).")
    tokens: int = Field(description="Tokens of the injected text.")
    timings_ms: dict[str, float] = Field(description="Milliseconds per stage of the request.")
    upstream_status: int = Field(description="HTTP status the upstream answered.")
    graph_version: int | None = Field(description="The graph version read (area retrieval).")
    graph_area: AreaSummary | None = Field(
        description="The area query: foci, region, score terms (area retrieval)."
    )
    statements: list[ReceiptStatement] = Field(
        default_factory=list, description="Every statement of the injected block."
    )
    citations: list[ReceiptCitation] = Field(
        default_factory=list, description="Each citation number of the block and its fragment."
    )
    coverage: ReceiptCoverage | None = Field(
        default=None, description="Which of the question's foci the block holds."
    )
    tokenizer: str = Field(default="", description="The tokenizer the budget was counted with.")
    as_of: int | None = Field(
        default=None, description="The snapshot memory was read as of (X-Memory-As-Of)."
    )

    @model_validator(mode="before")
    @classmethod
    def _before_shown(cls, data: Any) -> Any:
        """A receipt kept from before a fragment was *shown* or *cited* (its ``cited``
        then meant shown) reads with today's meanings: shown as it said, cited when the
        block numbers it, as its ``citations`` say."""
        area = data.get("area") if isinstance(data, dict) else None
        if not isinstance(area, dict):
            return data
        found = area.get("fragments")
        if not isinstance(found, list) or not any(
            isinstance(f, dict) and "shown" not in f for f in found
        ):
            return data
        numbers = {
            c.get("fragment_id"): c.get("number")
            for c in data.get("citations") or ()
            if isinstance(c, dict)
        }
        fragments = [
            {
                **f,
                "shown": bool(f.get("cited")),
                "cited": f.get("id") in numbers,
                "number": numbers.get(f.get("id")),
            }
            if isinstance(f, dict) and "shown" not in f
            else f
            for f in found
        ]
        return {**data, "area": {**area, "fragments": fragments}}


class ReceiptSummary(_Body):
    """A receipt as ``GET /memory/receipts`` lists it (the whole one: by its id)."""

    id: str = Field(description="Receipt id (``rcpt_…``).")
    created_at: float | None = Field(description="Epoch seconds; null when unreadable.")
    model: str = Field(description="Requested model.")
    conversation_id: str = Field(description="Conversation id (explicit or derived).")
    retrieve: bool = Field(description="Whether memory was consulted.")
    reason: str = Field(description="Why (or why not), in words: the policy's decision.")
    fragments: int = Field(description="Fragments retrieval found (not all are shown).")
    shown: int = Field(default=0, description="Fragments the injected block shows.")
    cited: int = Field(default=0, description="Fragments the injected block cites by number.")
    tokens: int = Field(description="Tokens of the injected text.")
    memory_error: str | None = Field(description="Why memory was skipped or failed, if it was.")


class ReceiptsResponse(_Body):
    """``GET /memory/receipts``: the caller's newest receipts, newest first."""

    tenant: str = Field(description="The caller's tenant.")
    receipts: list[ReceiptSummary] = Field(description="Newest first, at most ``limit``.")


class ForgetSummary(_Body):
    """One forget (``/memory forget`` in a chat), in force or undone."""

    id: int = Field(description="The forget's number (``/memory unforget <id>`` undoes it).")
    created_at: float | None = Field(description="Epoch seconds; null when unreadable.")
    conversation_id: str | None = Field(description="The conversation it was asked in.")
    request: str = Field(description="What was asked: the words, or the fragment ids.")
    messages: int = Field(description="Messages whose fragments it forgot.")
    undone_at: float | None = Field(description="When it was undone; null while in force.")


class ForgetsResponse(_Body):
    """``GET /memory/forgets``: the caller's forgets, newest first."""

    tenant: str = Field(description="The caller's tenant.")
    forgets: list[ForgetSummary] = Field(description="Newest first, at most ``limit``.")


# --- the /memory API ----------------------------------------------------------------------


ConversationId = Annotated[str, Field(min_length=1, max_length=200)]


class IngestMessage(_Open):
    """A transcript message, stored as if it had passed through the proxy."""

    role: str = Field(description="Author role.")
    content: Any = Field(default=None, description="Text or content parts.")
    name: str | None = Field(default=None, description="Speaker name.")
    timestamp: float | str | None = Field(
        default=None, description="Epoch seconds or ISO 8601 (naive: UTC); default now."
    )
    id: str | int | None = Field(default=None, description="Your own id for the message.")


class IngestRequest(_Body):
    """``POST /memory/ingest``."""

    conversation_id: ConversationId | None = Field(
        default=None, description="Conversation id; derived from the messages when absent."
    )
    messages: list[IngestMessage] = Field(
        min_length=1, max_length=100_000, description="The transcript, oldest first."
    )


class IngestResponse(_Body):
    """What an ingest stored."""

    conversation_id: str = Field(description="The conversation the messages went to.")
    appended: int = Field(description="Messages newly appended to the log.")
    already_stored: int = Field(description="Messages already in the log (skipped).")
    superseded: int = Field(description="Earlier messages superseded by a branch.")
    fragments_formed: int = Field(description="Fragments formed before answering.")
    formation: Literal["done", "queued"] = Field(
        description="``done`` (``form=wait``) or ``queued`` (``form=background``)."
    )


class SearchHit(_Body):
    """A retrieved fragment."""

    fragment_id: int = Field(description="Fragment id.")
    score: float = Field(description="Retrieval score (higher is better).")
    text: str = Field(description="Fragment text.")
    role: str = Field(description="Author role.")
    speaker: str | None = Field(description="Speaker name, when known.")
    conversation_id: str = Field(description="The fragment's conversation.")
    conversation_label: str | None = Field(
        default=None,
        description="What the conversation is called: its id, or what it is about when the "
        "id is only an identifier (a hash, a UUID).",
    )
    ts: float | None = Field(description="Epoch seconds; null when unknown.")
    ext_id: str | None = Field(description="The id given at ingest, if any.")
    kind: str = Field(
        default="stated",
        description="What it does: ``stated``, ``asked`` (a question) or ``restated`` (an "
        "answer that restated the memory it was shown).",
    )


class SearchResponse(_Body):
    """What retrieval returns for a question."""

    query: str = Field(description="The question.")
    terms: list[str] = Field(description="Its search terms.")
    hits: list[SearchHit] = Field(description="Retrieved fragments, best first.")
    context: str = Field(description="The memory block that would be injected.")
    citations: list[ReceiptCitation] = Field(
        default_factory=list, description="What each ``[n]`` of the block cites."
    )
    tokens: int = Field(description="Its tokens.")
    elapsed_ms: float = Field(description="Time retrieval took.")


class _Tenant(_Body):
    tenant: str = Field(description="The caller's tenant.")


class StatsResponse(StoreStats, _Tenant):
    """Sizes of the caller's memory (``tenant`` first: pydantic orders base fields last)."""


class _Query(_Body):
    query: str = Field(description="The question.")


class AreaResponse(AreaExplanation, _Query):
    """Why an area would be chosen for ``query``."""


class EntitiesResponse(_Body):
    """``GET /memory/entities``."""

    entities: list[EntityView] = Field(description="Entities by mentions, most first.")


class ContextsResponse(_Body):
    """``GET /memory/contexts``."""

    contexts: list[ContextView] = Field(description="Contexts by size, largest first.")


class RelationsResponse(_Body):
    """``GET /memory/relations``."""

    entity: str | None = Field(description="The entity filter, if given.")
    relations: list[RelationView] = Field(description="Relations by id.")


# --- history: snapshots, rollback --------------------------------------------------------


class SnapshotSummary(_Body):
    """One snapshot of the chain (its changeset takes its parent's state to its own)."""

    id: int
    parent: int | None = Field(description="The snapshot before it (null: the first kept).")
    kind: Literal["cycle", "rollback", "checkpoint"] = Field(
        description="cycle: a consolidation cycle ended; rollback: memory restored to"
        " ``target``; checkpoint: formation folded in before a rollback."
    )
    target: int | None = Field(description="For a rollback: the snapshot restored.")
    created_at: float = Field(description="Epoch seconds.")
    bytes: int = Field(description="Size of its changeset.")
    rows_changed: int = Field(description="Rows of derived memory its changeset changes.")
    counts: dict[str, Any] = Field(
        description="``changed``: rows per table and operation; ``totals``: rows of the"
        " main tables in its state."
    )
    trigger: str | None = Field(description="Why its cycle ran (cycles only).")
    decisions: dict[str, int] = Field(description="Its cycle's decisions per kind.")
    description: str = Field(
        description="What it is, in words: 'cycle 3 (demand)', 'rollback to 7 (undo: rollback"
        " to 11)', 'formation', or 'formation, saved before rollback to 7' (the checkpoint a"
        " rollback took: part of that rollback)."
    )
    undo: int | None = Field(
        description="For a rollback: the snapshot to roll back to to undo it exactly."
    )


class SnapshotDetail(SnapshotSummary):
    """A snapshot with its whole report (a cycle's decisions with reasons and sources)."""

    report: dict[str, Any]


class SnapshotsResponse(_Body):
    """The newest snapshots, and where the tenant's history stands."""

    tenant: str
    head: int | None = Field(description="The newest snapshot.")
    generation: int = Field(description="Cycles and rollbacks so far.")
    held: int = Field(description="Log messages held back from formation by a rollback.")
    journal_entries: int = Field(description="Writes of derived memory since the head.")
    journal_bytes: int
    last_rollback_at: float | None
    snapshots: list[SnapshotSummary]


class HeldMessage(_Body):
    """A logged message a rollback holds back from formation (kept in the log)."""

    log_id: int
    conversation_id: str
    role: str
    text: str = Field(description="Its first 200 characters.")
    ts: float | None = Field(description="Its time, epoch seconds (null when unknown).")
    held_at: float
    held_by: int | None = Field(description="The snapshot whose rollback held it.")


class HeldResponse(_Body):
    tenant: str
    held: int = Field(description="All held messages.")
    messages: list[HeldMessage] = Field(description="The oldest ones (at most ``limit``).")


class RollbackRequest(_Body):
    """``POST /memory/rollback``: the snapshot to restore; ``reform``: form the held
    messages at once instead of at the next consolidation cycle."""

    snapshot: StrictInt = Field(ge=1, le=2**62)
    reform: StrictBool = False


class ImportResponse(_Body):
    """What ``POST /memory/import`` loaded."""

    tenant: str = Field(description="The caller's tenant, which now holds the export.")
    from_tenant: str = Field(description="The tenant the export was made of.")
    created_at: str = Field(description="When the export was made (ISO 8601, UTC).")
    version: int = Field(description="The export's format version.")
    replaced: bool = Field(description="Whether what the tenant held was replaced.")
    counts: dict[str, int] = Field(description="Rows loaded per table.")


class RollbackResponse(_Body):
    """What a rollback did."""

    tenant: str
    restored: int = Field(description="The snapshot whose state memory now has.")
    snapshot: int = Field(description="The snapshot recording this rollback.")
    undo: int = Field(
        description="The snapshot whose state memory had just before (the checkpoint, else the"
        " previous head): roll back to it to undo this rollback exactly."
    )
    checkpoint: int | None = Field(
        description="A snapshot of what formation had added since the head, taken first."
    )
    rows_changed: int
    tables: dict[str, dict[str, int]] = Field(description="Rows changed per table and operation.")
    held: int = Field(description="Messages held back from formation now (all of them).")
    newly_held: int
    formed_again: int = Field(description="Held messages the restored state had formed.")
    reformed: int = Field(description="Messages formed at once (with ``reform``).")
    held_messages: list[HeldMessage] = Field(description="The oldest held messages.")
    generation: int
    elapsed_ms: float
