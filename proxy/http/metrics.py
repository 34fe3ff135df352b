"""Prometheus metrics, in a registry owned by the app (no global state)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["Metrics"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# a cycle forms what was queued and asks a model to judge: minutes are normal, an hour not
_LONG_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


class Metrics:
    """Counters and latency histograms of one proxy instance."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "areamem_requests",
            "Chat requests by front door (chat, responses, messages), stream and status",
            ["api", "stream", "status"],
            registry=r,
        )
        self.commands = Counter(
            "areamem_commands",
            "In-chat /memory commands answered by the proxy, by command",
            ["command"],
            registry=r,
        )
        self.decisions = Counter(
            "areamem_decisions", "Policy decisions", ["retrieve", "rule"], registry=r
        )
        self.errors = Counter("areamem_errors", "Errors by kind", ["kind"], registry=r)
        self.memory_failures = Counter(
            "areamem_memory_failures",
            "Memory failures by stage (a chat request meeting one goes on without memory)",
            ["stage"],
            registry=r,
        )
        self.retrieval_seconds = Histogram(
            "areamem_retrieval_seconds",
            "Retrieval + reconstruction latency of the lookups that ran (shed ones left out)",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.upstream_seconds = Histogram(
            "areamem_upstream_seconds",
            "Upstream latency to the complete answer (failed calls included)",
            ["api", "stream"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.request_seconds = Histogram(
            "areamem_request_seconds",
            "Whole request latency in the proxy",
            ["api", "stream"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.http_requests = Counter(
            "areamem_http_requests",
            "Every HTTP request by route and status (499: the client went away)",
            ["route", "status"],
            registry=r,
        )
        self.ingested = Counter(
            "areamem_ingested_messages", "Messages appended to the durable log", registry=r
        )
        self.formation_worker_restarts = Counter(
            "areamem_formation_worker_restarts",
            "Formation worker processes started again after they died",
            registry=r,
        )

        self.dream_cycles = Counter(
            "areamem_dream_cycles",
            "Consolidation cycles completed, by what started them (demand, policy)",
            ["trigger"],
            registry=r,
        )
        self.dream_seconds = Histogram(
            "areamem_dream_seconds",
            "Duration of a consolidation cycle (forming what was queued included)",
            buckets=_LONG_BUCKETS,
            registry=r,
        )
        self.rollbacks = Counter(
            "areamem_rollbacks", "Rollbacks of memory to a snapshot", registry=r
        )
        self.rollback_seconds = Histogram(
            "areamem_rollback_seconds",
            "Duration of a rollback (the graph read again included)",
            buckets=_LONG_BUCKETS,
            registry=r,
        )

        self.replication_lag = Gauge(
            "areamem_replication_lag_seconds",
            "In a cluster: the longest a commit of a tenant this node holds has waited for "
            "its upload to the replica",
            ["node"],
            registry=r,
        )
        self.spooled = Gauge(
            "areamem_spooled_exchanges",
            "In a cluster: exchanges on this node's disk waiting for their tenant's claim "
            "(the spool); a number that keeps growing means claims keep failing",
            ["node"],
            registry=r,
        )
        self.spool_replay_attempts = Counter(
            "areamem_spool_replay_attempts",
            "In a cluster: retries of a tenant's spooled exchanges by the node itself "
            "(proxy.cluster.replays), by outcome: stored (none left waiting) or failed",
            ["node", "outcome"],
            registry=r,
        )
        self.tenant_claims = Counter(
            "areamem_tenant_claims",
            "In a cluster: tenants this node took over, by how their database was put in "
            "place (restored, kept, new) or failed",
            ["node", "outcome"],
            registry=r,
        )
        self.tenant_claim_seconds = Histogram(
            "areamem_tenant_claim_seconds",
            "In a cluster: from a tenant's lease taken to its memory ready here",
            ["node"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)
