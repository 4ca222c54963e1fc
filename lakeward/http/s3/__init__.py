"""S3's REST API over the lake, at the server's one address beside Athena's.

A request goes to S3 when its SigV4 credential scope names the service ``s3``
(``…/us-east-1/s3/aws4_request``), whatever its path: ``S3Dispatch`` wraps the
server's application and sends those here, so bucket names never clash with the
server's own routes. Addressing is path-style (``/bucket/key``), as AWS SDKs use
it with a custom endpoint.

Every call is checked like any other lakeward call: the signature (sigv4.py),
then IAM with S3's actions on the lake's S3 ARNs (``s3:GetObject`` on
``<bucket>/<key>``, ``s3:ListBucket`` on the bucket with ``s3:prefix``), each
decision audited. Bodies are checked against the hash or chunk signatures and
checksums they declare (payload.py) before anything is stored, and stored with
``Storage.put``: atomic, so a reader never sees a torn object and a cut-off or
refused upload leaves nothing behind.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl, unquote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from lakeward.access import current_context, current_principal, current_request_id, current_source
from lakeward.access.control import AccessControl
from lakeward.config import Settings
from lakeward.http.s3.operations import Call, Operations
from lakeward.http.s3.sigv2 import authenticate_presigned_v2, is_presigned_v2
from lakeward.http.s3.xml import S3Error, error_document, s3_code
from lakeward.http.sigv4 import authenticate
from lakeward.storage import Storage, load_storage

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_S3_SCOPE = re.compile(rb"Credential=[^/,\s]+/\d{8}/[^/,\s]+/s3/aws4_request")
_log = logging.getLogger(__name__)


def _signs_a_url(param: str) -> bool:
    """A query parameter of a presigned URL's signature (of either version), not of the
    operation: version 2 carries the signed header values there too."""
    lower = param.lower()
    return lower.startswith("x-amz-") or lower in _PRESIGN_V2_PARAMS


_PRESIGN_V2_PARAMS = frozenset(
    {"awsaccesskeyid", "signature", "expires", "content-md5", "content-type"}
)


def signed_for_s3(scope: Scope) -> bool:
    """Whether an HTTP request is signed for S3 (header or query string)."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return bool(_S3_SCOPE.search(value))
    query = scope.get("query_string", b"")
    if b"X-Amz-Credential=" in query and b"%2Fs3%2Faws4_request" in query:
        return True
    # A presigned URL of signature version 2 (boto3's default for S3).
    return all(name in query for name in (b"AWSAccessKeyId=", b"Signature=", b"Expires="))


class S3Dispatch:
    """ASGI middleware: requests signed for S3 go to ``s3``, the rest to ``app``."""

    def __init__(self, app: ASGIApp, s3: ASGIApp) -> None:
        self.app = app
        self.s3 = s3

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and signed_for_s3(scope):
            await self.s3(scope, receive, send)
        else:
            await self.app(scope, receive, send)


class S3Endpoint:
    """The S3 API as an ASGI application."""

    def __init__(
        self, settings: Settings, access: AccessControl, storage: Storage | None = None
    ) -> None:
        self.access = access
        self.operations = Operations(settings, access, storage or load_storage(settings))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        request_id = uuid.uuid4().hex[:16].upper()
        raw_path = scope.get("raw_path") or request.url.path.encode()
        path = raw_path.decode("latin-1")
        try:
            response = await self._handle(request, path, request_id)
        except Exception as exc:  # every failure leaves as S3's XML error
            response = self._error(exc, request, unquote(path), request_id)
        response.headers["x-amz-request-id"] = request_id
        await response(scope, receive, send)

    async def _handle(self, request: Request, path: str, request_id: str) -> Response:
        headers = {name.lower(): value for name, value in request.headers.items()}
        query = request.scope.get("query_string", b"").decode("latin-1")
        presigned_v2 = is_presigned_v2(headers, query)
        presigned = presigned_v2 or (
            "authorization" not in headers and "X-Amz-Credential=" in query
        )
        if "x-amz-content-sha256" not in headers and not presigned:
            raise S3Error(
                "InvalidRequest", "Missing required header for this request: x-amz-content-sha256"
            )
        if presigned_v2:
            signed = await run_in_threadpool(
                authenticate_presigned_v2, request.method, path, query, headers, self.access
            )
        else:
            signed = await run_in_threadpool(
                authenticate, request.method, path, query, headers, self.access, service="s3"
            )
        if presigned:
            # A presigned URL signs no payload: what it uploads is taken as sent.
            headers.setdefault("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
        current_principal.set(signed.key_id)
        current_request_id.set(request_id)
        current_source.set("s3-api")
        current_context.set(
            {
                "aws:SourceIp": request.client.host if request.client else "",
                "aws:SecureTransport": request.url.scheme == "https",
                "aws:UserAgent": headers.get("user-agent", ""),
            }
        )
        bucket, _, key = unquote(path).lstrip("/").partition("/")
        params = dict(parse_qsl(query, keep_blank_values=True))
        if presigned:  # the signature's parameters are not the operation's
            params = {k: v for k, v in params.items() if not _signs_a_url(k)}
        call = Call(request, request.method, bucket, key, params, headers, signed)
        return await self.operations.dispatch(call)

    def _error(self, exc: Exception, request: Request, resource: str, request_id: str) -> Response:
        status, code, message = s3_code(exc)
        if status >= 500:
            _log.exception("S3 %s %s failed", request.method, resource)
        body = (
            b"" if request.method == "HEAD" else error_document(code, message, resource, request_id)
        )
        return Response(body, status_code=status, media_type="application/xml")
