"""What crosses the proxy besides the body: the header and query policy, as data.

Client → upstream. Every request header is forwarded (``OpenAI-Organization``,
``OpenAI-Project``, ``OpenAI-Beta``, ``User-Agent``, ``X-Stainless-*``, a gateway's own
headers such as OpenRouter's ``HTTP-Referer``/``X-Title``...) except:

- hop-by-hop headers (RFC 9110 §7.6.1), and any header the client's ``Connection``
  names;
- what the proxy sets itself for its own request: ``Host``, ``Content-Length``,
  ``Content-Type``, ``Content-Encoding``, ``Accept-Encoding`` (the fast path asks for
  ``identity``), ``Expect``;
- the client's credentials, which are for the proxy: ``Authorization``, ``X-Api-Key``,
  ``Api-Key``, ``Cookie`` (the upstream key comes from the config, never from a client);
- the proxy's own headers: ``X-Memory``, ``X-Memory-*`` and the configured conversation
  header (``X-Conversation-Id`` by default).

The query string of the client's request (``?api-version=2024-06-01``) is forwarded as
sent, still percent-encoded.

Upstream → client. Every response header is relayed (``x-request-id``, ``openai-*``,
``x-ratelimit-*``, ``retry-after``, ``retry-after-ms``, ``x-should-retry``...) except:

- hop-by-hop headers, and any header the upstream's ``Connection`` names;
- what the proxy writes for its own response: ``Content-Length``, ``Content-Type``,
  ``Content-Encoding`` (an adapter re-adds it when it relays bytes it could not decode),
  ``Date``, ``Server``;
- what would bind the proxy's origin to the upstream's: ``Set-Cookie``, ``Alt-Svc``,
  ``Strict-Transport-Security``, ``Access-Control-*``, and ``WWW-Authenticate`` (a
  challenge for the upstream's credentials, not the client's);
- ``X-Memory-*``: the proxy's own namespace (a chained areamem's receipt is not ours).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from multidict import CIMultiDict

__all__ = [
    "DROPPED_REQUEST",
    "DROPPED_REQUEST_PREFIXES",
    "DROPPED_RESPONSE",
    "DROPPED_RESPONSE_PREFIXES",
    "HOP_BY_HOP",
    "Forward",
    "forward_of",
    "merged",
    "relayed",
    "to_upstream",
]

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers that describe one connection, never the message (RFC 9110 §7.6.1)."""

DROPPED_REQUEST = HOP_BY_HOP | {
    "host",
    "content-length",
    "content-type",
    "content-encoding",
    "accept-encoding",
    "expect",
    "authorization",
    "x-api-key",
    "api-key",
    "cookie",
    "x-memory",
}
"""Request headers never forwarded upstream (lower case)."""

DROPPED_REQUEST_PREFIXES = ("x-memory-",)

DROPPED_RESPONSE = HOP_BY_HOP | {
    "content-length",
    "content-type",
    "content-encoding",
    "date",
    "server",
    "set-cookie",
    "alt-svc",
    "strict-transport-security",
    "www-authenticate",
}
"""Response headers never relayed to the client (lower case)."""

DROPPED_RESPONSE_PREFIXES = ("access-control-", "x-memory-")


@dataclass(frozen=True)
class Forward:
    """What of the client's request travels upstream besides the body.

    ``headers`` already passed :func:`to_upstream`; ``query`` is the raw query string
    (percent-encoded, without ``?``), empty when the client sent none.
    """

    headers: Mapping[str, str] = field(default_factory=dict)
    query: str = ""

    def param(self, name: str) -> str | None:
        """One decoded query parameter (its last value), for adapters that take it apart."""
        values = parse_qs(self.query, keep_blank_values=True).get(name)
        return values[-1] if values else None


def forward_of(
    headers: Iterable[tuple[str, str]], query: str, conversation_header: str
) -> Forward:
    """The forwardable headers and query of a client request (its header pairs and raw
    query string)."""
    return Forward(to_upstream(headers, conversation_header), query)


def to_upstream(items: Iterable[tuple[str, str]], conversation_header: str) -> dict[str, str]:
    """The request headers the policy forwards; repeated names are joined with ``, ``."""
    pairs = list(items)
    dropped = DROPPED_REQUEST | _named_by_connection(pairs) | {conversation_header.lower()}
    return _kept(pairs, dropped, DROPPED_REQUEST_PREFIXES)


def relayed(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The upstream response headers the policy relays to the client."""
    pairs = list(items)
    dropped = DROPPED_RESPONSE | _named_by_connection(pairs)
    return _kept(pairs, dropped, DROPPED_RESPONSE_PREFIXES)


def merged(upstream: Mapping[str, str], own: Mapping[str, str]) -> CIMultiDict[str]:
    """The client response's headers: the relayed ones, with the proxy's own winning
    whatever their case."""
    headers = CIMultiDict(upstream)
    headers.update(own)
    return headers


def _named_by_connection(pairs: list[tuple[str, str]]) -> set[str]:
    return {
        name.strip().lower()
        for key, value in pairs
        if key.lower() == "connection"
        for name in value.split(",")
        if name.strip()
    }


def _kept(
    pairs: list[tuple[str, str]], dropped: set[str] | frozenset[str], prefixes: tuple[str, ...]
) -> dict[str, str]:
    kept: dict[str, str] = {}
    seen: dict[str, str] = {}
    for key, value in pairs:
        lower = key.lower()
        if lower in dropped or lower.startswith(prefixes):
            continue
        if lower in seen:
            kept[seen[lower]] += ", " + value
        else:
            seen[lower] = key
            kept[key] = value
    return kept
