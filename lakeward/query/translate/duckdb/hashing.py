"""Hashing and encoding: Trino's digests take and give varbinary.

DuckDB's digests give hex text and also take text; here they take only
varbinary (Trino refuses ``md5('x')``: write ``md5(to_utf8('x'))``) and
give bytes. ``from_utf8`` of bytes that are not UTF-8 (Trino puts U+FFFD
for them) is refused when met; ``sha512`` and ``xxhash64`` have no DuckDB
equivalent. ``crc32`` is Python's zlib CRC-32 (the same polynomial as
Trino's java.util.zip.CRC32), a function each pooled connection opens with.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

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


# Python functions each pooled connection opens with: name, function, parameter and result
# types (DuckDB's names).
FUNCTIONS: list[tuple[str, Callable[..., Any], list[str], str]] = [
    ("trino_crc32", _crc32, ["BLOB"], "BIGINT"),
]

# Functions made of bytes: their length counts bytes.
_BYTES = (exp.MD5Digest, exp.SHA2Digest, exp.Unhex, exp.FromBase64, exp.Encode)

REFUSED: dict[str, str] = {
    "xxhash64": "the DuckDB engine has no xxHash64",
    "sha512": "the DuckDB engine has no SHA-512",
    "hmac_sha512": "the DuckDB engine has no SHA-512",
}


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
        if length is not None and length.name not in ("", "256"):
            raise InvalidRequest(f"function sha512 is not supported: {REFUSED['sha512']}")
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
    if isinstance(node, exp.Anonymous) and node.name.lower() == "crc32":
        if len(node.expressions) != 1:
            raise InvalidRequest("crc32 takes one argument (varbinary)")
        return exp.Anonymous(
            this="trino_crc32", expressions=[_bytes_only(node.expressions[0], "crc32")]
        )
    if isinstance(node, exp.Decode):
        return exp.Anonymous(this="trino_from_utf8", expressions=[node.this])
    if isinstance(node, exp.Length) and isinstance(node.this, _BYTES):
        return exp.Anonymous(this="octet_length", expressions=[node.this])
    return node


REWRITES = [hashing]
