"""The HTTP edge of the proxy: reading bodies and headers, the lean front on the socket,
the client's side of an exchange, server-sent events, metrics and the request log."""
