"""The typed shapes of what memory shows people: area explanations, inspection views, stats.

The store returns these (:meth:`.store.memory_store.MemoryStore.entities`,
``contexts``, ``relations``, ``explain_area``, ``stats``): its producers build plain
JSON-ready values and validate them into these models before they leave the library, so
a consumer serves ``model_dump(mode="json")`` as it is. Every model forbids unknown keys
and is frozen: a producer that drifts from its contract fails loudly where it is built.

Times are epoch seconds, None when the stored time is not a sane timestamp; so is any
other number that was not finite when read (see :mod:`memory_core.store.inspection`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AreaCandidate",
    "AreaEdge",
    "AreaExplanation",
    "AreaNode",
    "AreaSummary",
    "ContextConversationSample",
    "ContextView",
    "EntityAlias",
    "EntityContext",
    "EntityView",
    "ExplainedArea",
    "ExplainedRegionScore",
    "FragmentAreaNode",
    "FragmentNode",
    "GraphSize",
    "NodeKey",
    "NodeView",
    "OtherAreaNode",
    "OtherNode",
    "RankedFragment",
    "RegionScore",
    "RegionSummary",
    "RelationMutation",
    "RelationSource",
    "RelationView",
    "StoreStats",
    "SummaryVisits",
    "Visits",
]


class _View(BaseModel):
    """A frozen value with no keys beyond its fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)


Seconds = Annotated[float | None, Field(description="Epoch seconds; null when unknown.")]
Timings = Annotated[
    dict[str, float],
    Field(description="Milliseconds per stage, keyed ``<stage>_ms``, in the order run."),
]

# --- graph nodes -------------------------------------------------------------------------

NodeKey = tuple[
    Literal["fragment", "context", "entity", "word", "session"],
    int | str | tuple[str, int | None],
]
"""What a graph node stands for, as ``[kind, key]``: a fragment, context or entity id, a
word, or a session ``[conversation_id, day number or null]``."""


class FragmentNode(_View):
    """A fragment node, described from its SQLite row."""

    node: int = Field(description="Node index in the pinned graph version.")
    kind: Literal["fragment"] = Field(description="Node kind.")
    id: int = Field(description="Fragment id.")
    label: str = Field(description="Speaker and the first 80 characters of the text.")
    conversation_id: str | None = Field(description="The fragment's conversation.")
    conversation_label: str | None = Field(
        default=None,
        description="What the conversation is called: its id, or what it is about when the "
        "id is only an identifier (a hash, a UUID); null when the fragment is gone.",
    )


class OtherNode(_View):
    """A node that is not a fragment: context, entity, word or session."""

    node: int = Field(description="Node index in the pinned graph version.")
    kind: Literal["context", "entity", "word", "session"] = Field(description="Node kind.")
    id: int | None = Field(description="Context or entity id; null for words and sessions.")
    label: str = Field(
        description="Context label, entity name, word, or a session's conversation label and "
        "day (``chat about Rui, Lisbon · 2024-04-01``; never a hash)."
    )
    type: str | None = Field(
        default=None,
        description="An entity's type as formation stored it (``PER``, ``LOC``, ``ORG``, "
        "``MISC``: no known type); null for other kinds.",
    )


NodeView = Annotated[FragmentNode | OtherNode, Field(discriminator="kind")]


class _PerFocus(_View):
    """Mixed in last-but-listed-first: pydantic orders fields base-last, so
    ``class X(_PerFocus, Node)`` keeps the node's fields first, as the producer does."""

    per_focus: dict[str, float] = Field(
        description="Activation this node received from each focus, keyed by focus label."
    )


class FragmentAreaNode(_PerFocus, FragmentNode):
    """A fragment node of the chosen region, with its activation per focus."""


class OtherAreaNode(_PerFocus, OtherNode):
    """A non-fragment node of the chosen region, with its activation per focus."""


AreaNode = Annotated[FragmentAreaNode | OtherAreaNode, Field(discriminator="kind")]

# --- area score --------------------------------------------------------------------------


class RegionScore(_View):
    """Every term of a region's score (see ``memory_core.graph.area``); ``score`` is their
    product."""

    score: float = Field(description="The region's score.")
    coverage: float = Field(description="Share of the foci that reach the region.")
    convergence: float = Field(description="How evenly the foci reach the region.")
    mass: float = Field(description="Activation mass of the region, size-normalised.")
    hub_penalty: float = Field(description="Penalty for high-degree hub nodes.")
    support: float = Field(description="Share of the region backed by sourced edges.")
    size: int = Field(description="Number of nodes in the region.")
    total: float = Field(description="Total activation of the region.")
    sources: int = Field(description="Distinct source fragments of the region's edges.")
    edge_ids: int = Field(description="Distinct stored edges inside the region.")


class ExplainedRegionScore(RegionScore):
    """The score terms with the region's activation per focus (in ``foci`` order)."""

    per_focus: list[float] = Field(description="Region activation per focus, in ``foci`` order.")


# --- receipt summary ---------------------------------------------------------------------


class SummaryVisits(_View):
    """Work the activation did."""

    nodes: int = Field(description="Nodes the activation reached.")
    edges: int = Field(description="Edges the activation traversed.")


class RegionSummary(_View):
    """The chosen region as a receipt keeps it (node keys only: built without SQLite)."""

    representative: NodeKey = Field(description="The region's centre, as ``[kind, key]``.")
    nodes: list[NodeKey] = Field(description="Every node of the region, as ``[kind, key]``.")
    edges: dict[str, int] = Field(description="Number of region edges per edge type.")
    score: RegionScore = Field(description="The region's score terms.")


class RankedFragment(_View):
    """A ranked fragment with its score terms: the extension point of
    :attr:`AreaExplanation.fragments`. New terms are new keys of ``terms``, never new
    fields, so the contract does not change when the ranking gains a term."""

    id: int = Field(description="Fragment id.")
    score: float = Field(
        description="The fragment's score: its terms weighted by ``retrieval.scoring``, "
        "summed, times ``factor``."
    )
    terms: dict[str, float] = Field(
        default_factory=dict,
        description="Each term of the score by name, a share in [0, 1] before weighting "
        "(``bm25``, ``activation``, ``convergence``, ``similarity``, ``area``, ``date``).",
    )
    imputed: bool = Field(
        default=False,
        description="Formed after the graph version the query read: its graph and vector "
        "terms are its BM25 share.",
    )
    kind: Literal["stated", "asked", "restated"] = Field(
        default="stated",
        description="What the fragment does: states, only asks, or restates memory an "
        "answer was shown.",
    )
    factor: float = Field(
        default=1.0,
        description="The score's multiplier by ``kind`` (``retrieval.scoring.asked`` / "
        "``restated``; 1 for a statement): score = factor x the weighted terms.",
    )
    cosine: float | None = Field(
        default=None,
        description="The cosine of the fragment's embedding to the question's (the "
        "``similarity`` term is its place among the candidates'); null without a vector.",
    )


class AreaSummary(_View):
    """What a receipt keeps of an area query (``area_retrieval.summary``)."""

    graph_version: int = Field(description="The pinned graph version that was read.")
    operator: Literal["pulse", "wave"] | None = Field(
        description="The operator that ranked the area's fragments; null without a region."
    )
    foci: list[str] = Field(
        description="Focus labels (``word:…``, ``entity:…``, ``bm25``, ``dense``)."
    )
    timings_ms: Timings
    fragments: list[RankedFragment] = Field(
        default_factory=list,
        description="The ranked fragments, best first, each with its score and terms "
        "(absent from receipts stored before terms were reported).",
    )
    region: RegionSummary | None = Field(description="The chosen region; null when none.")
    visited: SummaryVisits | None = Field(
        default=None, description="Work done; null when nothing was activated."
    )
    bridged: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Each question word memory never uses with the words of memory in another "
        "language it was matched to (the word bridge); empty when none.",
    )
    named: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Each name the question calls a speaker by that the other speaker "
        "addresses them with (\"Kate\"), with the speakers' own names, read as if the "
        "question had named them; empty when none.",
    )


# --- explanation (GET /memory/area) -------------------------------------------------------


class GraphSize(_View):
    """Sizes of the pinned graph version."""

    nodes: int = Field(description="Nodes.")
    edges: int = Field(description="Edges (base and delta).")
    delta_edges: int = Field(description="Edges appended since the last compaction.")
    fragments: int = Field(description="Fragments in the graph.")


class Visits(SummaryVisits):
    """Work the activation did, in full."""

    pushes: int = Field(description="Activation pushes.")
    rounds: int = Field(description="Propagation rounds.")
    converged: bool = Field(description="Whether propagation converged within its bounds.")


class AreaEdge(_View):
    """An edge inside the chosen region."""

    src: int = Field(description="Source node index.")
    dst: int = Field(description="Target node index.")
    type: str = Field(description="Edge type, lower case (``mentions``, ``relation``, …).")
    edge_id: int = Field(description="Stored id of the edge within its type.")
    source: NodeView | None = Field(description="The fragment that supports the edge, if any.")


class ExplainedArea(_View):
    """The chosen region in full."""

    representative: NodeView = Field(description="The region's centre.")
    score: ExplainedRegionScore = Field(description="The region's score terms.")
    nodes: list[AreaNode] = Field(description="Every node of the region.")
    edges: list[AreaEdge] = Field(description="Every stored edge among the region's nodes.")


class AreaCandidate(_View):
    """A candidate region, best first."""

    representative: NodeView = Field(description="The candidate's centre.")
    size: int = Field(description="Nodes in the candidate region.")
    score: float = Field(description="The candidate's score.")


class AreaExplanation(_View):
    """Why an area would be chosen for a question (``area_retrieval.explain``)."""

    graph_version: int = Field(description="The pinned graph version that was read.")
    graph: GraphSize = Field(description="Sizes of that graph version.")
    foci: list[str] = Field(
        description="Focus labels (``word:…``, ``entity:…``, ``bm25``, ``dense``)."
    )
    timings_ms: Timings
    fragments: list[RankedFragment] = Field(
        description="The ranked fragments, best first, each with its score and terms."
    )
    area: ExplainedArea | None = Field(description="The chosen region; null when none.")
    candidates: list[AreaCandidate] = Field(description="Every candidate region, best first.")
    visited: Visits | None = Field(
        default=None, description="Work done; null when nothing was activated."
    )
    bridged: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Each question word memory never uses with the words of memory in another "
        "language it was matched to (the word bridge); empty when none.",
    )
    named: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Each name the question calls a speaker by that the other speaker "
        "addresses them with (\"Kate\"), with the speakers' own names, read as if the "
        "question had named them; empty when none.",
    )


# --- inspection views --------------------------------------------------------------------


class EntityAlias(_View):
    """A name an entity goes by."""

    alias: str = Field(description="The alias as written.")
    lang: str | None = Field(description="Its language, when known.")
    source: str = Field(
        description="Where the alias came from (``name``, ``mention``, ``translation``,"
        " ``alias-statement``, ``vocative``: how the other speaker addresses a speaker)."
    )
    fragment_id: int | None = Field(
        default=None, description="The fragment the alias was first learned from."
    )
    used_in: list[int] = Field(
        default_factory=list,
        description="For a ``vocative`` alias: the fragments (at most 20) where the other"
        " speaker called the entity by it.",
    )


class EntityContext(_View):
    """A context an entity is mentioned in."""

    id: int = Field(description="Context id.")
    label: str = Field(description="Context label.")
    mentions: int = Field(description="Mentions of the entity in that context.")


class EntityView(_View):
    """An entity with its aliases and the (at most five) contexts it appears in most."""

    id: int = Field(description="Entity id.")
    name: str = Field(description="Canonical name.")
    label: str = Field(description="Entity type label (``PER``, ``LOC``, ``MISC``, …).")
    is_speaker: bool = Field(description="Whether the entity speaks in a conversation.")
    mentions: int = Field(description="Number of mentions.")
    first_seen: Seconds
    last_seen: Seconds
    interpretation: str = Field(description="The formation step (and version) that made it.")
    aliases: list[EntityAlias] = Field(description="Aliases, oldest first.")
    contexts: list[EntityContext] = Field(description="Contexts by mentions, at most five.")


class ContextConversationSample(_View):
    """A sample fragment of a context."""

    fragment_id: int = Field(description="Fragment id.")
    conversation_id: str = Field(description="The fragment's conversation.")
    ts: Seconds
    speaker: str | None = Field(description="Speaker name, when known.")
    text: str = Field(
        description="Fragment text: its first 2,000 characters, then '…' when longer."
    )


class ContextView(_View):
    """A context with the conversations it spans and up to three sample fragments."""

    id: int = Field(description="Context id.")
    label: str = Field(description="Context label.")
    size: int = Field(description="Number of member fragments.")
    first_ts: Seconds
    last_ts: Seconds
    interpretation: str = Field(description="The formation step (and version) that made it.")
    conversations: list[str] = Field(description="Conversations with a segment in it.")
    segments: int = Field(description="Number of segments in it.")
    secondary_members: int = Field(description="Fragments that belong to it secondarily.")
    sample: list[ContextConversationSample] = Field(description="Up to three member fragments.")


class RelationSource(_View):
    """The fragment a relation was read from."""

    fragment_id: int = Field(description="Fragment id.")
    fragment_text: str = Field(
        description="Fragment text: its first 2,000 characters, then '…' when longer."
    )
    conversation_id: str = Field(description="The fragment's conversation.")
    ts: Seconds
    speaker: str | None = Field(description="Speaker name, when known.")


class RelationMutation(_View):
    """How a relation changed memory when it was formed; all null without a record."""

    kind: Literal["new", "reaffirmation", "change", "conflict"] | None = Field(
        description="Mutation kind."
    )
    other: int | None = Field(description="The relation it reaffirms, changes or conflicts with.")
    reason: str | None = Field(description="Why, in words.")


class RelationView(_View):
    """A relation with its source fragment and mutation record."""

    id: int = Field(description="Relation id.")
    subject: str = Field(description="Subject entity name.")
    subject_id: int = Field(description="Subject entity id.")
    predicate: str = Field(description="Predicate (``lives_in``, ``has_sister``, …).")
    object: str | None = Field(description="Object entity name, or the literal value.")
    object_id: int | None = Field(description="Object entity id; null for a literal value.")
    status: Literal["active", "superseded", "disputed"] = Field(description="Relation status.")
    confidence: float | None = Field(description="Confidence in [0, 1].")
    valid_from: str | None = Field(description="When the relation started to hold, if said.")
    interpretation: str = Field(description="The formation step (and version) that made it.")
    context_id: int | None = Field(description="The context it was formed in.")
    created_at: Seconds
    source: RelationSource = Field(description="The fragment it was read from.")
    mutation: RelationMutation = Field(description="Its mutation record.")


class StoreStats(_View):
    """Sizes of a store, for health, metrics and ``GET /memory/stats``."""

    log_messages: int = Field(description="Messages in the durable log.")
    fragments: int = Field(description="Fragments formed (superseded ones included).")
    live_fragments: int = Field(description="Fragments not superseded by a branch.")
    queued: int = Field(description="Log messages waiting for formation.")
    failed: int = Field(description="Log messages whose formation failed for good.")
    names: int = Field(description="Entity aliases known to the name matcher.")
    held: int = Field(
        description="Log messages a rollback holds back from formation until the next"
        " consolidation cycle (or POST /memory/rollback with reform)."
    )
    entities: int = Field(description="Entities (people, places, things named).")
    relations: int = Field(description="Relations (superseded and disputed ones included).")
    contexts: int = Field(description="Contexts (topics).")
    snapshots: int = Field(description="Snapshots kept in memory's history.")
    bytes: int = Field(description="Size of the database file and its write-ahead log.")
