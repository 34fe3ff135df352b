"""JSON Schemas of the two other front doors' bodies, for :mod:`.openapi`.

``POST /v1/messages`` (Anthropic's Messages API) and ``POST /v1/responses`` (OpenAI's Responses API)
forward what the proxy does not read as sent, so their schemas state what the proxy reads and checks
(:mod:`proxy.doors.messages_wire`, :mod:`proxy.doors.responses_wire`) and admit every other field;
the answers are described as far as the proxy makes them (bridged) or relays them (native: the
upstream's own shape, of which the same fields are required).
"""

from __future__ import annotations

from typing import Any

__all__ = ["DOOR_SCHEMAS"]

Json = dict[str, Any]

_TEXT_OR_PARTS: Json = {
    "anyOf": [
        {"type": "string"},
        {"type": "array", "items": {"type": "object", "required": ["type"]}},
    ]
}

DOOR_SCHEMAS: dict[str, Json] = {
    "MessagesRequest": {
        "type": "object",
        "description": "An Anthropic Messages request; other fields are forwarded as sent.",
        "required": ["model", "max_tokens", "messages"],
        "properties": {
            "model": {"type": "string", "minLength": 1, "maxLength": 256},
            "max_tokens": {"type": "integer", "minimum": 1},
            "system": _TEXT_OR_PARTS,
            "messages": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["role", "content"],
                    "properties": {
                        "role": {"enum": ["user", "assistant"]},
                        "content": _TEXT_OR_PARTS,
                    },
                },
            },
            "stream": {"type": "boolean"},
        },
        "additionalProperties": True,
    },
    "Message": {
        "type": "object",
        "description": "An Anthropic message (the answer).",
        "required": ["type", "role", "content"],
        "properties": {
            "id": {"type": "string"},
            "type": {"const": "message"},
            "role": {"const": "assistant"},
            "model": {"type": "string"},
            "content": {"type": "array", "items": {"type": "object", "required": ["type"]}},
            "stop_reason": {"type": ["string", "null"]},
            "usage": {"type": "object"},
        },
        "additionalProperties": True,
    },
    "AnthropicError": {
        "type": "object",
        "description": "An error in Anthropic's shape (the proxy's own, or relayed).",
        "required": ["type", "error"],
        "properties": {
            "type": {"const": "error"},
            "error": {
                "type": "object",
                "required": ["type", "message"],
                "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
            },
        },
    },
    "ResponsesRequest": {
        "type": "object",
        "description": "An OpenAI Responses request; other fields are forwarded as sent.",
        "required": ["model", "input"],
        "properties": {
            "model": {"type": "string", "minLength": 1, "maxLength": 256},
            "instructions": {"type": ["string", "null"]},
            "input": {
                "anyOf": [
                    {"type": "string", "minLength": 1},
                    {"type": "array", "minItems": 1, "items": {"type": "object"}},
                ]
            },
            "stream": {"type": "boolean"},
        },
        "additionalProperties": True,
    },
    "Response": {
        "type": "object",
        "description": "An OpenAI Responses object (the answer).",
        "required": ["id", "object", "status", "output"],
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "response"},
            "status": {"type": "string"},
            "model": {"type": "string"},
            "output": {"type": "array", "items": {"type": "object", "required": ["type"]}},
            "usage": {"type": ["object", "null"]},
        },
        "additionalProperties": True,
    },
}
