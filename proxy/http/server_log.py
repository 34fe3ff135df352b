"""aiohttp's own reports of the requests it answers itself, as the proxy's records.

aiohttp answers a request whose head it cannot parse (a request line or a header past
8 KiB, a header without a colon, a bad method) with a 400 before any handler or
middleware runs, and reports it with ``logger.exception``: a dozen lines of traceback on
stderr per request, which any client can make at will, and no line in the request log
nor count in ``/metrics`` (every request is to be logged and counted, whatever its
outcome). The logger :func:`server_logger` makes, given to aiohttp's server, turns each
such report into one request-log record (``event: bad_request``: status, the client's
address, aiohttp's reason cut short; the log escapes what it holds) and counts it as
route ``unparsed``; anything else aiohttp reports this way (an error outside every
handler and middleware) is one ``http_server_error`` record with its exception and the
end of its traceback.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable

from aiohttp.http_exceptions import HttpProcessingError

from .request_log import RequestLog

__all__ = ["UNPARSED", "server_logger"]

UNPARSED = "unparsed"
"""The route label ``/metrics`` counts a request aiohttp could not parse under."""
_SHOWN = 200
_TRACEBACK = 4_000


class _Records(logging.Handler):
    """Writes each report aiohttp makes as one record of the request log."""

    def __init__(self, log: RequestLog, count: Callable[[int], None]) -> None:
        super().__init__()
        self._log = log
        self._count = count

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        remote = str(record.args[0]) if isinstance(record.args, tuple) and record.args else None
        if isinstance(exc, HttpProcessingError):
            status = exc.code or 400
            self._count(status)
            reason = str(exc.message or type(exc).__name__)[:_SHOWN]
            self._log.write(
                {"event": "bad_request", "status": status, "remote": remote, "error": reason}
            )
            return
        error = f"{type(exc).__name__}: {exc}"[:_SHOWN] if exc is not None else None
        told = "".join(traceback.format_exception(exc)) if exc is not None else None
        self._log.write(
            {
                "event": "http_server_error",
                "remote": remote,
                "message": record.getMessage()[:_SHOWN],
                "error": error,
                "traceback": told[-_TRACEBACK:] if told else None,  # one escaped line
            }
        )


def server_logger(log: RequestLog, count: Callable[[int], None]) -> logging.Logger:
    """A logger for aiohttp's server (``AppRunner(logger=...)``) that writes into ``log``
    and calls ``count`` with the status of each request it could not parse. It is not
    registered with :mod:`logging` (no configuration of the process reaches it) and does
    not propagate to the root logger's handlers, stderr among them."""
    logger = logging.Logger("areamem.http.server")
    logger.propagate = False
    logger.addHandler(_Records(log, count))
    return logger
