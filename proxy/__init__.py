"""proxy: the OpenAI-compatible aiohttp server in front of the real model."""

from .app import build_services, create_app
from .config import Config, load_config
from .errors import ApiError, ConfigError, ProxyError, UpstreamError

__all__ = [
    "ApiError",
    "Config",
    "ConfigError",
    "ProxyError",
    "UpstreamError",
    "build_services",
    "create_app",
    "load_config",
]
