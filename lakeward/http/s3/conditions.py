"""A GET's conditions and byte range, answered as S3 answers them: ``If-Match``,
``If-None-Match``, ``If-Modified-Since``, ``If-Unmodified-Since`` and one ``bytes=`` range."""

from __future__ import annotations

from datetime import datetime
from email.utils import parsedate_to_datetime

from lakeward.errors import PreconditionFailed
from lakeward.http.s3.xml import S3Error
from lakeward.storage import ObjectInfo


def etag_header(value: str) -> str:
    return f'"{value}"'


def conditional(headers: dict[str, str], info: ObjectInfo) -> tuple[int, int, int]:
    """(status, first byte, length) of a GET's answer after its conditions and range."""
    etag = etag_header(info.etag)
    modified = info.last_modified.replace(microsecond=0)
    match = headers.get("if-match")
    none_match = headers.get("if-none-match")
    if match is not None and match.strip() not in ("*", etag) and match.strip('"') != info.etag:
        raise PreconditionFailed("At least one of the pre-conditions you specified did not hold")
    since = _date(headers.get("if-unmodified-since"))
    if match is None and since is not None and modified > since:
        raise PreconditionFailed("At least one of the pre-conditions you specified did not hold")
    if none_match is not None and (
        none_match.strip() in ("*", etag) or none_match.strip('"') == info.etag
    ):
        return 304, 0, 0
    since = _date(headers.get("if-modified-since"))
    if none_match is None and since is not None and modified <= since:
        return 304, 0, 0
    wanted = headers.get("range")
    if not wanted:
        return 200, 0, info.size
    span = _range(wanted, info.size)
    if span is None:
        return 200, 0, info.size
    return 206, span[0], span[1]


def _date(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None


def _range(text: str, size: int) -> tuple[int, int] | None:
    """(start, length) of a ``bytes=`` range; None to send it all (a form S3 ignores)."""
    unit, _, spec = text.partition("=")
    if unit.strip() != "bytes" or "," in spec:
        return None
    first, dash, last = spec.strip().partition("-")
    if not dash or not (first.isdigit() or last.isdigit()):
        return None
    if not first:  # the last N bytes
        length = min(int(last), size)
        if length == 0:
            raise _invalid_range(size)
        return size - length, length
    start = int(first)
    if start >= size:
        raise _invalid_range(size)
    end = min(int(last), size - 1) if last.isdigit() else size - 1
    if end < start:
        return None
    return start, end - start + 1


def _invalid_range(size: int) -> S3Error:
    return S3Error(
        "InvalidRange",
        f"The requested range is not satisfiable (the object has {size} bytes)",
        416,
    )
