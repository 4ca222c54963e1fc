"""``POST /events/s3``: S3 and MinIO event notifications, for the erasure index.

Authenticated with the stack's webhook token (``lakeward erasure index
webhook`` prints it); bodies over 1 MiB are refused before they are read
whole. The indexer that consumes the events runs in the server process: it is
started and stopped with the application.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse

from lakeward.access.control import AccessControl
from lakeward.erasure.realtime import RealtimeIndexer, parse_body
from lakeward.erasure.realtime.webhook import MAX_BODY_BYTES, token_matches, webhook_token
from lakeward.errors import Unauthenticated
from lakeward.http.body import read_body

TOKEN_TTL = 10.0
"""Seconds the server keeps the webhook token before reading it again."""


def events_router(access: AccessControl, indexer: RealtimeIndexer | None = None) -> APIRouter:
    indexer = indexer or RealtimeIndexer.for_settings(access.settings)
    router = APIRouter(prefix="/events", tags=["erasure"])
    router.add_event_handler("startup", indexer.start)
    router.add_event_handler("shutdown", indexer.stop)
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
