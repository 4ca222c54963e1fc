"""Reading a request body with a size limit: the one place every router does it.

The limit is checked against the declared Content-Length first, then while the
body streams in, so a chunked body (no declared length) is refused as soon as
it passes the limit and never buffered beyond it.
"""

from __future__ import annotations

from fastapi import Request

from lakeward.errors import PayloadTooLarge

DEFAULT_MAX_BODY_BYTES = 1_048_576


async def read_body(request: Request, limit: int, *, what: str = "request body") -> bytes:
    """The body of ``request``; ``PayloadTooLarge`` (413) once it is known to pass ``limit``.

    ``what`` names the body in the error ("the notification", ...).
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(what, limit)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _too_large(what, limit)
    return bytes(body)


def _too_large(what: str, limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"{what} too large: the limit is {limit} bytes")
