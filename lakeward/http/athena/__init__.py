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
from collections.abc import Awaitable, Callable, Mapping

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from lakeward.access import (
    current_context,
    current_principal,
    current_request_id,
    current_source,
)
from lakeward.errors import (
    AccessDenied,
    ExpiredToken,
    InvalidRequest,
    LakewardError,
    MetadataNotFound,
    ResourceNotFound,
    TableNotFound,
    TooManyRequests,
    Unavailable,
)
from lakeward.glue import GlueService
from lakeward.http.athena.operations import OPERATIONS
from lakeward.http.athena.validation import checked, model
from lakeward.http.body import DEFAULT_MAX_BODY_BYTES, read_body
from lakeward.http.glue import TARGET_PREFIX as GLUE_PREFIX
from lakeward.http.glue import glue_error, handle_glue
from lakeward.http.sigv4 import (
    Credentials,
    ReplayGuard,
    json_signing_error,
    request_signature,
    verify,
)
from lakeward.http.sts import handle_sts, sts_error
from lakeward.query.api import SqlApi
from lakeward.query.model import JsonDict

CONTENT_TYPE = "application/x-amz-json-1.1"
_TARGET_PREFIX = "AmazonAthena."
_MUTATING = ("Start", "Stop", "Create", "Delete")
_log = logging.getLogger(__name__)


def athena_router(
    api: SqlApi,
    credentials: Credentials,
    glue: GlueService | None = None,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> APIRouter:
    """The Athena API as ``POST /``; include it at the app's root, where SDKs post.

    Glue's JSON API (``AWSGlue.*``) and STS's query API (a form with ``Action``) post to
    the same ``/``: the target header, or the form, says which service a request is for,
    and its signature must be scoped to that service.
    """
    router = APIRouter()
    endpoint = athena_endpoint(api, credentials, glue, max_body_bytes=max_body_bytes)
    router.add_api_route("/", endpoint, methods=["POST"], include_in_schema=False)
    return router


class AwsApiDispatch:
    """ASGI middleware: ``POST /`` (Athena, Glue, STS) goes straight to ``endpoint``.

    Those calls are most of a stack's traffic, and each one is answered whole by the
    endpoint (its errors in its service's shape): the application's exception handlers and
    router, tried route by route, would only add their cost.
    """

    def __init__(self, app: ASGIApp, endpoint: Callable[[Request], Awaitable[Response]]) -> None:
        self.app = app
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == "/":
            response = await self.endpoint(Request(scope, receive))
            await response(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def athena_endpoint(
    api: SqlApi,
    credentials: Credentials,
    glue: GlueService | None = None,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> Callable[[Request], Awaitable[Response]]:
    """What answers ``POST /``: Athena's operations, Glue's and STS's (``athena_router``)."""
    guard = ReplayGuard()
    model()  # load the models now rather than on the first request
    if glue is not None:
        model("glue")

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
            service = _service_of(request.headers)
            if service == "glue" and glue is not None:
                answer = await run_in_threadpool(
                    _handle_glue, glue, credentials, request.headers, path, request.url.query,
                    body, request_id,
                )  # fmt: skip
                return _respond(200, answer, request_id)
            if service == "sts":
                xml = await run_in_threadpool(
                    _handle_sts, credentials, request.headers, path, request.url.query, body,
                    request_id,
                )  # fmt: skip
                return Response(
                    xml, media_type="text/xml", headers={"x-amzn-RequestId": request_id}
                )
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
        except Exception as exc:  # every failure must leave in its service's error shape
            service = _service_of(request.headers)
            if service == "glue":
                status, content = glue_error(exc, target.removeprefix(GLUE_PREFIX), request_id)
                return _respond(status, content, request_id)
            if service == "sts":
                status, xml = sts_error(exc, request_id)
                return Response(xml, status_code=status, media_type="text/xml")
            return _error_response(exc, target, request_id)

    return athena


def _service_of(headers: Mapping[str, str]) -> str:
    """Which AWS service a request posted to ``/`` is for."""
    target = headers.get("x-amz-target", "")
    if target.startswith(GLUE_PREFIX):
        return "glue"
    content_type = headers.get("content-type", "")
    if not target and content_type.startswith("application/x-www-form-urlencoded"):
        return "sts"
    return "athena"


def _signed_in(
    service: str,
    credentials: Credentials,
    headers: Mapping[str, str],
    path: str,
    query: str,
    body: bytes,
    request_id: str,
    source: str,
) -> str:
    principal = verify("POST", path, query, headers, body, credentials, service=service)
    current_principal.set(principal)
    current_request_id.set(request_id)
    current_source.set(source)
    return principal


def _handle_glue(
    glue: GlueService,
    credentials: Credentials,
    headers: Mapping[str, str],
    path: str,
    query: str,
    body: bytes,
    request_id: str,
) -> JsonDict:
    _signed_in("glue", credentials, headers, path, query, body, request_id, "glue-api")
    operation = headers.get("x-amz-target", "").removeprefix(GLUE_PREFIX)
    return handle_glue(glue, operation, body)


def _handle_sts(
    credentials: Credentials,
    headers: Mapping[str, str],
    path: str,
    query: str,
    body: bytes,
    request_id: str,
) -> bytes:
    principal = _signed_in("sts", credentials, headers, path, query, body, request_id, "sts-api")
    return handle_sts(credentials, principal, body, request_id)


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
    # A replay of a call with a ClientRequestToken is the same call (its token's answer),
    # as a client retrying one whose answer was lost expects (botocore sets one).
    data = _parsed(body)
    token = isinstance(data, dict) and bool(data.get("ClientRequestToken"))
    mutating = operation.startswith(_MUTATING) and not token
    principal = verify(
        "POST", path, query, headers, body, credentials, replay_guard=guard, mutating=mutating
    )
    try:
        return _operate(api, operation, target, data, principal, request_id)
    except Exception:
        if mutating:  # it did nothing: a retry signed in the same second is no replay
            guard.forget(request_signature(headers))
        raise


def _parsed(body: bytes) -> JsonDict | InvalidRequest:
    """The body's JSON object, or the refusal to raise once the signature is checked."""
    try:
        data = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        return InvalidRequest(f"Could not parse request body into JSON: {exc}")
    if not isinstance(data, dict):
        return InvalidRequest("Could not parse request body into JSON: expected an object")
    return data


def _operate(
    api: SqlApi,
    operation: str,
    target: str,
    data: JsonDict | InvalidRequest,
    principal: str,
    request_id: str,
) -> JsonDict | bytes:
    # This call runs in its own copy of the context: what is set here is this request's.
    current_principal.set(principal)
    current_request_id.set(request_id)
    current_source.set("athena-api")
    handler = OPERATIONS.get(operation)
    if handler is None:
        raise InvalidRequest(f"Unknown operation {target!r}: expected AmazonAthena.<Operation>")
    if isinstance(data, InvalidRequest):
        raise data
    shape = model().operation_model(operation).input_shape
    return handler(api, checked(shape, data, ""), principal)


def _respond(status: int, body: JsonDict | bytes, request_id: str) -> Response:
    # Result pages come encoded already (rendered when the result was written).
    content = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":"))
    headers = {"x-amzn-RequestId": request_id}
    return Response(content, status_code=status, media_type=CONTENT_TYPE, headers=headers)


_CLIENT_ERRORS: list[tuple[type[LakewardError], str]] = [
    (InvalidRequest, "InvalidRequestException"),
    (MetadataNotFound, "MetadataException"),
    (ResourceNotFound, "ResourceNotFoundException"),
    (TableNotFound, "ResourceNotFoundException"),
    (ExpiredToken, "ExpiredTokenException"),
    (AccessDenied, "AccessDeniedException"),
    (TooManyRequests, "TooManyRequestsException"),
]


def _error_response(exc: Exception, target: str, request_id: str) -> Response:
    """Athena's error shape; botocore picks the exception class from ``__type``."""
    signing = json_signing_error(exc)
    if signing is not None:
        return _respond(400, {"__type": signing, "Message": exc.message}, request_id)  # type: ignore[attr-defined]
    for error, kind in _CLIENT_ERRORS:
        if isinstance(exc, error):
            body = {"__type": kind, "Message": exc.message}
            if isinstance(exc, InvalidRequest):
                body["AthenaErrorCode"] = getattr(exc, "athena_error_code", "INVALID_INPUT")
            return _respond(400, body, request_id)
    if isinstance(exc, Unavailable):  # passing (a full disk, a restart): the client retries
        _log.warning("Athena API %r answered 500 (request %s): %s", target, request_id, exc)
    else:
        _log.error("Athena API %r failed (request %s)", target, request_id, exc_info=exc)
    # LakewardError messages are written for users; anything else may leak internals.
    message = exc.message if isinstance(exc, LakewardError) else "Internal server error"
    return _respond(500, {"__type": "InternalServerException", "Message": message}, request_id)
