"""An object's metadata as S3 takes it from a write's headers and gives it back on a read.

S3 keeps, beside an object's bytes, the standard headers it was written with
(``Content-Type``, ``Content-Encoding``...) and the user's ``x-amz-meta-*`` headers (names
lower-cased, at most 2 KB in all). A GET or HEAD answers them, and its ``response-*``
query parameters (which presigned URLs use) override the standard ones for that answer.
"""

from __future__ import annotations

from collections.abc import Mapping

from lakeward.http.s3.xml import S3Error

STANDARD = ("Content-Type", "Content-Encoding", "Content-Language", "Content-Disposition",
            "Cache-Control", "Expires")  # fmt: skip
DEFAULT_CONTENT_TYPE = "binary/octet-stream"  # what S3 answers for an object written without
USER_PREFIX = "x-amz-meta-"
MAX_USER_BYTES = 2048


def from_request(headers: Mapping[str, str]) -> dict[str, str]:
    """The metadata a PutObject, CreateMultipartUpload or CopyObject (REPLACE) names."""
    found: dict[str, str] = {}
    for name in STANDARD:
        value = headers.get(name.lower())
        if name == "Content-Encoding" and value is not None:
            # aws-chunked says how this request's body is framed, not what the object is.
            codings = [c.strip() for c in value.split(",") if c.strip().lower() != "aws-chunked"]
            value = ", ".join(codings) or None
        if value is not None:
            found[name] = value
    user = {k.lower(): v for k, v in headers.items() if k.lower().startswith(USER_PREFIX)}
    size = sum(len(k.removeprefix(USER_PREFIX).encode()) + len(v.encode()) for k, v in user.items())
    if size > MAX_USER_BYTES:
        raise S3Error(
            "MetadataTooLarge",
            f"Your metadata headers exceed the maximum allowed metadata size: {size} bytes of "
            f"x-amz-meta-* names and values, at most {MAX_USER_BYTES}",
        )
    return {**found, **dict(sorted(user.items()))}


def response_headers(metadata: Mapping[str, str], params: Mapping[str, str]) -> dict[str, str]:
    """The headers a GET or HEAD answers for an object with ``metadata``."""
    headers = {"Content-Type": DEFAULT_CONTENT_TYPE, **metadata}
    for name in STANDARD:
        override = params.get(f"response-{name.lower()}")
        if override is not None:
            headers[name] = override
    return headers
