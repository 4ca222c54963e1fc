"""S3's XML: the documents the endpoint answers with, its errors, and the few it reads.

Errors leave as ``<Error><Code>…</Code><Message>…</Message>…</Error>`` with S3's status
codes, so that every S3 client raises the exception it knows (``NoSuchKey``,
``AccessDenied``...). lakeward's own errors are given S3's code that means the same.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable
from datetime import datetime
from xml.sax.saxutils import escape

from lakeward.errors import (
    AccessDenied,
    ExpiredToken,
    InvalidKey,
    InvalidRequest,
    LakewardError,
    ObjectNotFound,
    PayloadTooLarge,
    PreconditionFailed,
    StorageError,
    TooManyRequests,
    Unavailable,
)
from lakeward.http.sigv4 import INVALID_TOKEN, MISSING_TOKEN, SIGNATURE_MISMATCH
from lakeward.storage.multipart import UploadError

NAMESPACE = "http://s3.amazonaws.com/doc/2006-03-01/"
_HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n'


class S3Error(LakewardError):
    """An error with S3's own code and status."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.http_status = status


def no_such_bucket(bucket: str) -> S3Error:
    return S3Error("NoSuchBucket", f"The specified bucket does not exist: {bucket}", 404)


def s3_code(exc: Exception) -> tuple[int, str, str]:
    """(status, code, message) of any failure, in S3's terms; no internals for the unknown."""
    if isinstance(exc, S3Error | UploadError):
        return exc.http_status, exc.code, exc.message
    if isinstance(exc, ObjectNotFound):
        return 404, "NoSuchKey", "The specified key does not exist."
    if isinstance(exc, InvalidKey):
        return 400, "InvalidArgument", exc.message
    if isinstance(exc, PreconditionFailed):
        return 412, "PreconditionFailed", exc.message
    if isinstance(exc, ExpiredToken):
        return 400, "ExpiredToken", exc.message
    if isinstance(exc, AccessDenied):
        message = exc.message
        if message == SIGNATURE_MISMATCH:
            return 403, "SignatureDoesNotMatch", message
        if message == INVALID_TOKEN:
            return (
                403,
                "InvalidAccessKeyId",
                ("The AWS Access Key Id you provided does not exist in our records."),
            )
        if message.startswith(MISSING_TOKEN):
            return 403, "AccessDenied", message
        if message.startswith("Signature expired") or message.startswith("Signature not yet"):
            return 403, "RequestTimeTooSkewed", message
        return 403, "AccessDenied", message
    if isinstance(exc, PayloadTooLarge):
        return 400, "EntityTooLarge", exc.message
    if isinstance(exc, InvalidRequest):
        return 400, "InvalidRequest", exc.message
    if isinstance(exc, TooManyRequests):
        return 503, "SlowDown", exc.message
    if isinstance(exc, Unavailable):
        return 503, "ServiceUnavailable", exc.message
    if isinstance(exc, StorageError):
        return 500, "InternalError", exc.message
    if isinstance(exc, LakewardError):
        return exc.http_status, "InternalError", exc.message
    return 500, "InternalError", "We encountered an internal error. Please try again."


def error_document(code: str, message: str, resource: str, request_id: str) -> bytes:
    return document(
        "Error",
        [("Code", code), ("Message", message), ("Resource", resource), ("RequestId", request_id)],
        namespace=False,
    )


Value = str | int | bool | datetime | None
Field = tuple[str, "Value | list[Field]"]


def timestamp(when: datetime) -> str:
    """S3's time in XML: ISO 8601 in UTC with milliseconds."""
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def _text(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return timestamp(value)
    return escape("" if value is None else str(value))


def _render(fields: Iterable[Field]) -> str:
    parts = []
    for name, value in fields:
        inner = _render(value) if isinstance(value, list) else _text(value)
        parts.append(f"<{name}>{inner}</{name}>")
    return "".join(parts)


def document(
    root: str, fields: Iterable[Field], *, namespace: bool = True, text: str = ""
) -> bytes:
    """``<root>`` holding ``fields`` in order (a list value nests, a name may repeat), or
    ``text``."""
    xmlns = f' xmlns="{NAMESPACE}"' if namespace else ""
    return (_HEAD + f"<{root}{xmlns}>{_text(text)}{_render(fields)}</{root}>").encode()


def parse(body: bytes, root: str) -> ElementTree.Element:
    """A request's XML document, its namespace dropped; MalformedXML if it is not one."""
    try:
        element = ElementTree.fromstring(body)
    except ElementTree.ParseError as exc:
        raise S3Error(
            "MalformedXML",
            f"The XML you provided was not well-formed or did not validate: {exc}",
        ) from None
    for node in element.iter():
        node.tag = node.tag.rpartition("}")[2]
    if element.tag != root:
        raise S3Error(
            "MalformedXML", f"The XML you provided has <{element.tag}> where <{root}> belongs"
        )
    return element
