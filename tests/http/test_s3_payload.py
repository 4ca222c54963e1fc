"""Upload bodies in each payload mode S3 takes, decoded and checked (lakeward/http/s3/payload.py).

The signed chunks are the example of AWS's own documentation of SigV4 streaming uploads
(66,560 bytes of 'a' in a 64 KiB chunk and a 1 KiB chunk, signed with the documentation's
example key on 2013-05-24): a decoder that accepts them computes the chain as S3 does.
"""

from __future__ import annotations

import base64
import hashlib
import io
import zlib
from datetime import UTC, datetime

import pytest
from awscrt import checksums

from lakeward.errors import AccessDenied, InvalidRequest
from lakeward.http.s3.payload import decode
from lakeward.http.s3.xml import S3Error
from lakeward.http.sigv4 import Signed

EXAMPLE = Signed(
    key_id="AKIAIOSFODNN7EXAMPLE",
    secret="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    timestamp="20130524T000000Z",
    scope="20130524/us-east-1/s3/aws4_request",
    signature="4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9",
    request_time=datetime(2013, 5, 24, tzinfo=UTC),
)
CHUNK_SIGNATURES = [
    "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
    "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
    "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
]
DATA = b"a" * 66560


def documented_body(signatures: list[str] = CHUNK_SIGNATURES) -> bytes:
    chunks = [DATA[:65536], DATA[65536:], b""]
    return b"".join(
        f"{len(c):x};chunk-signature={s}\r\n".encode() + c + b"\r\n"
        for c, s in zip(chunks, signatures, strict=True)
    )


def run(body: bytes, **headers: str) -> bytes:
    out = io.BytesIO()
    named = {k.replace("_", "-").lower(): v for k, v in headers.items()}
    return decode(io.BytesIO(body), out, named, EXAMPLE).file.read()


def test_signed_chunks_as_the_documentation_signs_them() -> None:
    body = documented_body()
    decoded = run(
        body,
        x_amz_content_sha256="STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
        x_amz_decoded_content_length=str(len(DATA)),
    )
    assert decoded == DATA


def test_a_chunk_whose_signature_is_not_in_the_chain_is_refused() -> None:
    wrong = [CHUNK_SIGNATURES[0], CHUNK_SIGNATURES[0], CHUNK_SIGNATURES[2]]
    with pytest.raises(AccessDenied):
        run(documented_body(wrong), x_amz_content_sha256="STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
    tampered = documented_body().replace(b"a" * 10, b"b" * 10, 1)
    with pytest.raises(AccessDenied):
        run(tampered, x_amz_content_sha256="STREAMING-AWS4-HMAC-SHA256-PAYLOAD")


def unsigned_trailer_body(data: bytes, trailer: str) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\n" + trailer.encode() + b"\r\n\r\n"


@pytest.mark.parametrize(
    ("algorithm", "digest"),
    [
        ("crc32", zlib.crc32(DATA).to_bytes(4, "big")),
        ("crc32c", checksums.crc32c(DATA).to_bytes(4, "big")),
        ("crc64nvme", checksums.crc64nvme(DATA).to_bytes(8, "big")),
        ("sha256", hashlib.sha256(DATA).digest()),
    ],
)
def test_unsigned_chunks_with_a_trailing_checksum(algorithm: str, digest: bytes) -> None:
    value = base64.b64encode(digest).decode()
    body = unsigned_trailer_body(DATA, f"x-amz-checksum-{algorithm}:{value}")
    mode = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    assert run(body, x_amz_content_sha256=mode) == DATA
    wrong = unsigned_trailer_body(DATA[:-1] + b"b", f"x-amz-checksum-{algorithm}:{value}")
    with pytest.raises(S3Error) as caught:
        run(wrong, x_amz_content_sha256=mode)
    assert caught.value.code == "BadDigest"


def test_a_plain_body_is_checked_against_its_hash_and_checksum_headers() -> None:
    sha = hashlib.sha256(DATA).hexdigest()
    crc = base64.b64encode(zlib.crc32(DATA).to_bytes(4, "big")).decode()
    assert run(DATA, x_amz_content_sha256=sha, x_amz_checksum_crc32=crc) == DATA
    assert run(DATA, x_amz_content_sha256="UNSIGNED-PAYLOAD") == DATA
    with pytest.raises(S3Error) as caught:
        run(DATA + b"!", x_amz_content_sha256=sha)
    assert caught.value.code == "XAmzContentSHA256Mismatch"
    with pytest.raises(S3Error) as caught:
        run(DATA, x_amz_content_sha256="UNSIGNED-PAYLOAD", x_amz_checksum_crc32="AAAAAA==")
    assert caught.value.code == "BadDigest"


def test_malformed_and_cut_off_chunked_bodies_are_refused() -> None:
    mode = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    with pytest.raises(InvalidRequest, match="not a chunk size"):
        run(b"zz\r\nabc\r\n0\r\n\r\n", x_amz_content_sha256=mode)
    with pytest.raises(InvalidRequest, match="ends in the middle of a chunk"):
        run(b"10\r\nabc", x_amz_content_sha256=mode)
    with pytest.raises(InvalidRequest, match="x-amz-decoded-content-length"):
        run(
            unsigned_trailer_body(
                b"abc",
                "x-amz-checksum-crc32:"
                + base64.b64encode(zlib.crc32(b"abc").to_bytes(4, "big")).decode(),
            ),
            x_amz_content_sha256=mode,
            x_amz_decoded_content_length="4",
        )
    with pytest.raises(InvalidRequest, match="SHA512 is not supported"):
        run(unsigned_trailer_body(b"abc", "x-amz-checksum-sha512:AAAA"), x_amz_content_sha256=mode)
