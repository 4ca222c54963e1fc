"""Authentication of lakeward's REST routes (``/erasure/...``, ``/events/...``).

A REST request is signed with AWS Signature V4 exactly like an Athena API call
(the same access keys, the credential scope's service ``athena``), so any AWS
SDK signer or ``curl --aws-sigv4 "aws:amz:us-east-1:athena"`` can call it.
``signed_request`` checks the signature over the raw path, query and body,
sets the request's principal and source for ``AccessControl.authorize``, and
returns the principal and the body read (never more than ``max_body_bytes``).
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from lakeward.access import current_context, current_principal, current_request_id, current_source
from lakeward.errors import Unauthenticated
from lakeward.http.body import DEFAULT_MAX_BODY_BYTES, read_body
from lakeward.http.sigv4 import MISSING_TOKEN, Credentials, ReplayGuard, verify


@dataclass(frozen=True)
class SignedRequest:
    principal: str  # the access key id that signed
    body: bytes


async def signed_request(
    request: Request,
    credentials: Credentials,
    *,
    source: str,
    request_id: str,
    replay_guard: ReplayGuard | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> SignedRequest:
    """Verify a REST request's SigV4 signature: ``Unauthenticated`` (401) when unsigned,
    ``AccessDenied`` (403) when the signature or key is wrong.

    Requests other than GET/HEAD are replay-checked when a guard is given.
    """
    if "authorization" not in request.headers:
        raise Unauthenticated(MISSING_TOKEN)
    body = await read_body(request, max_body_bytes)
    raw_path = request.scope.get("raw_path")
    # The client signed the path as it sent it, percent-encoding included.
    path = raw_path.decode("latin-1") if raw_path else request.url.path
    mutating = request.method not in ("GET", "HEAD")
    principal = await run_in_threadpool(
        verify,
        request.method,
        path,
        request.url.query,
        request.headers,
        body,
        credentials,
        replay_guard=replay_guard,
        mutating=mutating,
    )
    current_principal.set(principal)
    current_request_id.set(request_id)
    current_source.set(source)
    current_context.set(
        {
            "aws:SourceIp": request.client.host if request.client else "",
            "aws:SecureTransport": request.url.scheme == "https",
            "aws:UserAgent": request.headers.get("user-agent", ""),
        }
    )
    return SignedRequest(principal, body)
