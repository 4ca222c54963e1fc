"""``lakeward demo-data gdpr``: a generated multi-user lake to index, find and purge.

Deterministic: the same seed and size give the same bytes in every object (gzip
members carry no timestamp; Parquet is written by the same pyarrow). Written
through the stack's storage into ``<data bucket>/<prefix>/``:

* ``reviews/jsonl/year=YYYY/month=MM/day=DD/part-00000.jsonl`` -- product
  reviews as JSON lines (``user_id`` 22-character ids, ``review_id``,
  ``business_id``, ``stars``, ``votes`` {useful, funny, cool}, ``helpfulness``
  (2 decimals), ``text``, ``date``); about one review in 200 is anonymous (no
  ``user_id``);
* ``reviews/csv/...part-00000.csv`` -- the same records as CSV (``votes``
  flattened; some texts hold quotes, commas and newlines);
* ``reviews/parquet/...part-00000.parquet`` -- the same records with a
  ``timestamp[us]`` date, a ``decimal128(5, 2)`` helpfulness and a ``votes``
  struct;
* with ``gzip``: ``reviews/jsonl-gz/...jsonl.gz`` and ``reviews/csv-gz/...csv.gz``;
* ``clickstream/<user_id>-<YYYYMMDDTHHMMSS>.csv`` -- one user per object
  (plus ``unattributed.csv``, which names nobody);
* ``media/photo-NNNNN.jpg`` with ``photo-NNNNN.jpg.meta.json`` sidecars;
* a relational database (SQLite in ``<data dir>/erasure/demo-app.db``, or any
  SQLAlchemy URL) with ``user_profiles`` and ``orders`` (guest orders have no
  user id).

Every dataset is registered in the index database as indexed.
Records are generated a day partition at a time, so memory stays flat at any size.
"""

from __future__ import annotations

import base64
import csv
import gzip
import io
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import (
    Column,
    DateTime,
    Integer,
    MetaData,
    Numeric,
    String,
    Table,
    insert,
)
from sqlalchemy.engine import Connection

from lakeward.config import Settings
from lakeward.erasure.mappers import DatasetMapper, RelationalMapper
from lakeward.erasure.service import ErasureIndexService
from lakeward.errors import InvalidRequest
from lakeward.progress import Progress
from lakeward.sqlstate import open_engine
from lakeward.storage import Storage

FIRST_DAY = date(2023, 1, 1)
RECORDS_PER_DAY = 500  # below this many records, fewer (but at least 3) day partitions
MAX_DAYS = 1000
ANONYMOUS_RATE = 0.005
# Plain words, plus what CSV and JSON writers must escape: quotes, commas, tabs, non-ASCII.
_WORDS = (
    "great", "service", "food", "friendly", "staff", "slow", "price", "value", "coffee",
    "pizza", "back", "again", "never", "recommend", "amazing", "terrible", "ok", "clean",
    "dirty", "parking", "wait", "minutes", "table", "order", "fresh", "naïve", "café",
    "crème", "brûlée", "'quoted'", '"double"', "comma,", "semi;", "tab\tend",
)  # fmt: skip
REVIEW_COLUMNS = ["user_id", "review_id", "business_id", "stars", "useful", "funny", "cool",
                  "helpfulness", "text", "date"]  # fmt: skip
PARQUET_SCHEMA = pa.schema(
    [
        ("user_id", pa.string()),
        ("review_id", pa.string()),
        ("business_id", pa.string()),
        ("stars", pa.int8()),
        (
            "votes",
            pa.struct([("useful", pa.int32()), ("funny", pa.int32()), ("cool", pa.int32())]),
        ),  # fmt: skip
        ("helpfulness", pa.decimal128(5, 2)),
        ("text", pa.string()),
        ("date", pa.timestamp("us")),
    ]
)


@dataclass
class DemoReport:
    records: int = 0
    records_without_id: int = 0
    users: int = 0
    objects: dict[str, int] = field(default_factory=dict)
    bytes_written: int = 0
    relational_rows: dict[str, int] = field(default_factory=dict)
    datasets: list[str] = field(default_factory=list)
    database_url: str = ""


def _ident(rng: random.Random) -> str:
    """A 22-character URL-safe id, like the review datasets' (128 random bits)."""
    return base64.urlsafe_b64encode(rng.randbytes(16)).decode("ascii")[:22]


@dataclass(frozen=True)
class DemoLayout:
    bucket: str
    prefix: str  # key prefix ending in "/"

    def key(self, dataset: str, rest: str) -> str:
        return f"{self.prefix}{dataset}/{rest}"

    def mappers(self, gzipped: bool, database_url: str) -> list[DatasetMapper | RelationalMapper]:
        """The data mappers of the generated datasets, named after the prefix."""
        base = self.prefix.strip("/").replace("/", "_") or "demo"
        # (sub-prefix, format, compression, id column)
        datasets = [
            ("reviews/jsonl/", "jsonl", "none", "$.user_id"),
            ("reviews/csv/", "csv", "none", "user_id"),
            ("reviews/parquet/", "parquet", "none", "user_id"),
            ("clickstream/", "filename", "none", "user_id"),
            ("media/", "sidecar", "none", "user_ids"),
        ]
        if gzipped:
            datasets += [
                ("reviews/jsonl-gz/", "jsonl", "gzip", "$.user_id"),
                ("reviews/csv-gz/", "csv", "gzip", "user_id"),
            ]
        found: list[DatasetMapper | RelationalMapper] = []
        for sub, fmt, compression, id_column in datasets:
            name = f"{base}_" + sub.strip("/").replace("/", "_").replace("-", "_")
            prefix = self.prefix + sub
            found.append(DatasetMapper(name, self.bucket, prefix, fmt, compression, (id_column,)))
        for table in ("user_profiles", "orders"):
            name = f"{base}_{table}"
            found.append(RelationalMapper(name, database_url, table, "user_id", f"{base}_app"))
        return found


def default_database_url(settings: Settings) -> str:
    path = settings.data_dir / "erasure" / "demo-app.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


class DemoGenerator:
    """Writes the demo lake; ``run`` returns what was written."""

    def __init__(self, storage: Storage, layout: DemoLayout, records: int, seed: int,
                 gzipped: bool = False) -> None:  # fmt: skip
        if records < 1:
            raise InvalidRequest(f"--records must be at least 1, not {records}")
        self.storage = storage
        self.layout = layout
        self.records = records
        self.seed = seed
        self.gzipped = gzipped
        rng = random.Random(f"{seed}:ids")
        self.users = [_ident(rng) for _ in range(max(20, records // 25))]
        self.businesses = [_ident(rng) for _ in range(max(10, records // 100))]
        self.report = DemoReport(users=len(self.users))

    def run(self, progress: Progress) -> DemoReport:
        self.storage.ensure_bucket(self.layout.bucket)
        days = max(3, min(MAX_DAYS, self.records // RECORDS_PER_DAY))
        with progress.step("writing reviews", total=days) as step:
            for day in range(days):
                count = self.records // days + (1 if day < self.records % days else 0)
                self._write_day(FIRST_DAY + timedelta(days=day), day, count)
                step.advance()
        self._write_clickstream()
        self._write_media()
        return self.report

    def _put(self, dataset: str, key: str, data: bytes) -> None:
        self.storage.put(self.layout.bucket, key, data)
        self.report.objects[dataset] = self.report.objects.get(dataset, 0) + 1
        self.report.bytes_written += len(data)

    def _reviews(self, day: date, index: int, count: int) -> Iterator[list[object]]:
        rng = random.Random(f"{self.seed}:day:{index}")
        # rng.random() scaled, not randint/choice: a third of the time at tens of millions.
        draw = rng.random
        start = datetime(day.year, day.month, day.day)
        users, businesses = self.users, self.businesses
        n_users, n_businesses, n_words = len(users), len(businesses), len(_WORDS)
        for _ in range(count):
            anonymous = draw() < ANONYMOUS_RATE
            # Skewed: a few users write many reviews, most write one or two.
            user = None if anonymous else users[int(n_users * draw() ** 2)]
            words = [_WORDS[int(n_words * draw())] for _ in range(3 + int(10 * draw()))]
            if draw() < 0.02:
                words.insert(int(len(words) * draw()), "\nsecond line")
            yield [
                user, _ident(rng), businesses[int(n_businesses * draw())], 1 + int(5 * draw()),
                int(21 * draw()), int(6 * draw()), int(6 * draw()),
                f"{int(10000 * draw()) / 100:.2f}", " ".join(words),
                start + timedelta(seconds=int(86400 * draw())),
            ]  # fmt: skip

    def _write_day(self, day: date, index: int, count: int) -> None:
        rows = list(self._reviews(day, index, count))
        self.report.records += len(rows)
        self.report.records_without_id += sum(1 for r in rows if r[0] is None)
        part = f"year={day.year}/month={day.month:02d}/day={day.day:02d}/part-00000"
        jsonl = _jsonl(rows)
        text = _csv(rows)
        self._put("reviews/jsonl", self.layout.key("reviews/jsonl", part + ".jsonl"), jsonl)
        self._put("reviews/csv", self.layout.key("reviews/csv", part + ".csv"), text)
        self._put("reviews/parquet", self.layout.key("reviews/parquet", part + ".parquet"),
                  _parquet(rows))  # fmt: skip
        if self.gzipped:
            self._put("reviews/jsonl-gz", self.layout.key("reviews/jsonl-gz", part + ".jsonl.gz"),
                      gzip.compress(jsonl, 6, mtime=0))  # fmt: skip
            self._put("reviews/csv-gz", self.layout.key("reviews/csv-gz", part + ".csv.gz"),
                      gzip.compress(text, 6, mtime=0))  # fmt: skip

    def _write_clickstream(self) -> None:
        rng = random.Random(f"{self.seed}:clickstream")
        objects = min(2000, max(10, self.records // 200))
        pages = ("/", "/search", "/biz", "/review/new", "/account", "/checkout")
        for _ in range(objects):
            user = rng.choice(self.users)
            moment = datetime(2023, 1, 1) + timedelta(seconds=rng.randrange(365 * 86400))
            lines = ["ts,page,action"]
            for step in range(rng.randint(3, 10)):
                at = moment + timedelta(seconds=step * rng.randint(1, 90))
                lines.append(f"{at:%Y-%m-%dT%H:%M:%S},{rng.choice(pages)},view")
            key = self.layout.key("clickstream", f"{user}-{moment:%Y%m%dT%H%M%S}.csv")
            self._put("clickstream", key, ("\n".join(lines) + "\n").encode())
        self._put("clickstream", self.layout.key("clickstream", "unattributed.csv"),
                  b"ts,page,action\n2023-01-01T00:00:00,/,view\n")  # fmt: skip

    def _write_media(self) -> None:
        rng = random.Random(f"{self.seed}:media")
        for number in range(max(3, min(50, self.records // 1000))):
            key = self.layout.key("media", f"photo-{number:05d}.jpg")
            users = sorted(set(rng.sample(self.users, rng.randint(1, 3))))
            self._put("media", key, b"\xff\xd8\xff\xe0" + rng.randbytes(rng.randint(512, 4096)))
            sidecar = {"user_ids": users, "content_type": "image/jpeg"}
            self._put("media", key + ".meta.json", json.dumps(sidecar, indent=1).encode())

    def write_relational(self, database_url: str) -> dict[str, int]:
        """(Re)create ``user_profiles`` and ``orders`` in the database; rows per table."""
        rng = random.Random(f"{self.seed}:relational")
        metadata = MetaData()
        profiles = Table("user_profiles", metadata,
                         Column("user_id", String(64), primary_key=True),
                         Column("display_name", String(64), nullable=False),
                         Column("email", String(128), nullable=False),
                         Column("country", String(2), nullable=False),
                         Column("created_at", DateTime, nullable=False))  # fmt: skip
        orders = Table("orders", metadata,
                       Column("order_id", Integer, primary_key=True),
                       Column("user_id", String(64), index=True),  # NULL: a guest order
                       Column("amount", Numeric(10, 2), nullable=False),
                       Column("ordered_at", DateTime, nullable=False))  # fmt: skip
        engine = open_engine(database_url)
        try:
            with engine.begin() as conn:
                metadata.drop_all(conn)
                metadata.create_all(conn)
                users = [u for u in self.users if rng.random() < 0.8]
                rows = [
                    {"user_id": u, "display_name": f"user {i}", "email": f"user{i}@example.com",
                     "country": rng.choice(("DE", "FR", "US", "BR", "JP")),
                     "created_at": datetime(2022, 1, 1) + timedelta(minutes=rng.randrange(500000))}
                    for i, u in enumerate(users)
                ]  # fmt: skip
                _insert(conn, profiles, rows)
                order_rows = [
                    {"order_id": n + 1,
                     "user_id": None if rng.random() < 0.05 else rng.choice(self.users),
                     "amount": f"{rng.randrange(100, 50000) / 100:.2f}",
                     "ordered_at": datetime(2023, 1, 1) + timedelta(minutes=rng.randrange(500000))}
                    for n in range(max(10, len(self.users)))
                ]  # fmt: skip
                _insert(conn, orders, order_rows)
        finally:
            engine.dispose()
        return {"user_profiles": len(rows), "orders": len(order_rows)}


def _insert(conn: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    for start in range(0, len(rows), 5000):
        conn.execute(insert(table), list(rows[start : start + 5000]))


def _jsonl(rows: list[list[object]]) -> bytes:
    out = io.StringIO()
    for r in rows:
        record: dict[str, object] = {} if r[0] is None else {"user_id": r[0]}
        record.update(review_id=r[1], business_id=r[2], stars=r[3],
                      votes={"useful": r[4], "funny": r[5], "cool": r[6]},
                      helpfulness=float(str(r[7])), text=r[8],
                      date=f"{r[9]:%Y-%m-%d %H:%M:%S}")  # fmt: skip
        out.write(json.dumps(record, ensure_ascii=False))
        out.write("\n")
    return out.getvalue().encode("utf-8")


def _csv(rows: list[list[object]]) -> bytes:
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(REVIEW_COLUMNS)
    for r in rows:
        writer.writerow(["" if r[0] is None else r[0], *r[1:9], f"{r[9]:%Y-%m-%d %H:%M:%S}"])
    return out.getvalue().encode("utf-8")


def _parquet(rows: list[list[object]]) -> bytes:
    columns = list(zip(*rows, strict=True)) if rows else [()] * 10
    votes = [{"useful": r[4], "funny": r[5], "cool": r[6]} for r in rows]
    table = pa.table(
        [
            pa.array(columns[0], pa.string()),
            pa.array(columns[1], pa.string()),
            pa.array(columns[2], pa.string()),
            pa.array(columns[3], pa.int8()),
            pa.array(votes, PARQUET_SCHEMA.field("votes").type),
            pa.array(columns[7], pa.string()).cast(pa.decimal128(5, 2)),
            pa.array(columns[8], pa.string()),
            pa.array(columns[9], pa.timestamp("us")),
        ],
        schema=PARQUET_SCHEMA,
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="snappy")
    return sink.getvalue()


def generate(
    settings: Settings,
    storage: Storage,
    *,
    records: int,
    seed: int = 0,
    gzipped: bool = False,
    prefix: str = "gdpr/",
    database_url: str | None = None,
    progress: Progress | None = None,
) -> tuple[DemoReport, list[DatasetMapper | RelationalMapper]]:
    """Write the demo lake and database; returns the report and the mappers to register."""
    progress = progress or Progress()
    layout = DemoLayout(settings.lake.data_bucket, prefix.strip("/") + "/")
    generator = DemoGenerator(storage, layout, records, seed, gzipped)
    report = generator.run(progress)
    url = database_url or default_database_url(settings)
    with progress.step("writing the relational tables"):
        report.relational_rows = generator.write_relational(url)
    report.database_url = url
    mappers = layout.mappers(gzipped, url)
    report.datasets = [m.name for m in mappers]
    return report, mappers


def create_demo(
    service: ErasureIndexService,
    *,
    records: int,
    seed: int = 0,
    gzipped: bool = False,
    prefix: str = "gdpr/",
    database_url: str | None = None,
    index: bool = True,
    progress: Progress | None = None,
) -> DemoReport:
    """``lakeward demo-data gdpr``: generate, register the datasets, and (``index``) index them."""
    report, mappers = generate(
        service.settings, service.storage, records=records, seed=seed, gzipped=gzipped,
        prefix=prefix, database_url=database_url, progress=progress,
    )  # fmt: skip
    for mapper in mappers:
        service.register(mapper)
    if index:
        layout_prefix = f"{service.settings.lake.data_bucket}/{prefix.strip('/')}/"
        service.reindex(prefix=layout_prefix, progress=progress)
        service.index_relational(m.name for m in mappers if isinstance(m, RelationalMapper))
    return report
