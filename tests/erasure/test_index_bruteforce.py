"""The index agrees with a brute-force scan of a generated lake, for every user and format.

The scan reads the files on disk with other readers than the indexers: plain
line splitting for JSON lines, DuckDB for CSV and Parquet, the database's own
driver for the relational tables. Run with the index (and the relational
tables) on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from lakeward.config import load_settings
from lakeward.erasure import DatasetMapper, ErasureIndexService
from lakeward.erasure.demo import create_demo
from tests.helpers import PG_SERVER

# user id -> {(location, positions or a record count)}
Expected = dict[str, set[tuple[str, object]]]

ODD_IDS = [
    "o'brien\"x",
    "名前ユーザー",
    "../../etc/passwd",
    "a\\b",
    "x'; DROP TABLE erasure_records; --",
    "%",
    "_",
]


class Lake:
    def __init__(self, service: ErasureIndexService, root: Path, db: str) -> None:
        self.service = service
        self.root = root  # the data bucket's directory
        self.uri = service.storage.uri(service.settings.lake.data_bucket)
        self.db = db  # sqlite path or PostgreSQL database name of the relational tables


@pytest.fixture(scope="module")
def lake(
    request: pytest.FixtureRequest,
    db_backend: str,
    service_db: str | None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Lake]:
    data_dir = tmp_path_factory.mktemp(f"lake-{db_backend}")
    overrides: dict[str, object] = {}
    database_url = service_db
    db = str(data_dir / "erasure" / "demo-app.db")
    if service_db is not None:
        db = request.getfixturevalue("postgres_db")
        overrides["erasure.database_url"] = service_db
    settings = load_settings(data_dir=data_dir, env={}, overrides=overrides)
    service = ErasureIndexService(settings)
    create_demo(service, records=2500, seed=11, gzipped=True, database_url=database_url)
    # Odd ids are data: a nested-id dataset holding them, indexed like any other.
    mapper = DatasetMapper("odd", "lakeward-data", "odd/", "jsonl", "auto", ("$.account.id",))
    service.register(mapper)
    lines = [json.dumps({"account": {"id": odd}, "n": i}) for i, odd in enumerate(ODD_IDS)]
    service.storage.put("lakeward-data", "odd/part-0.jsonl", "\n".join(lines).encode())
    assert service.index_object("lakeward-data", "odd/part-0.jsonl") == "indexed"
    yield Lake(service, data_dir / "lake" / "lakeward-data", db)
    service.close()


def _add(expected: Expected, user: object, location: str, what: object) -> None:
    if isinstance(user, str) and user:
        expected[user].add((location, what))


def _positions(ids: list[tuple[object, int]]) -> dict[str, tuple[int, ...]]:
    found: dict[str, list[int]] = defaultdict(list)
    for user, position in ids:
        if isinstance(user, str) and user:
            found[user].append(position)
    return {u: tuple(p) for u, p in found.items()}


def brute_force(lake: Lake) -> tuple[Expected, dict[str, int]]:
    """Every user's locations, and the records without id per object, read from the files."""
    expected: Expected = defaultdict(set)
    without_id: dict[str, int] = {}
    for path in sorted(lake.root.rglob("*")):
        if not path.is_file():
            continue
        uri = f"{lake.uri}/{path.relative_to(lake.root).as_posix()}"
        name = path.name
        ids: list[tuple[object, int]] = []
        if name.endswith((".jsonl", ".jsonl.gz")):
            data = gzip.decompress(path.read_bytes()) if name.endswith(".gz") else path.read_bytes()
            for number, line in enumerate(data.split(b"\n"), start=1):
                if line.strip():
                    record = json.loads(line)
                    user = (
                        record.get("user_id")
                        if "account" not in record
                        else record["account"]["id"]
                    )
                    ids.append((user, number))
        elif name.endswith((".csv", ".csv.gz")) and "/reviews/" in uri:
            rows = duckdb.sql(
                f"SELECT user_id FROM read_csv('{path}', header=true, all_varchar=true)"
            ).fetchall()
            ids = [(row[0], number) for number, row in enumerate(rows, start=1)]
        elif name.endswith(".parquet"):
            rows = duckdb.sql(
                f"SELECT user_id, file_row_number FROM read_parquet('{path}', file_row_number=true)"
            ).fetchall()
            ids = [(user, int(row)) for user, row in rows]
        elif "/clickstream/" in uri:
            match = re.fullmatch(r"(.+)-(\d{8}T\d{6})\.csv", name)
            without_id[uri] = 0 if match else 1
            if match:
                _add(expected, match.group(1), uri, None)
            continue
        elif name.endswith(".meta.json"):
            for user in json.loads(path.read_bytes())["user_ids"]:
                _add(expected, user, uri.removesuffix(".meta.json"), None)
            without_id[uri] = 0
            continue
        else:
            continue  # media content: described by its sidecar
        without_id[uri] = sum(1 for user, _ in ids if not user)
        for user, positions in _positions(ids).items():
            _add(expected, user, uri, positions)
    for table in ("user_profiles", "orders"):
        sql = f"SELECT user_id, COUNT(*) FROM {table} GROUP BY user_id"
        if lake.db.endswith(".db"):
            with sqlite3.connect(lake.db) as conn:
                counts = conn.execute(sql).fetchall()
        else:
            import psycopg

            with psycopg.connect(PG_SERVER, dbname=lake.db) as conn:
                counts = conn.execute(sql).fetchall()
        location = f"gdpr_app.{table}.user_id"
        without_id[location] = sum(n for user, n in counts if user is None)
        for user, n in counts:
            _add(expected, user, location, n)
    return expected, without_id


def indexed(lake: Lake, users: list[str]) -> Expected:
    found: Expected = defaultdict(set)
    for findings in lake.service.find(users):
        for h in findings.holdings:
            what: object = h.positions if h.positions else h.records
            if h.positions:
                assert h.records == len(h.positions)
            found[findings.user_id].add((h.location, what))
    return found


def test_every_user_is_indexed_exactly_where_a_scan_finds_them(lake: Lake) -> None:
    expected, _ = brute_force(lake)
    users = sorted(set(expected) | set(lake.service.store.users()))
    assert len(users) > 100
    found = indexed(lake, users)
    for user in users:
        assert found.get(user, set()) == expected.get(user, set()), user
    # Every format and layer took part.
    locations = {loc for entries in expected.values() for loc, _ in entries}
    parts = "/reviews/jsonl/ /reviews/jsonl-gz/ /reviews/csv/ /reviews/csv-gz/ /reviews/parquet/"
    parts += " /clickstream/ /media/ user_profiles orders"
    for part in parts.split():
        assert any(part in loc for loc in locations), part


def test_odd_ids_are_data(lake: Lake) -> None:
    found = {f.user_id: f for f in lake.service.find(ODD_IDS)}
    for position, odd in enumerate(ODD_IDS, start=1):
        [holding] = found[odd].holdings
        assert holding.location.endswith("/odd/part-0.jsonl")
        assert holding.positions == (position,)
    # LIKE wildcards and prefixes match nothing but themselves.
    assert lake.service.find(["%o'brien%", "名前"])[0].holdings == []
    assert not (lake.root.parent.parent / "etc").exists()


def test_records_without_id_are_counted_per_object(lake: Lake) -> None:
    _, without_id = brute_force(lake)
    counted = {row.uri: row.records_without_id for row in lake.service.store.objects()}
    for location, count in without_id.items():
        assert counted[location] == count, location
    assert sum(without_id.values()) > 0
    assert lake.service.status().records_without_id == sum(counted.values())


def test_postgres_index_lives_in_its_database(lake: Lake) -> None:
    if lake.db.endswith(".db"):
        assert lake.service.store.dialect == "sqlite"
        return
    import psycopg

    assert lake.service.store.dialect == "postgresql"
    with psycopg.connect(PG_SERVER, dbname=lake.db) as conn:
        count = conn.execute("SELECT count(*) FROM erasure_records").fetchone()
    assert count is not None
    assert count[0] == lake.service.status().record_entries > 0


def test_rebuild_is_resumable_and_stable(lake: Lake) -> None:
    before = lake.service.store.users()
    report = lake.service.reindex(prefix="lakeward-data/gdpr/")
    assert report.objects_indexed == 0  # every object's eTag is the one indexed
    assert report.objects_unchanged > 0
    assert lake.service.store.users() == before
