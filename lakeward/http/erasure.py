"""The erasure REST API: ``GET /erasure/users/{user_id}`` (find).

Requests are signed with SigV4 (``lakeward.http.rest``) and authorized per
data subject as ``erasure:Find`` on ``arn:lakeward:erasure:::user/<id>``.
Errors have the server's one error shape (``{"error": {"type", "message"}}``).
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from lakeward.erasure.service import ErasureIndexService
from lakeward.erasure.shapes import findings_json
from lakeward.http.rest import signed_request
from lakeward.http.sigv4 import Credentials


def erasure_router(service: ErasureIndexService, credentials: Credentials) -> APIRouter:
    router = APIRouter(prefix="/erasure", tags=["erasure"])

    @router.get("/users/{user_id:path}")
    async def find_user(user_id: str, request: Request) -> dict[str, Any]:
        """Every location (object URIs, ``database.table.column``) holding a user's data."""
        # ``:path`` so that an id containing '/' (data, never a path) still reaches here.
        await signed_request(
            request, credentials, source="erasure-api", request_id=str(uuid.uuid4())
        )
        found = await run_in_threadpool(service.find, [user_id])
        return findings_json(found[0])

    return router
