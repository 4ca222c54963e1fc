"""Hashing and encoding: Trino's digests take and give varbinary.

DuckDB's digests give hex text and also take text; here they take only
varbinary (Trino refuses ``md5('x')``: write ``md5(to_utf8('x'))``) and
give bytes. ``from_utf8`` of bytes that are not UTF-8 (Trino puts U+FFFD
for them) is refused when met. What DuckDB has no function for is a Python
function each pooled connection opens with, computing the standard algorithm
Trino's own implements: ``crc32`` (zlib's CRC-32, java.util.zip.CRC32's
polynomial), ``sha512`` (hashlib), ``xxhash64`` (the xxhash package, XXH64
with seed 0, big-endian as Trino gives it) and the ``hmac_*`` functions
(Python's hmac).
"""

from __future__ import annotations

import hashlib
import hmac
import zlib
from collections.abc import Callable
from typing import Any

import xxhash
from sqlglot import exp

from lakeward.errors import InvalidRequest
from lakeward.query.translate.duckdb.templates import fail, fill

_NOT_BYTES = fail("'the function takes varbinary: convert text with to_utf8'", "VARCHAR")

MACROS: list[str] = [
    "CREATE MACRO trino_varbinary(x) AS CASE WHEN x IS NULL THEN NULL "
    f"WHEN typeof(x) = 'BLOB' THEN x ELSE unhex({_NOT_BYTES}) END",
    "CREATE MACRO trino_from_utf8(x) AS CASE WHEN x IS NOT NULL AND try(decode(x)) IS NULL "
    "THEN "
    + fail("'from_utf8 of bytes that are not UTF-8 is not supported'", "VARCHAR")
    + " ELSE decode(x) END",
]


def _crc32(value: bytes) -> int:
    return zlib.crc32(value)


def _sha512(value: bytes) -> bytes:
    return hashlib.sha512(value).digest()


def _xxhash64(value: bytes) -> bytes:
    return xxhash.xxh64_digest(value)


def _hmac(digest: str) -> Callable[[bytes, bytes], bytes]:
    def keyed(value: bytes, key: bytes) -> bytes:
        return hmac.new(key, value, digest).digest()

    return keyed


_HMACS = {"hmac_md5": "md5", "hmac_sha1": "sha1", "hmac_sha256": "sha256", "hmac_sha512": "sha512"}

# Python functions each pooled connection opens with: name, function, parameter and result
# types (DuckDB's names).
FUNCTIONS: list[tuple[str, Callable[..., Any], list[str], str]] = [
    ("trino_crc32", _crc32, ["BLOB"], "BIGINT"),
    ("trino_sha512", _sha512, ["BLOB"], "BLOB"),
    ("trino_xxhash64", _xxhash64, ["BLOB"], "BLOB"),
    *(
        (f"trino_{name}", _hmac(digest), ["BLOB", "BLOB"], "BLOB")
        for name, digest in _HMACS.items()
    ),
]
# Trino's functions answered by one of them: the arguments, all varbinary.
_PYTHON = {"crc32": 1, "xxhash64": 1, **dict.fromkeys(_HMACS, 2)}

# Functions made of bytes: their length counts bytes.
_BYTES = (exp.MD5Digest, exp.SHA2Digest, exp.Unhex, exp.FromBase64, exp.Encode)

REFUSED: dict[str, str] = {}


def _bytes_only(value: exp.Expr, function: str) -> exp.Expr:
    if isinstance(value, exp.Literal) and value.is_string:
        raise InvalidRequest(
            f"Unexpected parameters (varchar) for function {function}: it takes varbinary "
            f"(write {function}(to_utf8(...)))"
        )
    return exp.Anonymous(this="trino_varbinary", expressions=[value])


def hashing(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.SHA2Digest):
        length = node.args.get("length")
        if length is not None and length.name == "512":
            return exp.Anonymous(
                this="trino_sha512", expressions=[_bytes_only(node.this, "sha512")]
            )
        if length is not None and length.name not in ("", "256"):
            raise InvalidRequest(f"function sha{length.name} is not supported on DuckDB")
        node.set("this", _bytes_only(node.this, "sha256"))
        return node
    if isinstance(node, exp.MD5Digest):
        node.set("this", _bytes_only(node.this, "md5"))
        return node
    if isinstance(node, exp.SHA):
        return fill("unhex(sha1(_x))", x=_bytes_only(node.this, "sha1"))
    if isinstance(node, (exp.Hex, exp.ToBase64)):
        node.set("this", _bytes_only(node.this, node.sql_name().lower()))
        return node
    name = node.name.lower() if isinstance(node, exp.Anonymous) else ""
    if name in _PYTHON:
        if len(node.expressions) != _PYTHON[name]:
            raise InvalidRequest(f"{name} takes {_PYTHON[name]} varbinary argument(s)")
        arguments = [_bytes_only(a, name) for a in node.expressions]
        return exp.Anonymous(this=f"trino_{name}", expressions=arguments)
    if isinstance(node, exp.Decode):
        return exp.Anonymous(this="trino_from_utf8", expressions=[node.this])
    if isinstance(node, exp.Length) and isinstance(node.this, _BYTES):
        return exp.Anonymous(this="octet_length", expressions=[node.this])
    return node


REWRITES = [hashing]
