"""Per-format indexers and the index service's handling of bad objects, on a file:// lake."""

from __future__ import annotations

import gzip
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeward.config import load_settings
from lakeward.erasure import DatasetMapper, ErasureIndexService, composite_id
from lakeward.erasure.indexers import index_bytes, index_relational, read_object
from lakeward.erasure.mappers import RelationalMapper
from lakeward.errors import ObjectKeptChanging, Unparseable
from lakeward.storage import Storage

B = "lakeward-data"


def mapper(fmt: str, *ids: str, compression: str = "auto") -> DatasetMapper:
    return DatasetMapper("ds", B, "in/", fmt, compression, ids or ("user_id",))


def entries(fmt: str, data: bytes, *ids: str, key: str = "in/x") -> Any:
    indexed = index_bytes(mapper(fmt, *ids), key, f"file:///lake/{B}/{key}", "etag", data)
    return indexed.entries, indexed.records, indexed.records_without_id


@pytest.fixture
def service(tmp_path: Path) -> ErasureIndexService:
    created = ErasureIndexService(load_settings(data_dir=tmp_path, env={}))
    created.storage.ensure_bucket(B)
    created.register(mapper("jsonl"))
    return created


def test_json_lines_positions_are_line_numbers() -> None:
    data = (
        b'{"user_id": "a"}\n'
        b"\n"  # blank: not a record, but still a line
        b'{"user_id": null}\n'
        b"{}\n"  # a purged record's placeholder
        b'{"other": 1}\n'
        b'{"user_id": 42}\n'
        b'{"user_id": true}\n'
        b'{"user_id": ""}\n'
        b'  {"user_id": "a"}  \n'
    )
    assert entries("jsonl", data) == ([("a", 1), ("42", 6), ("a", 9)], 7, 4)


def test_json_paths_and_composite_keys() -> None:
    data = b'{"user": {"id": "u1", "tenant": "t"}}\n{"user": {"id": "u2"}}\n{"user": "flat"}\n'
    assert entries("jsonl", data, "$.user.id")[0] == [("u1", 1), ("u2", 2)]
    found, records, without = entries("jsonl", data, "$.user.tenant", "$.user.id")
    assert found == [(composite_id(["t", "u1"]), 1)] and (records, without) == (3, 2)


def test_gzip_json_lines_and_bad_gzip() -> None:
    data = gzip.compress(b'{"user_id": "a"}\n{"user_id": "b"}\n')
    assert entries("jsonl", data, key="in/x.jsonl.gz")[0] == [("a", 1), ("b", 2)]
    assert entries("jsonl", data, key="in/no-suffix")[0] == [("a", 1), ("b", 2)]  # by magic
    with pytest.raises(Unparseable, match="not valid gzip"):
        entries("jsonl", b"\x1f\x8bnot really", key="in/x.jsonl.gz")


def test_unparseable_json_line_is_named() -> None:
    with pytest.raises(Unparseable, match="line 2: not JSON"):
        entries("jsonl", b'{"user_id": "a"}\n{"user_id": \n')
    with pytest.raises(Unparseable, match="line 3: not JSON"):
        entries("jsonl", b'{"user_id": "a"}\n\n{"user_id": "b"} trailing\n')


def test_json_lines_python_reads_are_kept() -> None:
    # What Python's json reads and a strict parser may not: the ids stay the same.
    data = (
        b'\xef\xbb\xbf{"user_id": "bom"}\n'  # a byte order mark
        b'{"user_id": "nan", "score": NaN}\n'
        b'{"user_id": 123456789012345678901234567890}\n'  # beyond 64 bits
        b'{"user_id": "\\ud800x"}\n'  # a lone surrogate
        b'{"user_id": 1.0}\n'  # a float is no id
    )
    found, records, without = entries("jsonl", data)
    assert found == [
        ("bom", 1),
        ("nan", 2),
        ("123456789012345678901234567890", 3),
        ("\ud800x", 4),
    ]
    assert (records, without) == (5, 1)


def test_csv_positions_count_records_not_lines() -> None:
    data = (
        b"user_id,text\n"
        b'a,"two\nlines"\n'  # record 1 spans two lines
        b'b,"say ""hi"", then go"\n'  # record 2
        b"\n"  # a blank line is no record
        b",anonymous\n"  # record 3, no id
        b"a,last\n"  # record 4
    )
    assert entries("csv", data) == ([("a", 1), ("b", 2), ("a", 4)], 4, 1)


def test_csv_composite_key_and_missing_column() -> None:
    data = b"tenant,user_id\nt1,a\nt2,\n"
    assert entries("csv", data, "tenant", "user_id")[0] == [(composite_id(["t1", "a"]), 1)]
    with pytest.raises(Unparseable, match="no column 'uid'"):
        entries("csv", data, "uid")
    with pytest.raises(Unparseable, match="not UTF-8"):
        entries("csv", b"user_id\n\xff\xfe\n")


def _parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=2)
    return sink.getvalue()


def test_parquet_row_index_nested_and_integer_ids() -> None:
    table = pa.table(
        {
            "author": [{"id": "a"}, {"id": None}, None, {"id": "b"}, {"id": "a"}],
            "num": pa.array([1, 2, None, 4, 5], pa.int64()),
        }
    )
    data = _parquet(table)
    assert entries("parquet", data, "$.author.id") == ([("a", 0), ("b", 3), ("a", 4)], 5, 2)
    assert entries("parquet", data, "num")[0] == [("1", 0), ("2", 1), ("4", 3), ("5", 4)]
    with pytest.raises(Unparseable, match="no column 'user_id'"):
        entries("parquet", data)
    with pytest.raises(Unparseable, match="no field 'author.name'"):
        entries("parquet", data, "$.author.name")
    with pytest.raises(Unparseable, match="not a readable Parquet file"):
        entries("parquet", b"PAR1 nonsense")


def test_file_names_and_sidecars() -> None:
    found = index_bytes(mapper("filename"), "in/u-1_x-20230101T000000.csv", "uri", "e", b"")
    assert [(e.user_id, e.location, e.records) for e in found.locations] == [("u-1_x", "uri", None)]
    anonymous = index_bytes(mapper("filename"), "in/nobody.csv", "uri", "e", b"")
    assert anonymous.locations == [] and anonymous.records_without_id == 1
    sidecar = index_bytes(
        mapper("sidecar"), "in/p.jpg.meta.json", "s3://b/in/p.jpg.meta.json", "e",
        json.dumps({"user_ids": ["a", "b", "a"]}).encode(),
    )  # fmt: skip
    assert [(e.user_id, e.location) for e in sidecar.locations] == [
        ("a", "s3://b/in/p.jpg"),
        ("b", "s3://b/in/p.jpg"),
    ]
    for bad in (b"nope", b'{"users": []}', b'{"user_ids": [null]}'):
        with pytest.raises(Unparseable):
            index_bytes(mapper("sidecar"), "in/p.meta.json", "uri", "e", bad)


def test_relational_rows_per_user(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, uid TEXT)")
        conn.executemany("INSERT INTO orders (uid) VALUES (?)", [("a",), ("a",), ("b",), (None,)])
    found = index_relational(RelationalMapper("orders", f"sqlite:///{db}", "orders", "uid", "app"))
    assert sorted((e.user_id, e.location, e.records, e.layer) for e in found.locations) == [
        ("a", "app.orders.uid", 2, "database"),
        ("b", "app.orders.uid", 1, "database"),
    ]
    assert (found.records, found.records_without_id) == (4, 1)
    with pytest.raises(Unparseable, match="cannot read app.missing.uid"):
        index_relational(RelationalMapper("m", f"sqlite:///{db}", "missing", "uid", "app"))
    with pytest.raises(Unparseable, match="must be a database URL"):
        index_relational(RelationalMapper("m", str(tmp_path / "new.db"), "orders", "uid", "app"))
    assert not (tmp_path / "new.db").exists()
    with pytest.raises(Unparseable, match="cannot open the database of m"):
        index_relational(RelationalMapper("m", "nonsense://x", "orders", "uid", "app"))


class ChangingStorage:
    """Wraps a storage; the first ``changes`` reads are followed by a concurrent write."""

    def __init__(self, storage: Storage, changes: int) -> None:
        self._storage = storage
        self.changes = changes
        self.root = storage.root

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)

    def get(self, bucket: str, key: str) -> bytes:
        data = self._storage.get(bucket, key)
        if self.changes > 0:
            self.changes -= 1
            self._storage.put(bucket, key, f'{{"user_id": "w{self.changes}"}}\n'.encode())
        return data


def test_object_changing_while_indexed_is_read_again(service: ErasureIndexService) -> None:
    service.storage.put(B, "in/x.jsonl", b'{"user_id": "old"}\n')
    changing: Any = ChangingStorage(service.storage, changes=1)
    indexed = read_object(changing, mapper("jsonl"), B, "in/x.jsonl")
    assert indexed.entries == [("w0", 1)]
    assert indexed.etag == service.storage.stat(B, "in/x.jsonl").etag
    with pytest.raises(ObjectKeptChanging, match="changed while it was being indexed"):
        read_object(ChangingStorage(service.storage, changes=5), mapper("jsonl"), B, "in/x.jsonl")  # type: ignore[arg-type]


def test_service_dead_letters_bad_objects_and_counts_strays(service: ErasureIndexService) -> None:
    storage = service.storage
    storage.put(B, "in/x.jsonl", b'{"user_id": "a"}\n')
    assert service.index_object(B, "in/x.jsonl") == "indexed"
    storage.put(B, "in/x.jsonl", b'{"user_id": "a"}\nnot json\n')
    assert service.index_object(B, "in/x.jsonl") == "dead_letter"
    # The old content's entries are gone with it: they no longer describe the object.
    assert service.find(["a"])[0].holdings == []
    [letter] = service.status().recent_dead_letters
    assert letter.source == storage.uri(B, "in/x.jsonl") and "line 2: not JSON" in letter.reason
    assert service.index_object(B, "elsewhere/y.jsonl") == "outside"
    assert service.remove_object(B, "elsewhere/y.jsonl") == "outside"
    assert service.index_object(B, "in/gone.jsonl") == "missing"
    assert service.status().counters["ignored_outside_prefixes"] == 2


def test_service_rejects_unusable_ids(service: ErasureIndexService) -> None:
    from lakeward.errors import InvalidRequest

    for bad, message in (([], "at least one"), ([""], "empty"), (["a\x00b"], "NUL"),
                         (["x" * 2000], "longer than")):  # fmt: skip
        with pytest.raises(InvalidRequest, match=message):
            service.find(bad)


def test_mappers_from_the_stack_file(tmp_path: Path) -> None:
    stack = tmp_path / "lakeward.toml"
    stack.write_text(
        '[[erasure.datasets]]\nname = "events"\nprefix = "lakeward-data/events/"\n'
        'format = "csv"\nid_columns = ["tenant", "uid"]\n'
    )
    settings = load_settings(data_dir=tmp_path / "data", config_file=stack, env={})
    service = ErasureIndexService(settings)
    service.storage.ensure_bucket(B)
    service.storage.put(B, "events/e.csv", b"tenant,uid\nt1,u1\nt1,\n")
    assert service.index_object(B, "events/e.csv") == "indexed"
    [found] = service.find([composite_id(["t1", "u1"])])
    assert [h.positions for h in found.holdings] == [(1,)]
    stack.write_text(stack.read_text().replace('"csv"', '"xml"'))
    from lakeward.errors import ConfigError

    with pytest.raises(
        ConfigError, match=r"erasure\.datasets\.0\.format: .*'jsonl'.*lakeward.toml"
    ):
        load_settings(data_dir=tmp_path / "data", config_file=stack, env={})
