"""``POST /events/s3``: S3 and MinIO event notifications, for the erasure index.

Authenticated with the stack's webhook token (``lakeward erasure index
webhook`` prints it); bodies over 1 MiB are refused before they are read
whole. The events go to the real-time indexer, which runs once per server
(background.py): in this process, or, in a worker of ``lakeward serve``,
through the relay to the supervisor (relay.py).
"""

from __future__ import annotations

import time
from typing import Annotated, Protocol

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse

from lakeward.access.control import AccessControl
from lakeward.erasure.realtime import Parsed, parse_body
from lakeward.erasure.realtime.webhook import MAX_BODY_BYTES, token_matches, webhook_token
from lakeward.errors import Unauthenticated
from lakeward.http.body import read_body

TOKEN_TTL = 10.0
"""Seconds the server keeps the webhook token before reading it again."""


class EventSink(Protocol):
    """Takes a notification's events: the indexer itself, or the relay to it."""

    def accept(self, parsed: Parsed) -> None: ...


def events_router(access: AccessControl, indexer: EventSink) -> APIRouter:
    """The webhook; ``indexer`` is started and stopped by whoever runs it."""
    router = APIRouter(prefix="/events", tags=["erasure"])
    cached: list[tuple[float, str]] = []  # (read at, token): re-read after TOKEN_TTL

    def authenticate(authorization: str | None) -> None:
        now = time.monotonic()
        if not cached or now - cached[0][0] > TOKEN_TTL:
            # Re-read now and then, so that a rotated token takes over without a restart.
            cached[:] = [(now, webhook_token(access.secrets))]
        if not token_matches(cached[0][1], authorization):
            # One answer for a missing and a wrong token: nothing to probe.
            raise Unauthenticated("a valid webhook token is required (Authorization: Bearer …)")

    @router.post("/s3")
    async def s3_events(
        request: Request, authorization: Annotated[str | None, Header()] = None
    ) -> JSONResponse:
        """Accept an S3 (AWS, MinIO, or SNS-wrapped) event notification."""
        authenticate(authorization)
        parsed = parse_body(
            await read_body(request, MAX_BODY_BYTES, what="the notification"), source="webhook"
        )
        indexer.accept(parsed)
        summary = {
            "accepted": len(parsed.events),
            "ignored": parsed.ignored,
            "malformed": len(parsed.malformed),
            "reasons": [m.reason for m in parsed.malformed],
        }
        # All-bad posts get a 400 (they are dead-lettered all the same), so that
        # a misconfigured sender sees it; a partly good one is accepted.
        status = 400 if parsed.malformed and not parsed.events and not parsed.ignored else 202
        return JSONResponse(summary, status_code=status)

    @router.head("/s3", include_in_schema=False)
    def s3_events_probe() -> None:
        """Senders (MinIO) check that the endpoint is up before they enable it."""

    return router
