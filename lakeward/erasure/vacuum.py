"""``lakeward erasure vacuum``: compact JSON-lines objects by dropping purge placeholders.

Purges leave ``{}`` where a record was, so that other records keep their line
numbers. Vacuum removes those lines, which renumbers later records, so each
compacted object is re-indexed at once. The rewrite is conditional on the
eTag read: an object written meanwhile is left alone and reported.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field

from lakeward.erasure.executors.base import GZIP_MAGIC, md5_hex
from lakeward.erasure.service import ErasureIndexService
from lakeward.errors import ObjectNotFound, PreconditionFailed

PLACEHOLDER = b"{}"


@dataclass
class VacuumResult:
    objects: int = 0
    placeholders: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    skipped: list[str] = field(default_factory=list)
    """Objects that changed while being compacted (left as they were)."""


def compact(data: bytes) -> tuple[bytes, int]:
    """``data`` without its placeholder lines, and how many there were."""
    lines = data.split(b"\n")
    kept = [line for line in lines if line.rstrip(b"\r") != PLACEHOLDER]
    return b"\n".join(kept), len(lines) - len(kept)


def vacuum(service: ErasureIndexService, prefix: str = "") -> VacuumResult:
    """Compact every JSON-lines object of the indexed datasets under ``prefix`` (bucket/key)."""
    storage = service.storage
    result = VacuumResult()
    for mapper in service.mappers().datasets:
        if mapper.format != "jsonl":
            continue
        if not (mapper.prefix.startswith(prefix) or prefix.startswith(mapper.prefix)):
            continue
        key_prefix = max(mapper.key_prefix, prefix.partition("/")[2], key=len)
        for key in storage.keys(mapper.bucket, key_prefix):
            if not mapper.covers(mapper.bucket, key):
                continue
            try:
                etag = storage.stat(mapper.bucket, key).etag
                raw = storage.get(mapper.bucket, key)
            except ObjectNotFound:
                continue
            if "-" not in etag and md5_hex(raw) != etag:
                result.skipped.append(storage.uri(mapper.bucket, key))  # written meanwhile
                continue
            zipped = raw[:2] == GZIP_MAGIC
            data = gzip.decompress(raw) if zipped else raw
            if PLACEHOLDER not in data:
                continue
            compacted, dropped = compact(data)
            if not dropped:
                continue
            new = gzip.compress(compacted, mtime=0) if zipped else compacted
            try:
                # Multipart eTags are no MD5: the write is conditional on the one seen before.
                storage.put_if_match(mapper.bucket, key, new, etag)
            except (PreconditionFailed, ObjectNotFound):
                result.skipped.append(storage.uri(mapper.bucket, key))
                continue
            service.index_object(mapper.bucket, key)
            result.objects += 1
            result.placeholders += dropped
            result.bytes_before += len(raw)
            result.bytes_after += len(new)
    return result
