"""A :class:`TextGenerator` for any served model, through litellm.

Synchronous on purpose: formation runs in a worker thread, off the event loop. The
request carries an OpenAI ``response_format`` of type ``json_schema`` (strict), which
OpenAI, vLLM, SGLang, llama.cpp and Ollama use to constrain decoding; servers that do
not support it ignore it (``drop_params`` removes it where litellm knows it is
unsupported) and still see the schema in the prompt (:func:`.structured.structured_call`
puts it there), with validation and one retry behind it.

litellm is imported on first use, never at import time, and every litellm exception
is translated here, once, into :class:`BackendError` naming the endpoint and model.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..interfaces import BackendError

__all__ = ["LiteLLMGenerator", "litellm_module"]


class LiteLLMGenerator:
    """Chat completions from ``provider/model`` at ``api_base`` (litellm's provider names)."""

    def __init__(
        self,
        *,
        provider: str,
        model: str,
        api_base: str | None,
        api_key: str | None,
        timeout_s: float = 60,
        temperature: float = 0,
    ) -> None:
        self.name = model
        self.provider = provider
        self.model = model
        self.api_base = api_base
        self._api_key = api_key
        self.timeout_s = timeout_s
        self.temperature = temperature

    @property
    def endpoint(self) -> str:
        """Where requests go, for error messages: the base URL or the provider's default."""
        return self.api_base or f"the default {self.provider} endpoint"

    def generate(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> str:
        """The assistant's text for ``messages`` (``""`` when the model returned none)."""
        try:
            response = litellm_module().completion(**self._kwargs(messages, schema))
            content = response.choices[0].message.content
        except Exception as exc:
            message = str(getattr(exc, "message", None) or exc)
            raise BackendError(
                f"LLM call to {self.endpoint} (model {self.provider}/{self.model}) "
                f"failed: {type(exc).__name__}: {message}"
            ) from exc
        return content if isinstance(content, str) else ""

    def _kwargs(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "model": f"{self.provider}/{self.model}",
            "messages": messages,
            "temperature": self.temperature,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": _schema_name(schema), "schema": schema, "strict": True},
            },
            "timeout": self.timeout_s,
            "api_base": self.api_base,
            "api_key": self._api_key or ("none" if self.api_base else None),
            "max_retries": 0,
            "drop_params": True,
        }


def _schema_name(schema: dict[str, Any]) -> str:
    """The schema's ``title`` made into a valid response_format name (``[A-Za-z0-9_-]``)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or "answer"))
    return name[:64]


def litellm_module() -> Any:
    """litellm, imported on first use with the settings this project needs.

    The local model-cost map (no network at import), production mode (it does not read a
    stray ``.env`` into the environment) and no feedback banner on every exception.
    Environment variables are only defaulted, so a user's explicit choice wins.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    import litellm

    litellm.suppress_debug_info = True
    return litellm
