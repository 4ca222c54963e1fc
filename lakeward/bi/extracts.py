"""Extracts, the SPICE analogue: a dataset materialized to Parquet in the lake.

A refresh writes ``bi/extracts/<dataset id>/<refresh id>.parquet`` in the data
bucket through ``lakeward.storage`` (an atomic put: a reader sees a whole file
or none), then points the dataset's extract record at it, then deletes the
previous file. Visuals read the file back into memory once and keep it in a
small LRU cache keyed by its URI, so a new refresh is picked up at once by
every process, and a dashboard's visuals are computed by DuckDB over memory.
"""

from __future__ import annotations

import io
import threading
import uuid
from collections import OrderedDict

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

    def remove_others(self, dataset_id: str, keep: str | None) -> int:
        """Delete the dataset's extract files other than ``keep``; how many went."""
        removed = 0
        for info in list(self.storage.list(self.bucket, f"{PREFIX}/{dataset_id}/")):
            uri = self.storage.uri(self.bucket, info.key)
            if uri != keep:
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
