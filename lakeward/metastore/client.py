"""A Hive Metastore client over Thrift that takes several node URIs.

The metastore is stateless over its database, so any node answers any call.
The client keeps one connection; when a call fails at the transport level it
moves on to the next node and repeats the call, so a dead node costs one
connect timeout, not an error. Errors the metastore itself raises (no such
table, already exists) are not retried.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlparse

from pymetastore.hive_metastore import ThriftHiveMetastore
from pymetastore.hive_metastore import ttypes as hive
from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TException
from thrift.transport import TSocket, TTransport

from lakeward.errors import MetastoreError, TableNotFound

T = TypeVar("T")

# Thrift logs every failed connect at ERROR; a failover is not an error to show.
logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)

PARQUET = {
    "input_format": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    "output_format": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    "serde": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
}


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    comment: str | None = None


@dataclass(frozen=True)
class TableInfo:
    database: str
    name: str
    location: str
    columns: list[Column]
    partition_keys: list[Column] = field(default_factory=list)
    table_type: str = "EXTERNAL_TABLE"
    parameters: dict[str, str] = field(default_factory=dict)
    input_format: str | None = None
    serde: str | None = None


def parse_uris(uris: str | Sequence[str]) -> list[tuple[str, int]]:
    """``thrift://host:port`` URIs (a list or a comma-separated string) to addresses."""
    items = uris.split(",") if isinstance(uris, str) else list(uris)
    addresses = []
    for item in (u.strip() for u in items):
        parsed = urlparse(item)
        if parsed.scheme != "thrift" or not parsed.hostname or not parsed.port:
            raise MetastoreError(f"{item!r} is not a metastore URI like thrift://127.0.0.1:9083")
        addresses.append((parsed.hostname, parsed.port))
    if not addresses:
        raise MetastoreError("no metastore URI given")
    return addresses


class MetastoreClient:
    """Thread-safe client over one or more metastore nodes."""

    def __init__(
        self,
        uris: str | Sequence[str],
        timeout: float = 10.0,
        rounds: int = 3,
        retry_delay: float = 1.0,
    ) -> None:
        self.addresses = parse_uris(uris)
        self.timeout = timeout
        self.rounds = rounds
        self.retry_delay = retry_delay
        self._current = 0
        self._transport: TTransport.TTransportBase | None = None
        self._client: ThriftHiveMetastore.Client | None = None
        self._lock = threading.RLock()

    @property
    def uris(self) -> list[str]:
        return [f"thrift://{host}:{port}" for host, port in self.addresses]

    def __enter__(self) -> MetastoreClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._transport is not None:
                self._transport.close()
            self._transport = self._client = None

    def _connect(self) -> ThriftHiveMetastore.Client:
        host, port = self.addresses[self._current]
        sock = TSocket.TSocket(host, port)
        sock.setTimeout(int(self.timeout * 1000))
        transport = TTransport.TBufferedTransport(sock)
        transport.open()
        self._transport = transport
        self._client = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(transport))
        return self._client

    def call(self, operation: Callable[[ThriftHiveMetastore.Client], T]) -> T:
        """Run ``operation`` on a live node, failing over between nodes."""
        with self._lock:
            failures: list[str] = []
            for attempt in range(self.rounds * len(self.addresses)):
                try:
                    client = self._client or self._connect()
                    return operation(client)
                except (TimeoutError, TTransport.TTransportException, OSError, EOFError) as exc:
                    host, port = self.addresses[self._current]
                    failures.append(f"{host}:{port}: {exc}")
                    self.close()
                    self._current = (self._current + 1) % len(self.addresses)
                    if (attempt + 1) % len(self.addresses) == 0:
                        time.sleep(self.retry_delay)
            raise MetastoreError(
                "no metastore node answered ("
                + "; ".join(dict.fromkeys(failures))
                + "); is the metastore running? try: lakeward metastore status"
            )

    # -- catalog operations -------------------------------------------------

    def ping(self) -> bool:
        try:
            self.call(lambda c: c.get_all_databases())
        except MetastoreError:
            return False
        return True

    def databases(self) -> list[str]:
        return list(self.call(lambda c: c.get_all_databases()))

    def tables(self, database: str) -> list[str]:
        return list(self._checked(lambda c: c.get_all_tables(database), database))

    def create_database(self, name: str, location: str, description: str = "") -> None:
        """Create a database unless it exists."""
        db = hive.Database(name=name, description=description, locationUri=location, parameters={})
        try:
            self.call(lambda c: c.create_database(db))
        except hive.AlreadyExistsException:
            pass
        except TException as exc:
            raise MetastoreError(f"creating database {name}: {_message(exc)}") from None

    def table(self, database: str, name: str) -> TableInfo:
        raw = self._checked(lambda c: c.get_table(database, name), f"{database}.{name}")
        return _table_info(raw)

    def table_exists(self, database: str, name: str) -> bool:
        try:
            self.table(database, name)
        except TableNotFound:
            return False
        return True

    def put_external_table(self, table: TableInfo) -> None:
        """Create the table, or point the existing one at the new location and columns.

        Replacing a table is one ``alter_table`` call, which the metastore
        commits in one database transaction: a reader sees the old definition
        or the new one, never a mix.
        """
        thrift_table = _thrift_table(table)
        if self.table_exists(table.database, table.name):
            self._checked(
                lambda c: c.alter_table(table.database, table.name, thrift_table),
                f"{table.database}.{table.name}",
            )
        else:
            self._checked(lambda c: c.create_table(thrift_table), f"{table.database}.{table.name}")

    def drop_table(self, database: str, name: str) -> None:
        """Drop a table's definition (external data stays in the lake)."""
        self._checked(lambda c: c.drop_table(database, name, False), f"{database}.{name}")

    def _checked(self, operation: Callable[[ThriftHiveMetastore.Client], T], what: str) -> T:
        try:
            return self.call(operation)
        except hive.NoSuchObjectException:
            raise TableNotFound(f"{what} does not exist in the metastore") from None
        except TException as exc:
            raise MetastoreError(f"metastore call on {what} failed: {_message(exc)}") from None


def _message(exc: TException) -> str:
    return str(getattr(exc, "message", None) or exc)


def _thrift_table(table: TableInfo) -> Any:
    columns = [hive.FieldSchema(c.name, c.type, c.comment) for c in table.columns]
    storage = hive.StorageDescriptor(
        cols=columns,
        location=table.location,
        inputFormat=table.input_format or PARQUET["input_format"],
        outputFormat=PARQUET["output_format"],
        compressed=False,
        numBuckets=-1,
        serdeInfo=hive.SerDeInfo(
            serializationLib=table.serde or PARQUET["serde"],
            parameters={"serialization.format": "1"},
        ),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )
    return hive.Table(
        tableName=table.name,
        dbName=table.database,
        owner="lakeward",
        createTime=int(time.time()),
        sd=storage,
        partitionKeys=[hive.FieldSchema(c.name, c.type, c.comment) for c in table.partition_keys],
        parameters={"EXTERNAL": "TRUE", **table.parameters},
        tableType="EXTERNAL_TABLE",
    )


def _table_info(raw: Any) -> TableInfo:
    def columns(items: Any) -> list[Column]:
        return [Column(c.name, c.type, c.comment) for c in items or []]

    return TableInfo(
        database=raw.dbName,
        name=raw.tableName,
        location=raw.sd.location,
        columns=columns(raw.sd.cols),
        partition_keys=columns(raw.partitionKeys),
        table_type=raw.tableType,
        parameters=dict(raw.parameters or {}),
        input_format=raw.sd.inputFormat,
        serde=raw.sd.serdeInfo.serializationLib if raw.sd.serdeInfo else None,
    )
