"""Query results in the lake: Athena's CSV, its metadata, and paging with NextToken."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import random
from collections.abc import Iterator
from datetime import UTC, date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakeward.config import Settings
from lakeward.errors import InvalidRequest, ResourceNotFound
from lakeward.query import results
from lakeward.query.engines.base import EngineResult
from lakeward.query.model import ColumnInfo
from lakeward.query.results import ResultCache, read_page, write_results
from lakeward.query.types import athena_type_of_arrow
from lakeward.storage import Storage, load_storage

BUCKET = "lakeward-data"
PREFIX = "query-results/primary"


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    storage = load_storage(Settings(data_dir=tmp_path))
    storage.ensure_bucket(BUCKET)
    return storage


def result_of(*batches: pa.RecordBatch) -> EngineResult:
    schema = batches[0].schema
    columns = [athena_type_of_arrow(f.type).column(f.name) for f in schema]
    return EngineResult(columns, iter(batches))


def csv_text(storage: Storage, execution_id: str) -> str:
    return storage.get(BUCKET, f"{PREFIX}/{execution_id}.csv").decode("utf-8")


def test_csv_is_written_as_athena_writes_it(storage: Storage) -> None:
    batch = pa.record_batch(
        {
            "s": pa.array(['say "hi"', "", None, "a,b\nc"]),
            "n": pa.array([1, None, -3, 4], pa.int64()),
            "d": pa.array([date(2020, 1, 2), None, date(1999, 12, 31), date(2020, 2, 29)]),
            "ts": pa.array(
                [datetime(2020, 1, 2, 3, 4, 5, 678901), None, datetime(2020, 1, 2), None],
                pa.timestamp("us"),
            ),
            "b": pa.array([True, False, None, True]),
            "dec": pa.array(
                [Decimal("1.50"), Decimal("-0.01"), None, Decimal("12.00")], pa.decimal128(10, 2)
            ),  # fmt: skip
            "x": pa.array([0.1, 1e7, None, 12345.5]),
            "arr": pa.array([[1, 2], [], None, [None, 3]], pa.list_(pa.int32())),
            "m": pa.array([[("a", 1)], None, [], [("b", None)]], pa.map_(pa.string(), pa.int32())),
            "r": pa.array([{"a": 1, "b": "x"}, None, {"a": None, "b": "y"}, {"a": 2, "b": ""}]),
        }
    )
    summary = write_results(storage, BUCKET, PREFIX, "q1", result_of(batch), ResultCache())
    assert summary.rows == 4
    lines = csv_text(storage, "q1").split("\n")
    assert lines[0] == '"s","n","d","ts","b","dec","x","arr","m","r"'
    assert lines[1] == (
        '"say ""hi""","1","2020-01-02","2020-01-02 03:04:05.678","true","1.50","0.1",'
        '"[1, 2]","{a=1}","{a=1, b=x}"'
    )
    assert lines[2] == '"",,,,"false","-0.01","1.0E7","[]",,'
    assert lines[3] == ',"-3","1999-12-31","2020-01-02 00:00:00.000",,,,,"{}","{a=null, b=y}"'
    assert lines[4] == '"a,b'
    assert (
        lines[5]
        == 'c","4","2020-02-29",,"true","12.00","12345.5","[null, 3]","{b=null}","{a=2, b=}"'
    )
    assert lines[6:] == [""]
    assert summary.bytes == len(csv_text(storage, "q1").encode())

    metadata = json.loads(storage.get(BUCKET, f"{PREFIX}/q1.csv.metadata"))
    assert metadata["format"] == 1 and metadata["rows"] == 4
    assert [c["name"] for c in metadata["columns"]] == ["s", "n", "d", "ts", "b", "dec", "x",
                                                        "arr", "m", "r"]  # fmt: skip
    assert metadata["columns"][5] == {**metadata["columns"][5], "type": "decimal",
                                      "precision": 10, "scale": 2}  # fmt: skip


def test_more_value_forms() -> None:
    from lakeward.query.texts import column_texts as _texts
    from lakeward.query.texts import java_float as _java_float

    assert [_java_float(v, single=False) for v in (1.0, 100.0, 0.001, 0.0001, -2.5e-10, 1e21)] == [
        "1.0", "100.0", "0.001", "1.0E-4", "-2.5E-10", "1.0E21"]  # fmt: skip
    assert _java_float(0.1, single=True) == "0.1"  # not 0.10000000149011612
    assert _java_float(float("nan"), single=False) == "NaN"
    # Whole columns take a faster path: it must print every value as _java_float does.
    generator = random.Random(7)
    doubles = [generator.uniform(-1, 1) * 10 ** generator.randint(-12, 12) for _ in range(5000)]
    doubles += [float(generator.randint(-(10**8), 10**8)) for _ in range(1000)]
    for kind, single in ((pa.float64(), False), (pa.float32(), True)):
        column = pa.array(doubles, kind)
        expected = [_java_float(v, single) for v in column.to_pylist()]
        assert _texts(column).to_pylist() == expected
    tz = pa.array([datetime(2021, 5, 6, 7, 8, 9, 10_000, tzinfo=UTC)], pa.timestamp("us", "UTC"))
    assert _texts(tz).to_pylist() == ["2021-05-06 07:08:09.010 UTC"]
    assert _texts(pa.array([b"hi", None], pa.binary())).to_pylist() == ["68 69", None]
    times = pa.array([time(1, 2, 3, 456789), None], pa.time64("us"))
    assert _texts(times).to_pylist() == ["01:02:03.456", None]
    nested_times = pa.array([[time(4, 5, 6)]], pa.list_(pa.time64("us")))
    assert _texts(nested_times).to_pylist() == ["[04:05:06.000]"]
    assert _texts(pa.array(["a", None]).dictionary_encode()).to_pylist() == ["a", None]


def test_pages_read_back_what_was_written(storage: Storage) -> None:
    """NULL stays None and the empty string stays '', from the cache and from the lake."""
    values = {"a": pa.array(["", None, 'q"uote', "new\nline"]), 'b\n"2"': [1, 2, 3, 4]}
    write_results(storage, BUCKET, PREFIX, "q2", result_of(pa.record_batch(values)), ResultCache())
    expected = [["a", 'b\n"2"'], ["", "1"], [None, "2"], ['q"uote', "3"], ["new\nline", "4"]]
    for cache in (ResultCache(), ResultCache(max_bytes=0)):  # parsed, then streamed
        page = read_page(storage, BUCKET, PREFIX, "q2", None, 1000, True, cache)
        assert page.rows == expected and page.next_token is None
        assert [c.name for c in page.columns] == ["a", 'b\n"2"']
        assert [c.type for c in page.columns] == ["varchar", "bigint"]
        page = read_page(storage, BUCKET, PREFIX, "q2", None, 1000, False, cache)
        assert page.rows == expected[1:]


def many_rows(count: int, batch_rows: int = 700) -> Iterator[pa.RecordBatch]:
    for start in range(0, count, batch_rows):
        ids = list(range(start, min(count, start + batch_rows)))
        yield pa.record_batch({"id": ids, "text": [f"row {i}" if i % 7 else None for i in ids]})


@pytest.mark.parametrize("cache_bytes", [128 * 1024 * 1024, 0], ids=["cached", "streamed"])
def test_paging_over_more_than_3000_rows(storage: Storage, cache_bytes: int) -> None:
    written = ResultCache(cache_bytes)
    batches = list(many_rows(3500))
    write_results(storage, BUCKET, PREFIX, "q3", result_of(*batches), written)
    reader = ResultCache(cache_bytes)  # a fresh process: nothing parsed yet
    pages, token = [], None
    while True:
        page = read_page(storage, BUCKET, PREFIX, "q3", token, 1000, True, reader)
        pages.append(page.rows)
        token = page.next_token
        if token is None:
            break
    assert [len(p) for p in pages] == [1000, 1000, 1000, 501]
    assert pages[0][0] == ["id", "text"]  # the labels row, on the first page only
    rows = [r for p in pages for r in p][1:]
    assert rows == [[str(i), f"row {i}" if i % 7 else None] for i in range(3500)]
    assert all(p[0] != ["id", "text"] for p in pages[1:])


def test_tokens_from_the_cache_work_on_the_lake_and_back(storage: Storage) -> None:
    write_results(storage, BUCKET, PREFIX, "q4", result_of(*many_rows(50)), ResultCache())
    cached, streamed = ResultCache(), ResultCache(max_bytes=0)
    first = read_page(storage, BUCKET, PREFIX, "q4", None, 10, True, cached)
    second = read_page(storage, BUCKET, PREFIX, "q4", first.next_token, 10, True, streamed)
    third = read_page(storage, BUCKET, PREFIX, "q4", second.next_token, 10, True, cached)
    assert [r[0] for r in second.rows] == [str(i) for i in range(9, 19)]
    assert [r[0] for r in third.rows] == [str(i) for i in range(19, 29)]


def test_bad_tokens_and_sizes_are_refused(storage: Storage) -> None:
    write_results(storage, BUCKET, PREFIX, "q5", result_of(*many_rows(30)), ResultCache())
    page = read_page(storage, BUCKET, PREFIX, "q5", None, 10, True, ResultCache())
    assert page.next_token is not None
    forged = base64.urlsafe_b64encode(b"5:0:0000000000000000").decode()
    for token in ("not base64!", "", base64.b64encode(b"12").decode(), forged):
        with pytest.raises(InvalidRequest):
            read_page(storage, BUCKET, PREFIX, "q5", token or "x", 10, True, ResultCache())
    with pytest.raises(InvalidRequest):  # a token of another query
        write_results(storage, BUCKET, PREFIX, "q6", result_of(*many_rows(30)), ResultCache())
        read_page(storage, BUCKET, PREFIX, "q6", page.next_token, 10, True, ResultCache())
    for size in (0, 1001):
        with pytest.raises(InvalidRequest):
            read_page(storage, BUCKET, PREFIX, "q5", None, size, True, ResultCache())
    with pytest.raises(ResourceNotFound):
        read_page(storage, BUCKET, PREFIX, "nope", None, 10, True, ResultCache())


def test_a_failing_result_leaves_no_object(storage: Storage) -> None:
    def failing() -> Iterator[pa.RecordBatch]:
        yield from many_rows(2000)
        raise RuntimeError("the engine broke mid-way")

    columns = [ColumnInfo("id", "bigint"), ColumnInfo("text", "varchar")]
    with pytest.raises(RuntimeError, match="mid-way"):
        write_results(storage, BUCKET, PREFIX, "q7", EngineResult(columns, failing()))
    assert storage.keys(BUCKET, f"{PREFIX}/") == []


@pytest.mark.parametrize("spool_memory", [results.SPOOL_MEMORY, 1024])
def test_each_object_is_announced_once_with_its_checksum(
    storage: Storage, monkeypatch: pytest.MonkeyPatch, spool_memory: int
) -> None:
    # 1024 bytes of memory: the CSV and the pages spill to temporary files on the way.
    monkeypatch.setattr(results, "SPOOL_MEMORY", spool_memory)
    events: list[dict[str, Any]] = []
    storage.subscribe(events.append)
    summary = write_results(storage, BUCKET, PREFIX, "q10", result_of(*many_rows(2500)))
    announced = {
        r["s3"]["object"]["key"]: (r["s3"]["object"]["size"], r["s3"]["object"]["eTag"])
        for event in events
        for r in event["Records"]
    }
    keys = [f"{PREFIX}/q10.csv", f"{PREFIX}/q10.csv.metadata", f"{PREFIX}/q10.csv.pages"]
    assert len(events) == 3 and sorted(announced) == keys
    for key in keys:
        data = storage.get(BUCKET, key)
        assert announced[key] == (len(data), hashlib.md5(data).hexdigest())
    csv = storage.get(BUCKET, keys[0])
    assert summary.bytes == len(csv) == json.loads(storage.get(BUCKET, keys[1]))["bytes"]
    assert csv.count(b"\n") == 2501 and summary.rows == 2500
    page = read_page(storage, BUCKET, PREFIX, "q10", None, 3, False, ResultCache(0))
    assert page.rows == [[str(i), f"row {i}" if i % 7 else None] for i in range(3)]


def test_an_empty_result_has_its_header_only(storage: Storage) -> None:
    columns = [ColumnInfo("id", "bigint")]
    summary = write_results(storage, BUCKET, "", "q8", EngineResult(columns, iter([])))
    assert summary.rows == 0 and storage.get(BUCKET, "q8.csv") == b'"id"\n'
    page = read_page(storage, BUCKET, "", "q8", None, 5, True, ResultCache())
    assert page.rows == [["id"]] and page.next_token is None


class _Forward(io.RawIOBase):
    """A stream that reads forward only, as an S3 object's body does."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        chunk = self._data.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


def test_pages_too_big_to_hold_read_forward_from_a_stream_that_cannot_seek(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_results(storage, BUCKET, PREFIX, "q9", result_of(*many_rows(2500)), ResultCache())
    expected = [
        read_page(storage, BUCKET, PREFIX, "q9", None, 1000, True, ResultCache()).rows,
    ]
    real_open = storage.open

    def forward_only(bucket: str, key: str) -> io.BufferedReader:
        with real_open(bucket, key) as stream:
            return io.BufferedReader(_Forward(stream.read()))

    monkeypatch.setattr(storage, "open", forward_only)
    pages, token = [], None
    while True:
        page = read_page(storage, BUCKET, PREFIX, "q9", token, 1000, True, ResultCache(0))
        pages.append(page.rows)
        token = page.next_token
        if token is None:
            break
    assert pages[0] == expected[0]
    assert [r for p in pages for r in p][1:] == [
        [str(i), f"row {i}" if i % 7 else None] for i in range(2500)
    ]
