"""Extracts, the SPICE analogue: a dataset materialized to Parquet in the lake.

A refresh writes ``bi/extracts/<dataset id>/<refresh id>.parquet`` in the data
bucket through ``lakeward.storage`` (an atomic put: a reader sees a whole file
or none), then points the dataset's extract record at it. The current and the
previous file are kept (a reader that looked up the previous one a moment ago
can still read it, as with the covid tables' versions); older ones go, once
they are old enough not to be another process's refresh in flight.

Visuals read the file back into memory once and keep it in a small LRU cache
keyed by its URI, so a new refresh is picked up at once by every process, and
a dashboard's visuals are computed by DuckDB over memory.
"""

from __future__ import annotations

import io
import threading
import uuid
from collections import OrderedDict
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq

from lakeward.errors import ObjectNotFound, StorageError
from lakeward.storage import Storage

PREFIX = "bi/extracts"


class ExtractFiles:
    """Where extracts live in the lake, and the in-memory copies visuals read."""

    def __init__(self, storage: Storage, bucket: str, cache_bytes: int = 512 * 1024 * 1024) -> None:
        self.storage = storage
        self.bucket = bucket
        self.grace = timedelta(minutes=10)
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[str, pa.Table] = OrderedDict()
        self._lock = threading.Lock()

    def write(self, dataset_id: str, table: pa.Table) -> tuple[str, int]:
        """Write a new extract file; return its URI and size in bytes."""
        buffer = io.BytesIO()
        pq.write_table(table, buffer, compression="zstd")
        key = f"{PREFIX}/{dataset_id}/{uuid.uuid4().hex}.parquet"
        info = self.storage.put(self.bucket, key, buffer.getvalue())
        uri = self.storage.uri(self.bucket, key)
        with self._lock:
            self._remember(uri, table)
        return uri, info.size

    def read(self, uri: str) -> pa.Table:
        with self._lock:
            cached = self._cache.get(uri)
            if cached is not None:
                self._cache.move_to_end(uri)
                return cached
        try:
            data = self.storage.get(self.bucket, self._key(uri))
        except ObjectNotFound:
            raise StorageError(
                f"the extract {uri} is missing from the lake; refresh the dataset"
            ) from None
        table = pq.read_table(io.BytesIO(data))
        with self._lock:
            self._remember(uri, table)
        return table

    def prune(self, dataset_id: str, keep: set[str], grace: timedelta | None = None) -> int:
        """Delete the dataset's extract files not in ``keep``; how many went.

        Files younger than ``grace`` (default ``self.grace``) stay: another
        process may have just written one and not yet recorded it.
        """
        grace = self.grace if grace is None else grace
        cutoff = datetime.now(UTC) - grace
        removed = 0
        for info in list(self.storage.list(self.bucket, f"{PREFIX}/{dataset_id}/")):
            uri = self.storage.uri(self.bucket, info.key)
            if uri in keep or info.last_modified > cutoff:
                continue
            try:
                self.storage.delete(self.bucket, info.key)
                removed += 1
            except ObjectNotFound:
                pass  # another process removed it first
            with self._lock:
                self._cache.pop(uri, None)
        return removed

    def _key(self, uri: str) -> str:
        return uri.removeprefix(self.storage.uri(self.bucket) + "/")

    def _remember(self, uri: str, table: pa.Table) -> None:
        if table.nbytes > self.cache_bytes:
            return
        self._cache[uri] = table
        self._cache.move_to_end(uri)
        while sum(t.nbytes for t in self._cache.values()) > self.cache_bytes:
            self._cache.popitem(last=False)
