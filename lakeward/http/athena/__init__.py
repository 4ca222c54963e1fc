"""Amazon Athena's JSON 1.1 API over the SQL service, so boto3, PyAthena and JDBC/ODBC
drivers talk to lakeward unchanged.

Every operation is ``POST /`` with ``X-Amz-Target: AmazonAthena.<Operation>`` and a
SigV4 signature. Requests are checked against Athena's own model as botocore ships it
(``athena/2017-05-18/service-2.json``: types, required members, lengths, ranges, enums,
patterns); a handler then calls ``SqlApi`` and renames the records into Athena's
response shapes. Errors go back as ``{"__type": ..., "Message": ...}`` so botocore
raises its own exception classes.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from lakeward.access import (
    current_context,
    current_principal,
    current_request_id,
    current_source,
)
from lakeward.errors import (
    AccessDenied,
    InvalidRequest,
    LakewardError,
    ResourceNotFound,
    TableNotFound,
    TooManyRequests,
)
from lakeward.http.athena.operations import OPERATIONS
from lakeward.http.athena.validation import checked, model
from lakeward.http.body import DEFAULT_MAX_BODY_BYTES, read_body
from lakeward.http.sigv4 import Credentials, ReplayGuard, verify
from lakeward.query.api import SqlApi
from lakeward.query.model import JsonDict

CONTENT_TYPE = "application/x-amz-json-1.1"
_TARGET_PREFIX = "AmazonAthena."
_MUTATING = ("Start", "Stop", "Create", "Delete")
_log = logging.getLogger(__name__)


def athena_router(
    api: SqlApi, credentials: Credentials, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
) -> APIRouter:
    """The Athena API as ``POST /``; include it at the app's root, where SDKs post."""
    router = APIRouter()
    guard = ReplayGuard()
    model()  # load the model now rather than on the first request

    @router.post("/", include_in_schema=False)
    async def athena(request: Request) -> Response:
        request_id = str(uuid.uuid4())
        target = request.headers.get("x-amz-target", "")
        try:
            body = await read_body(request, max_body_bytes)
            # Condition keys policies may test (aws:SourceIp, ...); read by the authorizer.
            current_context.set(
                {
                    "aws:SourceIp": request.client.host if request.client else "",
                    "aws:SecureTransport": request.url.scheme == "https",
                    "aws:UserAgent": request.headers.get("user-agent", ""),
                }
            )
            raw_path = request.scope.get("raw_path")
            # The client signed the path as it sent it, percent-encoding included.
            path = raw_path.decode("latin-1") if raw_path else request.url.path
            result = await run_in_threadpool(
                _handle,
                api,
                credentials,
                guard,
                request.headers,
                path,
                request.url.query,
                body,
                request_id,
            )
            return _respond(200, result, request_id)
        except Exception as exc:  # every failure must leave as an Athena-shaped error
            return _error_response(exc, target, request_id)

    return router


def _handle(
    api: SqlApi,
    credentials: Credentials,
    guard: ReplayGuard,
    headers: Mapping[str, str],
    path: str,
    query: str,
    body: bytes,
    request_id: str,
) -> JsonDict | bytes:
    target = headers.get("x-amz-target", "")
    operation = target.removeprefix(_TARGET_PREFIX) if target.startswith(_TARGET_PREFIX) else ""
    mutating = operation.startswith(_MUTATING)
    principal = verify(
        "POST", path, query, headers, body, credentials, replay_guard=guard, mutating=mutating
    )
    # This call runs in its own copy of the context: what is set here is this request's.
    current_principal.set(principal)
    current_request_id.set(request_id)
    current_source.set("athena-api")
    handler = OPERATIONS.get(operation)
    if handler is None:
        raise InvalidRequest(f"Unknown operation {target!r}: expected AmazonAthena.<Operation>")
    try:
        data = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"Could not parse request body into JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidRequest("Could not parse request body into JSON: expected an object")
    shape = model().operation_model(operation).input_shape
    return handler(api, checked(shape, data, ""), principal)


def _respond(status: int, body: JsonDict | bytes, request_id: str) -> Response:
    # Result pages come encoded already (rendered when the result was written).
    content = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":"))
    headers = {"x-amzn-RequestId": request_id}
    return Response(content, status_code=status, media_type=CONTENT_TYPE, headers=headers)


_CLIENT_ERRORS: list[tuple[type[LakewardError], str]] = [
    (InvalidRequest, "InvalidRequestException"),
    (ResourceNotFound, "ResourceNotFoundException"),
    (TableNotFound, "ResourceNotFoundException"),
    (AccessDenied, "AccessDeniedException"),
    (TooManyRequests, "TooManyRequestsException"),
]


def _error_response(exc: Exception, target: str, request_id: str) -> Response:
    """Athena's error shape; botocore picks the exception class from ``__type``."""
    for error, kind in _CLIENT_ERRORS:
        if isinstance(exc, error):
            body = {"__type": kind, "Message": exc.message}
            if isinstance(exc, InvalidRequest):
                body["AthenaErrorCode"] = getattr(exc, "athena_error_code", "INVALID_INPUT")
            return _respond(400, body, request_id)
    _log.error("Athena API %r failed (request %s)", target, request_id, exc_info=exc)
    # LakewardError messages are written for users; anything else may leak internals.
    message = exc.message if isinstance(exc, LakewardError) else "Internal server error"
    return _respond(500, {"__type": "InternalServerException", "Message": message}, request_id)
