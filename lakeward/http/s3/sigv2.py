"""Presigned URLs of AWS's older signature (version 2, query string): what boto3's
``generate_presigned_url`` makes by default for S3 when no signature version is set.

The URL carries ``AWSAccessKeyId``, ``Expires`` (a Unix time) and ``Signature`` (an
HMAC-SHA1 of the method, the Content-MD5 and Content-Type, the expiry, the ``x-amz-*``
values and the resource). The string to sign is built by botocore's own signer, so it
agrees with what clients sign.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlsplit

from botocore.auth import HmacV1QueryAuth
from botocore.awsrequest import HTTPHeaders
from botocore.credentials import Credentials as BotoCredentials

from lakeward.errors import AccessDenied
from lakeward.http.sigv4 import (
    INVALID_TOKEN,
    MAX_PRESIGNED_SECONDS,
    SIGNATURE_MISMATCH,
    Credentials,
    Signed,
)

_PARAMS = ("AWSAccessKeyId", "Signature", "Expires")


def is_presigned_v2(headers: Mapping[str, str], query: str) -> bool:
    return "authorization" not in headers and all(f"{name}=" in query for name in _PARAMS)


class _Expiring(HmacV1QueryAuth):  # type: ignore[misc]
    """botocore's query signer at the URL's own expiry instead of the clock's."""

    def __init__(self, credentials: BotoCredentials, expires: str) -> None:
        super().__init__(credentials)
        self._expires_at = expires

    def _get_date(self) -> str:
        return self._expires_at


def authenticate_presigned_v2(
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    credentials: Credentials,
    now: float | None = None,
) -> Signed:
    """Check a version-2 presigned URL; ``headers`` have lower-case names."""
    params = dict(parse_qsl(query, keep_blank_values=True))
    key_id, given, expires = (params.get(name, "") for name in _PARAMS)
    if not expires.isdigit():
        raise AccessDenied(f"Expires must be a number of seconds since the epoch, not '{expires}'")
    now = time.time() if now is None else now
    if int(expires) < now:
        raise AccessDenied("Request has expired")
    if int(expires) > now + MAX_PRESIGNED_SECONDS:
        raise AccessDenied(
            f"Expires must be less than a week ({MAX_PRESIGNED_SECONDS} seconds) in the future"
        )
    token = params.get("x-amz-security-token") or headers.get("x-amz-security-token")
    secret = credentials.secret_for(key_id, token)
    if secret is None:
        raise AccessDenied(INVALID_TOKEN)
    # What was signed: the Content-MD5, Content-Type and x-amz-* values, from the query
    # where the signer put them there, else as the request sends them.
    signed = HTTPHeaders()
    for name, value in headers.items():
        if name in ("content-md5", "content-type") or name.startswith("x-amz-"):
            signed[name] = value
    for name, value in params.items():
        lower = name.lower()
        if lower in ("content-md5", "content-type") or lower.startswith("x-amz-"):
            del signed[lower]
            signed[lower] = value
    signer = _Expiring(BotoCredentials(key_id, secret), expires)
    split = urlsplit(f"http://{headers.get('host', 'localhost')}{path}?{query}")
    expected = signer.sign_string(signer.canonical_string(method, split, signed))
    if not hmac.compare_digest(expected.encode(), given.encode()):
        raise AccessDenied(SIGNATURE_MISMATCH)
    when = datetime.fromtimestamp(now, UTC)
    return Signed(key_id, secret, when.strftime("%Y%m%dT%H%M%SZ"), "", given, when)
