"""Where a chat request is forwarded: the route of each model, the raw fast path over
pooled HTTP/1.1 connections, and litellm for other providers."""
