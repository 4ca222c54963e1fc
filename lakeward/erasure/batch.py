"""The batch index build on Spark: indexing an existing lake (the seed's flow 3).

    report = BatchIndexBuild(service, progress).run(prefix="lakeward-data/gdpr/")

Per dataset, the objects are listed, and those the index already holds with
the same eTag are skipped (so an interrupted build resumes where it stopped).
JSON lines, CSV and Parquet objects are read by one Spark job per dataset,
which gives every record its object (``_metadata.file_path``, the successor of
``input_file_name()``) and its position, with the real-time indexer's meaning:

* JSON lines: the line number. Lines are split on ``\\n`` only (as the indexer
  does), and a file split across tasks is put back in order by its blocks'
  offsets (``_metadata.file_block_start``) and the row order within a block.
  Each line is classified by the indexer's own id getter (blank, ``{}``
  placeholder, record, not JSON) in a vectorised Python UDF.
* CSV: the record number after the header. Files are read whole
  (``multiLine``, so quoted newlines stay inside their record), grouped by
  header so that each file's columns are named by its own first line.
* Parquet: the row index in the file (``_metadata.row_index``).

Gzip objects are read through Hadoop's codec, by their ``.gz`` name. What
Spark cannot read the way the indexer does -- gzip without the ``.gz`` name,
an empty or corrupt object, a line that is not JSON -- is indexed again in
the driver by the real-time indexer's code, which also gives the dead letter
its exact reason. File-name and sidecar datasets (no record scan) and
relational layers are indexed in the driver too.

Spark writes (object, position, user id) rows sorted by object to a staging
directory; the driver streams them into the index with ``bulk_load`` (COPY on
PostgreSQL, executemany batches on SQLite), a batch of objects per transaction.
"""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import time
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from lakeward.erasure.batch_rows import NOT_JSON, record_rows
from lakeward.erasure.index.store import IndexedObject
from lakeward.erasure.indexers import index_bytes, read_object
from lakeward.erasure.mappers import DatasetMapper
from lakeward.erasure.service import BUILD_INDEX_ACTION, INDEX_ARN
from lakeward.errors import ObjectKeptChanging, ObjectNotFound, Unparseable
from lakeward.progress import Progress
from lakeward.storage.paths import file_uri, hadoop_uri

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakeward.erasure.service import ErasureIndexService
    from lakeward.storage import ObjectInfo

SPARK_FORMATS = ("jsonl", "csv", "parquet")
LOAD_BATCH_ENTRIES = 50_000
"""Entries per bulk-load transaction: big enough for COPY to pay off, small enough to resume."""
_GLOB = str.maketrans({c: f"\\{c}" for c in "\\{}[]*?"})
_HEADER_BYTES = 64 * 1024


@dataclass
class BuildReport:
    objects: int = 0
    """Objects of the indexed datasets found in the lake."""
    unchanged: int = 0
    """Skipped: already indexed with their current eTag."""
    indexed: int = 0
    removed: int = 0
    """Index entries of objects no longer in the lake, dropped."""
    records: int = 0
    entries: int = 0
    dead_letters: list[tuple[str, str]] = field(default_factory=list)
    spark_seconds: float = 0.0
    seconds: float = 0.0


@dataclass(frozen=True)
class _Target:
    mapper: DatasetMapper
    info: ObjectInfo

    @property
    def uri(self) -> str:
        return self.info.uri


def canonical_path(reported: str) -> str:
    """A path as Spark reports it (``_metadata.file_path``), as ``_spark_path`` wrote it.

    Spark reports Hadoop's URI form ('%' and spaces escaped, '+' and '=' kept), so it is
    unquoted; the paths given to Spark are raw and are never unquoted, which keeps
    ``a%20b`` and ``a b`` two objects.
    """
    return file_uri(unquote(reported))  # Hadoop writes file:/x; _spark_path file:///x


class BatchIndexBuild:
    """One build of the index over the lake (or a prefix of it)."""

    def __init__(
        self,
        service: ErasureIndexService,
        progress: Progress | None = None,
        spark: SparkSession | None = None,
    ) -> None:
        self.service = service
        self.storage = service.storage
        self.progress = progress or Progress()
        self._spark = spark
        self._staging = service.settings.data_dir / "erasure" / "staging"

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            from lakeward.spark import build_session

            self._spark = build_session(self.service.settings, "lakeward-erasure-index", hive=False)
        return self._spark

    def run(self, prefix: str = "") -> BuildReport:
        """Build the index of ``prefix`` (authorized as ``erasure:BuildIndex`` first)."""
        self.service.access.authorize(BUILD_INDEX_ACTION, INDEX_ARN)
        started = time.monotonic()
        report = BuildReport()
        for mapper in self.service.mappers().datasets:
            if mapper.prefix.startswith(prefix) or prefix.startswith(mapper.prefix):
                self._build_dataset(mapper, prefix, report)
        if not prefix:
            report.entries += self.service.index_relational()
        report.seconds = time.monotonic() - started
        return report

    # -- one dataset ---------------------------------------------------------

    def _build_dataset(self, mapper: DatasetMapper, prefix: str, report: BuildReport) -> None:
        key_prefix = max(mapper.key_prefix, prefix.partition("/")[2], key=len)
        mappers = self.service.mappers()
        store = self.service.store
        with self.progress.step(f"list {mapper.name}"):
            stored = {r.uri: r.etag for r in store.objects(dataset=mapper.name)}
            listed = [
                i
                for i in self.storage.list(mapper.bucket, key_prefix)
                if mappers.dataset_for(i.bucket, i.key) == mapper
            ]
        report.objects += len(listed)
        todo = [_Target(mapper, i) for i in listed if stored.get(i.uri) != i.etag]
        report.unchanged += len(listed) - len(todo)
        spark_side = [t for t in todo if self._spark_reads(t)]
        driver_side = [t for t in todo if not self._spark_reads(t)]
        if spark_side:
            driver_side += self._spark_index(mapper, spark_side, report)
        self._driver_index(mapper, driver_side, report)
        scope = self.storage.uri(mapper.bucket, key_prefix)
        seen = {i.uri for i in listed}
        for uri in stored:
            if uri not in seen and uri.startswith(scope):
                store.remove_object(uri)
                report.removed += 1

    @staticmethod
    def _spark_reads(target: _Target) -> bool:
        """Whether Spark reads the object as the indexer would (else the driver does)."""
        mapper, key = target.mapper, target.info.key
        if mapper.format not in SPARK_FORMATS or target.info.size == 0:
            return False
        if mapper.format == "parquet":
            return True
        gz_name = key.endswith(".gz")  # Hadoop picks its codec by the name
        return (
            gz_name if mapper.compression == "gzip" else not gz_name or mapper.compression == "auto"
        )

    def _spark_path(self, info: ObjectInfo) -> str:
        directory = self.storage.local_dir
        if directory is not None:
            return "file:///" + str(directory / info.bucket / info.key).lstrip("/")
        return hadoop_uri(info.uri)

    def _driver_index(
        self, mapper: DatasetMapper, targets: list[_Target], report: BuildReport
    ) -> None:
        if not targets:
            return
        with self.progress.step(f"index {mapper.name} objects", total=len(targets)) as step:
            batch: list[IndexedObject] = []
            for target in targets:
                indexed = self._read_one(target, report)
                if indexed is not None:
                    batch.append(indexed)
                step.advance()
                if sum(len(b.entries) for b in batch) >= LOAD_BATCH_ENTRIES or len(batch) >= 500:
                    self._load(batch, report)
                    batch = []
            self._load(batch, report)

    def _read_one(self, target: _Target, report: BuildReport) -> IndexedObject | None:
        """Index one object with the real-time indexer's code; dead-letters what fails."""
        info = target.info
        try:
            if target.mapper.format == "filename":  # indexed by its key: no read
                return index_bytes(target.mapper, info.key, info.uri, info.etag, b"")
            return read_object(self.storage, target.mapper, info.bucket, info.key)
        except ObjectNotFound:
            return None  # deleted since the listing: nothing to index
        except (Unparseable, ObjectKeptChanging) as exc:
            reason = f"{target.mapper.name}: {exc.message}"
            self.service.store.add_dead_letter(info.uri, reason)
            report.dead_letters.append((info.uri, reason))
            return IndexedObject(info.uri, target.mapper.name, None)

    def _load(self, batch: list[IndexedObject], report: BuildReport) -> None:
        if batch:
            report.entries += self.service.store.bulk_load(batch)
            report.indexed += len(batch)
            report.records += sum(b.records for b in batch)

    # -- the Spark job -------------------------------------------------------

    def _spark_index(
        self, mapper: DatasetMapper, targets: list[_Target], report: BuildReport
    ) -> list[_Target]:
        """Index objects on Spark; returns those the driver must index instead."""
        by_path = {file_uri(self._spark_path(t.info)): t for t in targets}
        staging = self._staging / uuid.uuid4().hex
        leftovers: list[_Target] = []
        started = time.monotonic()
        spark = self.spark
        # A corrupt or vanished object must not fail the whole job: Spark skips it,
        # it yields no rows, and the driver indexes it (and dead-letters it) itself.
        spark.conf.set("spark.sql.files.ignoreCorruptFiles", "true")
        spark.conf.set("spark.sql.files.ignoreMissingFiles", "true")
        try:
            groups = self._groups(mapper, targets, leftovers, report)
            frames = [record_rows(spark, mapper, paths, header) for header, paths in groups]
            if frames:
                rows = frames[0]
                for frame in frames[1:]:
                    rows = rows.unionByName(frame)
                parts = max(1, min(64, len(targets) // 20))
                with self.progress.spark_job(spark.sparkContext, f"read {mapper.name} on Spark"):
                    (
                        rows.repartitionByRange(parts, "file_path")
                        .sortWithinPartitions("file_path", "position")
                        .write.parquet(str(staging))
                    )
            report.spark_seconds += time.monotonic() - started
            done = self._load_staging(mapper, staging, by_path, report)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return leftovers + [t for p, t in by_path.items() if p not in done]

    def _groups(
        self, mapper: DatasetMapper, targets: list[_Target], leftovers: list[_Target],
        report: BuildReport,
    ) -> list[tuple[tuple[str, ...], list[str]]]:  # fmt: skip
        """Spark's inputs: one group per CSV header; one group for other formats."""
        glob_safe = [(t, self._spark_path(t.info).translate(_GLOB)) for t in targets]
        if mapper.format != "csv":
            return [((), [p for _t, p in glob_safe])]
        groups: dict[tuple[str, ...], list[str]] = {}
        names = [s.removeprefix("$.") for s in mapper.id_columns]
        for target, path in glob_safe:
            header = self._csv_header(target)
            if header is None or len(set(header)) != len(header) or not set(names) <= set(header):
                leftovers.append(target)  # the driver reports why, in the indexer's words
            else:
                groups.setdefault(header, []).append(path)
        return list(groups.items())

    def _csv_header(self, target: _Target) -> tuple[str, ...] | None:
        """The column names of a CSV object: its first record, read from its first bytes."""
        info = target.info
        try:
            with self.storage.open(info.bucket, info.key) as stream:
                head = stream.read(_HEADER_BYTES)
        except ObjectNotFound:
            return None
        if info.key.endswith(".gz"):
            try:
                head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, _HEADER_BYTES)
            except zlib.error:
                return None
        text = head.decode("utf-8-sig", errors="replace")
        first = next(csv.reader(io.StringIO(text, newline="")), None)
        complete = "\n" in text or len(head) < _HEADER_BYTES
        return tuple(first) if first and complete else None

    def _load_staging(
        self, mapper: DatasetMapper, staging: Path, by_path: dict[str, _Target], report: BuildReport
    ) -> set[str]:
        """Bulk-load the Spark job's rows; returns the canonical paths it indexed."""
        done: set[str] = set()
        files = sorted(staging.glob("part-*.parquet")) if staging.is_dir() else []
        with self.progress.step(f"load {mapper.name} into the index", total=len(by_path)) as step:
            batch: list[IndexedObject] = []
            pending = 0
            for path, indexed, bad in _objects_in(files, by_path, mapper):
                done.add(path)
                step.advance()
                if bad:
                    # A line Spark could not read as JSON: the indexer decides (gzip
                    # without its .gz name parses there) and words the dead letter.
                    retried = self._read_one(by_path[path], report)
                    if retried is None:
                        continue
                    indexed = retried
                batch.append(indexed)
                pending += len(indexed.entries)
                if pending >= LOAD_BATCH_ENTRIES:
                    self._load(batch, report)
                    batch, pending = [], 0
            self._load(batch, report)
        return done


def _objects_in(
    files: list[Path], by_path: dict[str, _Target], mapper: DatasetMapper
) -> Iterator[tuple[str, IndexedObject, bool]]:
    """(canonical path, entries, whether a line was not JSON) per object in the staging files."""
    import numpy as np
    import pyarrow.parquet as pq

    for file in files:
        table = pq.read_table(file, read_dictionary=["file_path"])
        if table.num_rows == 0:
            continue
        paths = table.column("file_path").combine_chunks()
        codes = paths.indices.to_numpy(zero_copy_only=False)
        names = paths.dictionary.to_pylist()
        users = table.column("user_id").to_pylist()
        positions = table.column("position").to_pylist()
        kinds = table.column("kind").to_numpy()
        starts = np.flatnonzero(np.diff(codes)) + 1
        bounds = [0, *starts.tolist(), len(codes)]
        for start, end in zip(bounds, bounds[1:], strict=False):
            canonical = canonical_path(names[codes[start]])
            target = by_path.get(canonical)
            if target is None:
                continue  # not one of ours (cannot happen unless paths were mangled)
            out = IndexedObject(target.uri, mapper.name, target.info.etag)
            bad = bool((kinds[start:end] == NOT_JSON).any())
            for i in range(start, end):
                out.records += 1
                user = users[i]
                if user is None:
                    out.records_without_id += 1
                else:
                    out.entries.append((user, positions[i]))
            yield canonical, out, bad


def main(argv: list[str] | None = None) -> None:
    """``spark-submit lakeward/erasure/batch.py --data-dir DIR [--prefix P]``."""
    from lakeward.config import load_settings
    from lakeward.erasure.service import ErasureIndexService

    parser = argparse.ArgumentParser(description="Build the erasure index of a lake on Spark.")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--prefix", default="")
    args = parser.parse_args(argv)
    service = ErasureIndexService(load_settings(data_dir=args.data_dir))
    report = BatchIndexBuild(service).run(args.prefix)
    print(
        f"{report.indexed} objects indexed, {report.unchanged} unchanged, "
        f"{report.removed} removed, {report.records} records, {report.entries} entries, "
        f"{len(report.dead_letters)} dead letters, {report.seconds:.1f}s"
    )


if __name__ == "__main__":
    main()
