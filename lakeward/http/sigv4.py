"""AWS Signature Version 4 verification of incoming requests (the Athena API's auth).

The expected signature is computed by botocore's own signer from the request as it
arrived, so lakeward agrees byte for byte with what every AWS SDK signs. Errors are
``AccessDenied`` with the sentences AWS answers with, so SDK users recognise them.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Protocol
from urllib.parse import parse_qsl, quote, unquote_plus

from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth, SigV4Auth
from botocore.awsrequest import AWSRequest, HTTPHeaders
from botocore.credentials import Credentials as BotoCredentials

from lakeward.errors import AccessDenied, TooManyRequests

SERVICE = "athena"
MAX_SKEW = timedelta(minutes=5)
MAX_PRESIGNED_SECONDS = 7 * 24 * 3600  # S3's limit on X-Amz-Expires
_PRESIGN_PARAMS = (
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Signature",
    "X-Amz-Date",
    "X-Amz-SignedHeaders",
    "X-Amz-Expires",
)
_AMZ_DATE = "%Y%m%dT%H%M%SZ"
_ALGORITHM = "AWS4-HMAC-SHA256"
_AUTH_PARAM = re.compile(r"\s*(Credential|SignedHeaders|Signature)=([^,\s]*)\s*(?:,|$)")
_SIGNATURE = re.compile(r"[0-9a-f]{64}")

MISSING_TOKEN = "Missing Authentication Token"
INVALID_TOKEN = "The security token included in the request is invalid."
SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. "
    "Check your AWS Secret Access Key and signing method. "
    "Consult the service documentation for details."
)


def json_signing_error(exc: Exception) -> str | None:
    """The name AWS's JSON services (Athena, Glue) give a request refused before its
    operation for its key or signature; None for every other error."""
    if not isinstance(exc, AccessDenied):
        return None
    if exc.message.startswith(MISSING_TOKEN):
        return "MissingAuthenticationTokenException"
    return {
        INVALID_TOKEN: "UnrecognizedClientException",
        SIGNATURE_MISMATCH: "InvalidSignatureException",
    }.get(exc.message)


class Credentials(Protocol):
    def secret_for(self, access_key_id: str, session_token: str | None = None) -> str | None:
        """The secret access key of ``access_key_id``, or None if there is no such key."""
        ...


class ReplayGuard:
    """Refuses a second arrival of the same signed mutating request.

    A signature is only accepted within ``MAX_SKEW`` of its request time, so it need
    only be remembered until then; memory is bounded by ``max_entries``. When full,
    new mutating requests are refused as throttled (SDKs retry them, re-signed) rather
    than forgetting signatures early, which would let a replay through.

    botocore re-signs each retry, but a retry sent within the same second as the failed
    attempt is byte-identical: the caller ``forget``s the signature of a request that
    failed (and so did nothing), and its retry is taken.
    """

    def __init__(self, window: timedelta = MAX_SKEW, max_entries: int = 100_000) -> None:
        self._window = window
        self._max_entries = max_entries
        self._expiries: list[tuple[datetime, str]] = []  # heap, soonest expiry first
        self._seen: set[str] = set()
        self._lock = threading.Lock()  # handlers run on a thread pool

    def check(self, signature: str, request_time: datetime, now: datetime) -> None:
        """Remember ``signature``; raise AccessDenied if it was seen within the window."""
        with self._lock:
            while self._expiries and self._expiries[0][0] < now:
                self._seen.discard(heapq.heappop(self._expiries)[1])
            if signature in self._seen:
                raise AccessDenied(
                    "This request has already been received (replayed signature); "
                    "sign each request anew."
                )
            if len(self._seen) >= self._max_entries:
                raise TooManyRequests("Too many signed requests in flight; retry shortly.")
            self._seen.add(signature)
            heapq.heappush(self._expiries, (request_time + self._window, signature))

    def forget(self, signature: str) -> None:
        """Take ``signature`` again: the request that carried it failed and did nothing."""
        with self._lock:
            self._seen.discard(signature)  # its expiry, left in the heap, discards nothing


def request_signature(headers: Mapping[str, str]) -> str:
    """The ``Signature`` of a request's ``Authorization`` header (checked already)."""
    return _parse_authorization(headers.get("authorization"))[5]


@dataclass(frozen=True)
class Signed:
    """A request whose SigV4 signature checked out: who signed it, and what a streaming
    upload's chunk signatures chain from (the seed signature and the signing scope)."""

    key_id: str
    secret: str
    timestamp: str
    scope: str  # <date>/<region>/<service>/aws4_request
    signature: str
    request_time: datetime

    def signing_key(self) -> bytes:
        key = ("AWS4" + self.secret).encode()
        for part in self.scope.split("/"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        return key


def verify(
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    body: bytes,
    credentials: Credentials,
    *,
    now: datetime | None = None,
    replay_guard: ReplayGuard | None = None,
    mutating: bool = False,
    service: str = SERVICE,
) -> str:
    """Check the request's SigV4 ``Authorization`` header; return the access key id.

    ``path`` is the raw (still percent-encoded) path and ``query`` the raw query
    string, as they came over the wire. Raises AccessDenied (TooManyRequests when
    the replay guard is full).
    """
    now = now or datetime.now(UTC)
    lower = {name.lower(): value for name, value in headers.items()}
    signed = authenticate(
        method, path, query, lower, credentials, service=service, now=now, body=body
    )
    # When X-Amz-Content-SHA256 is present botocore takes it as the payload hash without
    # looking at the body; a declared hash (or UNSIGNED-PAYLOAD) that is not the body's
    # would let a captured signature carry another body.
    declared = lower.get("x-amz-content-sha256")
    if declared is not None and declared != hashlib.sha256(body).hexdigest():
        raise AccessDenied(SIGNATURE_MISMATCH)
    # Only mutating requests are replay-checked: botocore (and so PyAthena) signs with
    # one-second resolution, so two GetQueryExecution polls in the same second are
    # byte-identical and both legitimate. A replayed read changes nothing and fetches
    # only what the captured request was allowed to fetch.
    if mutating and replay_guard is not None:
        replay_guard.check(signed.signature, signed.request_time, now)
    return signed.key_id


def authenticate(
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    credentials: Credentials,
    *,
    service: str,
    now: datetime | None = None,
    body: bytes = b"",
) -> Signed:
    """Check the signature of a request's head (method, path, query, headers).

    The payload is the caller's to check: S3 signs it by the hash it declares in
    ``X-Amz-Content-SHA256`` (a hex digest, ``UNSIGNED-PAYLOAD`` or a streaming mode whose
    chunks carry their own signatures), and its body may not have arrived yet. ``body``
    is only read where no hash is declared. ``headers`` must have lower-case names.
    """
    now = now or datetime.now(UTC)
    if "authorization" not in headers and "X-Amz-Credential=" in query:
        return _authenticate_presigned(method, path, query, headers, credentials, service, now)
    key_id, date, region, scoped, signed, given = _parse_authorization(headers.get("authorization"))
    request_time, timestamp = _request_time(headers)
    _check_scope(date, timestamp, scoped, service)
    _check_signed_headers(signed, headers)

    # Temporary credentials (sts:AssumeRole) sign with their session token beside them.
    secret = credentials.secret_for(key_id, headers.get("x-amz-security-token"))
    if secret is None:
        raise AccessDenied(INVALID_TOKEN)
    _check_clock(request_time, now)
    expected = _expected_signature(
        method, path, query, headers, body, signed, key_id, secret, region, timestamp, service
    )
    if not hmac.compare_digest(expected, given):
        raise AccessDenied(SIGNATURE_MISMATCH)
    scope = f"{date}/{region}/{service}/aws4_request"
    return Signed(key_id, secret, timestamp, scope, given, request_time)


def _authenticate_presigned(
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    credentials: Credentials,
    service: str,
    now: datetime,
) -> Signed:
    """A presigned URL: the signature and its scope travel in the query string
    (``X-Amz-Signature`` and friends), the payload is unsigned, and the URL is good for
    ``X-Amz-Expires`` seconds from ``X-Amz-Date``."""
    params = dict(parse_qsl(query, keep_blank_values=True))
    missing = [name for name in _PRESIGN_PARAMS if not params.get(name)]
    if missing:
        raise AccessDenied(
            "Query-string authentication version 4 requires the X-Amz-Algorithm, "
            "X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and "
            f"X-Amz-Expires parameters (missing: {', '.join(missing)})."
        )
    if params["X-Amz-Algorithm"] != _ALGORITHM:
        raise AccessDenied(f'X-Amz-Algorithm only supports "{_ALGORITHM}"')
    key_id, date, region, scoped = _parse_scope(params["X-Amz-Credential"])
    timestamp = params["X-Amz-Date"]
    try:
        request_time = datetime.strptime(timestamp, _AMZ_DATE).replace(tzinfo=UTC)
    except ValueError:
        raise AccessDenied(
            f"X-Amz-Date must be in the ISO8601 Long Format, not '{timestamp}'"
        ) from None
    expires = params["X-Amz-Expires"]
    if not expires.isdigit() or not 0 < int(expires) <= MAX_PRESIGNED_SECONDS:
        raise AccessDenied(
            f"X-Amz-Expires must be less than a week (in seconds) that is "
            f"{MAX_PRESIGNED_SECONDS}, and more than 0, not '{expires}'"
        )
    _check_scope(date, timestamp, scoped, service)
    signed = params["X-Amz-SignedHeaders"].split(";")
    _check_signed_headers(signed, headers)
    given = params["X-Amz-Signature"]
    if not _SIGNATURE.fullmatch(given):
        raise AccessDenied(SIGNATURE_MISMATCH)
    secret = credentials.secret_for(key_id, params.get("X-Amz-Security-Token"))
    if secret is None:
        raise AccessDenied(INVALID_TOKEN)
    if request_time > now + MAX_SKEW:
        raise AccessDenied("Request is not valid yet")
    if now > request_time + timedelta(seconds=int(expires)):
        raise AccessDenied("Request has expired")
    # Signed is everything in the query but the signature itself.
    unsigned = "&".join(
        pair for pair in query.split("&") if pair and not pair.startswith("X-Amz-Signature=")
    )
    expected = _expected_signature(
        method, path, unsigned, headers, b"", signed, key_id, secret, region, timestamp, service,
        presigned=True,
    )  # fmt: skip
    if not hmac.compare_digest(expected, given):
        raise AccessDenied(SIGNATURE_MISMATCH)
    scope = f"{date}/{region}/{service}/aws4_request"
    return Signed(key_id, secret, timestamp, scope, given, request_time)


def _check_scope(date: str, timestamp: str, scoped: str, service: str) -> None:
    """The credential scope's date is the request's, and its service the one answering."""
    if date != timestamp[:8]:
        raise AccessDenied(
            f"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date "
            f"from HTTP: '{date}' != '{timestamp[:8]}', from '{timestamp}'."
        )
    if scoped != service:
        raise AccessDenied(f"Credential should be scoped to correct service: '{service}'.")


def _parse_scope(credential: str) -> tuple[str, str, str, str]:
    """(key id, date, region, service) of a credential scope."""
    scope = credential.split("/")
    if len(scope) != 5 or not all(scope):
        raise AccessDenied(
            "Credential should be of the form <key id>/<date>/<region>/<service>/aws4_request,"
            f" not '{credential}'."
        )
    key_id, date, region, service, terminator = scope
    if terminator != "aws4_request":
        raise AccessDenied(
            f"Credential should be scoped with a valid terminator: 'aws4_request', "
            f"not '{terminator}'."
        )
    return key_id, date, region, service


def _parse_authorization(
    header: str | None,
) -> tuple[str, str, str, str, list[str], str]:
    """(key id, date, region, service, signed header names, signature) of the header."""
    if not header:
        raise AccessDenied(MISSING_TOKEN)
    algorithm, _, rest = header.strip().partition(" ")
    if algorithm != _ALGORITHM:
        raise AccessDenied(
            f"{MISSING_TOKEN}: the Authorization header must use {_ALGORITHM} "
            "(AWS Signature Version 4)."
        )
    params: dict[str, str] = {}
    position = 0
    while position < len(rest):
        match = _AUTH_PARAM.match(rest, position)
        if match is None or match.end() == position:
            raise AccessDenied(f"Authorization header is malformed: {header!r}.")
        params[match.group(1)] = match.group(2)
        position = match.end()
    missing = [p for p in ("Credential", "SignedHeaders", "Signature") if p not in params]
    if missing:
        raise AccessDenied(
            " ".join(f"Authorization header requires '{p}' parameter." for p in missing)
            + f" Authorization={header}"
        )
    key_id, date, region, service = _parse_scope(params["Credential"])
    if not _SIGNATURE.fullmatch(params["Signature"]):
        raise AccessDenied(SIGNATURE_MISMATCH)
    signed = params["SignedHeaders"].split(";")
    return key_id, date, region, service, signed, params["Signature"]


def _request_time(headers: Mapping[str, str]) -> tuple[datetime, str]:
    """The request's signing time, and its SigV4 timestamp string."""
    amz_date = headers.get("x-amz-date")
    http_date = headers.get("date")  # SigV4 allows the HTTP Date header instead
    if amz_date is None and http_date is None:
        raise AccessDenied(
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
        )
    try:
        if amz_date is not None:
            return datetime.strptime(amz_date, _AMZ_DATE).replace(tzinfo=UTC), amz_date
        when = parsedate_to_datetime(http_date or "")
    except (ValueError, TypeError):
        raise AccessDenied(
            f"Date must be in ISO-8601 'basic format'. Got '{amz_date or http_date}'. "
            "See http://en.wikipedia.org/wiki/ISO_8601"
        ) from None
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return when, when.strftime(_AMZ_DATE)


def _check_signed_headers(signed: list[str], headers: Mapping[str, str]) -> None:
    if signed != sorted(set(signed)) or any(name != name.lower() for name in signed):
        raise AccessDenied("SignedHeaders must be lower-case, sorted and unique.")
    if "host" not in signed:
        raise AccessDenied("'Host' must be a 'SignedHeader' in the AWS Authorization.")
    absent = [name for name in signed if name not in headers]
    if absent:
        raise AccessDenied(f"Signed header(s) not present in the request: {', '.join(absent)}.")
    # The operation travels in X-Amz-Target, outside the signed body: unsigned, a captured
    # GetQueryExecution could be resent as StopQueryExecution with the same body.
    if "x-amz-target" in headers and "x-amz-target" not in signed:
        raise AccessDenied("'X-Amz-Target' must be a 'SignedHeader' in the AWS Authorization.")


def _check_clock(request_time: datetime, now: datetime) -> None:
    fmt = _AMZ_DATE
    if request_time < now - MAX_SKEW:
        raise AccessDenied(
            f"Signature expired: {request_time.strftime(fmt)} is now earlier than "
            f"{(now - MAX_SKEW).strftime(fmt)} ({now.strftime(fmt)} - 5 min.)"
        )
    if request_time > now + MAX_SKEW:
        raise AccessDenied(
            f"Signature not yet current: {request_time.strftime(fmt)} is still later than "
            f"{(now + MAX_SKEW).strftime(fmt)} ({now.strftime(fmt)} + 5 min.)"
        )


def _expected_signature(
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    body: bytes,
    signed: list[str],
    key_id: str,
    secret: str,
    region: str,
    timestamp: str,
    service: str,
    presigned: bool = False,
) -> str:
    """The signature botocore would compute for this request at the request's own time
    (for a presigned URL, ``query`` is the URL's query without its signature)."""
    query = _canonical_query(query)
    url = f"http://{headers['host']}{path}" + (f"?{query}" if query else "")
    request = AWSRequest(
        method=method, url=url, headers={name: headers[name] for name in signed}, data=body
    )
    # S3 signs the path as sent (no normalizing) and the payload by its declared hash.
    signer_class = _AsPresignedS3 if presigned else _AsSignedS3 if service == "s3" else _AsSigned
    signer = signer_class(BotoCredentials(key_id, secret), service, region)
    # add_auth() stamps the *current* clock into context["timestamp"] (and rewrites the
    # date headers); every step below reads only context["timestamp"], so setting it to
    # the request's time reproduces the client's computation without patching botocore's
    # process-wide clock.
    request.context["timestamp"] = timestamp
    canonical = signer.canonical_request(request)
    result: str = signer.signature(signer.string_to_sign(request, canonical), request)
    return result


def _canonical_query(query: str) -> str:
    """The query string as SigV4 canonicalizes it: each name and value decoded, then
    percent-encoded but for ``A-Za-z0-9-_.~``. The AWS SDK for Java (Hadoop's s3a) sends a
    space as ``+`` on the wire and signs it as ``%20``; botocore sends what it signs."""

    def encoded(text: str) -> str:
        return quote(unquote_plus(text), safe="-_.~")

    pairs = (pair.partition("=") for pair in query.split("&") if pair)
    return "&".join(f"{encoded(name)}={encoded(value)}" for name, _, value in pairs)


class _AsSigned(SigV4Auth):  # type: ignore[misc]
    """botocore's signer, signing the headers the request has (the client's SignedHeaders)
    without leaving out those botocore never signs itself: the AWS SDK for Java signs
    ``User-Agent``, which botocore's list of headers to skip would drop."""

    def headers_to_sign(self, request: AWSRequest) -> HTTPHeaders:
        headers = HTTPHeaders()
        for name, value in request.headers.items():
            headers[name.lower()] = value
        return headers


class _AsSignedS3(_AsSigned, S3SigV4Auth):  # type: ignore[misc]
    pass


class _AsPresignedS3(_AsSigned, S3SigV4QueryAuth):  # type: ignore[misc]
    """A presigned URL's signer: S3's path as sent, the payload unsigned."""
