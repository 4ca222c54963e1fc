"""An upload's body as S3 receives it: checked against what its signature declares.

``X-Amz-Content-SHA256`` says how the payload is signed:

- a hex SHA-256 of the body, checked once the body has arrived;
- ``UNSIGNED-PAYLOAD``: not signed (the transport and any checksum header vouch for it);
- ``STREAMING-AWS4-HMAC-SHA256-PAYLOAD``: ``Content-Encoding: aws-chunked``, each chunk
  signed in a chain that starts at the request's own signature;
- ``STREAMING-UNSIGNED-PAYLOAD-TRAILER`` and ``STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER``:
  the same chunks (unsigned, or signed), then trailing headers with the body's checksum
  (``x-amz-checksum-crc32`` and the like), themselves signed in the second form.

A checksum sent as a header (``x-amz-checksum-*``, ``Content-MD5``) is checked too. Whatever
fails leaves nothing stored: the caller stores the decoded body only when this returns.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import BinaryIO

from awscrt import checksums

from lakeward.errors import AccessDenied, InvalidRequest
from lakeward.http.s3.xml import S3Error
from lakeward.http.sigv4 import SIGNATURE_MISMATCH, Signed

UNSIGNED = "UNSIGNED-PAYLOAD"
STREAMING_SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
STREAMING_SIGNED_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
STREAMING_UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
STREAMING = (STREAMING_SIGNED, STREAMING_SIGNED_TRAILER, STREAMING_UNSIGNED_TRAILER)
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_COPY = 1024 * 1024
_MAX_LINE = 4096


def _bad_digest(message: str) -> S3Error:
    """The body is not the one its checksum or hash describes."""
    return S3Error("BadDigest", message)


class _Crc32:
    name = "crc32"

    def __init__(self) -> None:
        self.value = 0

    def update(self, data: bytes) -> None:
        self.value = zlib.crc32(data, self.value)

    def digest(self) -> bytes:
        return self.value.to_bytes(4, "big")


class _Crt:
    """CRC32C and CRC64NVME, computed by the AWS Common Runtime as the SDKs do."""

    def __init__(self, name: str, width: int) -> None:
        self.name = name
        self.width = width
        self.value = 0

    def update(self, data: bytes) -> None:
        compute = checksums.crc32c if self.name == "crc32c" else checksums.crc64nvme
        self.value = compute(data, self.value)

    def digest(self) -> bytes:
        return self.value.to_bytes(self.width, "big")


def _hashlib(name: str) -> Callable[[], object]:
    return lambda: hashlib.new(name)


# x-amz-checksum-<name>: the checksums S3 takes (pyarrow sends CRC64NVME, boto3 CRC32).
_CHECKSUMS: dict[str, Callable[[], object]] = {
    "crc32": _Crc32,
    "crc32c": lambda: _Crt("crc32c", 4),
    "crc64nvme": lambda: _Crt("crc64nvme", 8),
    "sha1": _hashlib("sha1"),
    "sha256": _hashlib("sha256"),
}


@dataclass
class Decoded:
    """The stored body: a file positioned at its start, its size and MD5 (hex)."""

    file: BinaryIO
    size: int
    md5: str


def checksum_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The ``x-amz-checksum-*`` values a request sends as headers, by algorithm name."""
    found = {}
    for name, value in headers.items():
        if name.startswith("x-amz-checksum-") and name != "x-amz-checksum-type":
            found[name.removeprefix("x-amz-checksum-")] = value
    return found


def decode(
    raw: BinaryIO,
    out: BinaryIO,
    headers: Mapping[str, str],
    signed: Signed,
) -> Decoded:
    """Check ``raw`` (the body as it came); the object's bytes are ``raw`` itself for a plain
    body, else the chunks' data, written to ``out``.

    ``headers`` have lower-case names. Raises AccessDenied (a chunk signature that does not
    match), S3Error BadDigest (a hash or checksum that does not), InvalidRequest (a
    malformed body).
    """
    declared = headers.get("x-amz-content-sha256", "")
    sums = {name: _checker(name) for name in checksum_headers(headers)}
    md5 = hashlib.md5(usedforsecurity=False)
    sha256 = hashlib.sha256()
    size = 0

    # A plain body is the object's bytes as it came: checked where it is, not copied.
    chunked = declared in STREAMING

    def take(data: bytes) -> None:
        nonlocal size
        size += len(data)
        md5.update(data)
        sha256.update(data)
        for checker in sums.values():
            checker.update(data)  # type: ignore[attr-defined]
        if chunked:
            out.write(data)

    trailers: dict[str, str] = {}
    if chunked:
        trailers = _dechunk(raw, take, declared, signed)
        _check_length(headers.get("x-amz-decoded-content-length"), size)
        for name in trailers:
            if name.startswith("x-amz-checksum-"):
                algorithm = name.removeprefix("x-amz-checksum-")
                sums.setdefault(algorithm, _checker(algorithm))
        # The trailer's checksum was not known while the chunks went by: read them again.
        late = [a for a in sums if a not in checksum_headers(headers)]
        if late:
            out.seek(0)
            while chunk := out.read(_COPY):
                for algorithm in late:
                    sums[algorithm].update(chunk)  # type: ignore[attr-defined]
    else:
        while chunk := raw.read(_COPY):
            take(chunk)
        if declared not in (UNSIGNED, "") and declared != sha256.hexdigest():
            raise S3Error(
                "XAmzContentSHA256Mismatch",
                "The provided 'x-amz-content-sha256' header does not match what was computed.",
            )
    expected = {**checksum_headers(headers), **_checksum_trailers(trailers)}
    for algorithm, checker in sums.items():
        given = expected.get(algorithm, "")
        actual = base64.b64encode(checker.digest()).decode()  # type: ignore[attr-defined]
        if given != actual:
            raise _bad_digest(
                f"The {algorithm.upper()} you specified did not match the calculated checksum."
            )
    content_md5 = headers.get("content-md5")
    if content_md5 is not None and content_md5 != base64.b64encode(md5.digest()).decode():
        raise _bad_digest("The Content-MD5 you specified did not match what we received.")
    stored = out if chunked else raw
    stored.flush()
    stored.seek(0)
    return Decoded(stored, size, md5.hexdigest())


def _checker(algorithm: str) -> object:
    factory = _CHECKSUMS.get(algorithm)
    if factory is None:
        raise InvalidRequest(
            f"the checksum algorithm {algorithm.upper()} is not supported by lakeward's S3 "
            f"endpoint (it checks {', '.join(a.upper() for a in _CHECKSUMS)}); "
            "send one of those, or none"
        )
    return factory()


def _checksum_trailers(trailers: Mapping[str, str]) -> dict[str, str]:
    return {
        k.removeprefix("x-amz-checksum-"): v
        for k, v in trailers.items()
        if k.startswith("x-amz-checksum-")
    }


def _check_length(declared: str | None, size: int) -> None:
    if declared is not None and declared.isdigit() and int(declared) != size:
        raise InvalidRequest(
            f"the body holds {size} bytes, not the {declared} that "
            "x-amz-decoded-content-length declares"
        )


def _line(raw: BinaryIO) -> bytes:
    line = raw.readline(_MAX_LINE)
    if not line.endswith(b"\r\n"):
        raise InvalidRequest("malformed aws-chunked body: a line does not end with CRLF")
    return line[:-2]


def _dechunk(
    raw: BinaryIO, take: Callable[[bytes], None], mode: str, signed: Signed
) -> dict[str, str]:
    """Feed each chunk's data to ``take``, checking chunk signatures; the trailers."""
    signing = mode != STREAMING_UNSIGNED_TRAILER
    key = signed.signing_key() if signing else b""
    previous = signed.signature
    while True:
        header = _line(raw).decode("latin-1")
        size_text, _, extension = header.partition(";")
        try:
            size = int(size_text, 16)
        except ValueError:
            raise InvalidRequest(
                f"malformed aws-chunked body: {size_text!r} is not a chunk size"
            ) from None
        data = raw.read(size) if size else b""
        if len(data) != size:
            raise InvalidRequest("the aws-chunked body ends in the middle of a chunk")
        if signing:
            name, _, given = extension.partition("=")
            if name.strip() != "chunk-signature":
                raise AccessDenied("an aws-chunked chunk has no chunk-signature")
            text = "\n".join(
                [
                    "AWS4-HMAC-SHA256-PAYLOAD",
                    signed.timestamp,
                    signed.scope,
                    previous,
                    EMPTY_SHA256,
                    hashlib.sha256(data).hexdigest(),
                ]
            )
            expected = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
            if not hmac.compare_digest(expected, given.strip()):
                raise AccessDenied(SIGNATURE_MISMATCH)
            previous = expected
        if size == 0:
            break
        take(data)
        if raw.read(2) != b"\r\n":
            raise InvalidRequest("malformed aws-chunked body: a chunk does not end with CRLF")
    trailers: dict[str, str] = {}
    trailer_lines: list[str] = []
    given_trailer_signature = None
    while line := _line(raw).decode("latin-1"):
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip()
        if name == "x-amz-trailer-signature":
            given_trailer_signature = value
        else:
            trailers[name] = value
            trailer_lines.append(f"{name}:{value}\n")
    if mode == STREAMING_SIGNED_TRAILER:
        text = "\n".join(
            [
                "AWS4-HMAC-SHA256-TRAILER",
                signed.timestamp,
                signed.scope,
                previous,
                hashlib.sha256("".join(trailer_lines).encode()).hexdigest(),
            ]
        )
        expected = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
        if given_trailer_signature is None or not hmac.compare_digest(
            expected, given_trailer_signature
        ):
            raise AccessDenied(SIGNATURE_MISMATCH)
    return trailers
