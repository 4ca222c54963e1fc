"""A Hive Metastore client over Thrift that takes several node URIs.

Every call goes through ``Failover`` (node choice, connect and call timeouts,
retries on the next node); reads are repeated freely, and each mutation comes
with a check of whether it was applied, so that a create or alter whose answer
was lost is never applied twice nor reported as failed when it took. Errors
the metastore itself raises (no such table, already exists) are not retried.

An optional metadata cache keeps what the reads return, shared by the clients
of one URI list in the process, for as long as the metastore reports no change:
before serving from it, the client asks for the metastore's current
notification event id (one cheap call) and, when it moved, reads the new events
and forgets exactly the databases and tables they name. lakeward's nodes log
every change in the change's own transaction (``launcher/ChangeLog.java``), so
a change made through any node or client is seen on the next lookup. When the
events cannot be read (a metastore that logs no changes, or a gap in the log)
the whole cache is cleared instead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urlparse

from pymetastore.hive_metastore import ThriftHiveMetastore
from pymetastore.hive_metastore import ttypes as hive
from thrift.Thrift import TException

from lakeward.errors import MetastoreError, TableNotFound
from lakeward.metastore.failover import Check, Failover
from lakeward.metastore.tables import (
    VIRTUAL_VIEW,
    DatabaseInfo,
    PartitionInfo,
    TableInfo,
    table_info,
    thrift_partition,
    thrift_table,
)
from lakeward.storage.paths import file_uri

T = TypeVar("T")


MAX_EVENTS = 1000  # changes read in one catch-up; more than that clears the whole cache

# Thrift logs every failed connect at ERROR; a failover is not an error to show.
logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)


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
    """Thread-safe client over one or more metastore nodes.

    ``connect_timeout`` bounds reaching a node, ``timeout`` one call on it
    (long enough for a slow DDL; a node that died is noticed at once anyway,
    by its closed connection). ``cache`` turns the metadata cache on; it asks
    the metastore for changes before a lookup, at most every ``check_interval``
    seconds (0: before every lookup, so a lookup never returns a definition
    older than the lookup's start). ``max_age`` bounds how long an entry is
    kept even when the log names no change, a backstop for a metastore whose
    log can miss one: Hive 2.3's own numbering of events takes no lock (lakeward's
    listener takes one; a metastore with Hive's listener does not).
    """

    def __init__(
        self,
        uris: str | Sequence[str],
        timeout: float = 30.0,
        rounds: int = 3,
        retry_delay: float = 0.5,
        connect_timeout: float = 1.0,
        cache: bool = False,
        check_interval: float = 0.0,
        max_age: float = 30.0,
    ) -> None:
        self.addresses = parse_uris(uris)
        self.cache = cache
        self.check_interval = check_interval
        self.max_age = max_age
        self._lookup = threading.local()  # whether this thread is inside lookup()
        self._failover = Failover(self.addresses, timeout, connect_timeout, rounds, retry_delay)

    @property
    def uris(self) -> list[str]:
        return [f"thrift://{host}:{port}" for host, port in self.addresses]

    @property
    def current_uri(self) -> str:
        """The node calls go to first (the last one that answered)."""
        return self.uris[self._failover.nodes.preferred]

    @property
    def answered_by(self) -> str | None:
        """The node that answered this thread's last successful call."""
        node = self._failover.answered_by()
        return None if node is None else self.uris[node]

    def __enter__(self) -> MetastoreClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._failover.close()

    # -- metadata cache -----------------------------------------------------

    def cached(self, key: tuple[str, ...], load: Callable[[], T]) -> T:
        """``load()``, or what it returned before if the metastore changed nothing of it since."""
        if not self.cache:
            return load()
        if not getattr(self._lookup, "active", False):
            self.catch_up()
        nodes = self._failover.nodes
        now = time.monotonic()
        hit = nodes.cache.get(key)
        if hit is not None and now - hit[0] < self.max_age:
            return hit[1]  # type: ignore[no-any-return]
        generation = nodes.generation
        value = load()
        with nodes.lock:
            if nodes.generation == generation:  # no invalidation since the load began
                nodes.cache[key] = (now, value)
        return value

    @contextmanager
    def lookup(self) -> Iterator[None]:
        """Several cached reads that ask the metastore for its changes once, at the start."""
        if getattr(self._lookup, "active", False) or not self.cache:
            yield
            return
        self.catch_up()
        self._lookup.active = True
        try:
            yield
        finally:
            self._lookup.active = False

    def catch_up(self) -> None:
        """Forget what changed in the metastore since the last look."""
        nodes = self._failover.nodes
        now = time.monotonic()
        if now - nodes.checked_at < self.check_interval:
            return
        nodes.checked_at = now
        seen = nodes.event_id
        try:
            current = self._failover.read("get_current_notificationEventId").eventId
            if current == 0:  # a metastore that logs no changes: nothing can be trusted
                self._forget_all(None)
                return
            if seen is None or current < seen:  # first look, or another metastore database
                self._forget_all(current)
                return
            if current == seen:
                return
            request = hive.NotificationEventRequest(lastEvent=seen, maxEvents=MAX_EVENTS)
            events = self._failover.read("get_next_notification", request).events or []
        except (TException, MetastoreError):
            self._forget_all(None)
            return
        ids = [e.eventId for e in events]
        if not ids or ids != list(range(seen + 1, seen + 1 + len(ids))) or ids[-1] < current:
            self._forget_all(current)  # a gap (events cleaned up, or too many to read)
            return
        for event in events:
            self._forget(event.dbName, event.tableName)
        with nodes.lock:
            nodes.event_id = max(nodes.event_id or 0, ids[-1])

    def _forget_all(self, event_id: int | None) -> None:
        nodes = self._failover.nodes
        with nodes.lock:
            nodes.generation += 1
            nodes.cache.clear()
            nodes.event_id = event_id if event_id is None else max(nodes.event_id or 0, event_id)

    def _forget(self, database: str | None, table: str | None) -> None:
        """Forget what one change event names: a table's entries, or a database's."""
        if not database:
            self._forget_all(self._failover.nodes.event_id)
            return
        # A table's change leaves the list of databases as it was; a database's does not.
        self._drop(database, table, databases_list=table is None)

    def _drop(self, database: str, table: str | None, *, databases_list: bool) -> None:
        """Forget a database's entries (or one table's), and the list of databases if asked."""
        database, table = database.lower(), table.lower() if table else None
        nodes = self._failover.nodes
        with nodes.lock:
            nodes.generation += 1
            for key in list(nodes.cache):
                if key[0] == "databases":
                    affected = databases_list
                else:
                    affected = key[1].lower() == database and (
                        table is None or len(key) == 2 or key[2].lower() == table
                    )
                if affected:
                    del nodes.cache[key]

    def invalidate(self, database: str | None = None, table: str | None = None) -> None:
        """Forget cached metadata: all of it, a database's, or one table's."""
        if database is None:
            self._forget_all(self._failover.nodes.event_id)
            return
        self._drop(database, table, databases_list=True)

    # -- reads ----------------------------------------------------------------

    def ping(self) -> bool:
        try:
            self._failover.read("get_all_databases")
        except MetastoreError:
            return False
        return True

    def databases(self) -> list[str]:
        return self.cached(("databases",), lambda: list(self._failover.read("get_all_databases")))

    def tables(self, database: str) -> list[str]:
        return self.cached(
            ("tables", database),
            lambda: list(self._checked(database, "get_all_tables", database)),
        )

    def table(self, database: str, name: str) -> TableInfo:
        return self.cached(
            ("table", database, name),
            lambda: table_info(self._checked(f"{database}.{name}", "get_table", database, name)),
        )

    def views(self, database: str) -> list[str]:
        """The names of a database's views (tables of type VIRTUAL_VIEW)."""
        return self.cached(
            ("views", database),
            lambda: list(
                self._checked(database, "get_tables_by_type", database, "*", VIRTUAL_VIEW)
            ),
        )

    def table_exists(self, database: str, name: str) -> bool:
        try:
            self.table(database, name)
        except TableNotFound:
            return False
        return True

    def partitions(self, database: str, name: str) -> list[PartitionInfo]:
        """Every partition of a table, with its location."""

        def load() -> list[PartitionInfo]:
            raw = self._checked(f"{database}.{name}", "get_partitions", database, name, -1)
            return [PartitionInfo(list(p.values), p.sd.location) for p in raw]

        return self.cached(("partitions", database, name), load)

    def database(self, name: str) -> DatabaseInfo:
        raw = self._checked(f"database {name}", "get_database", name)
        return DatabaseInfo(
            raw.name, raw.locationUri or "", raw.description or "", dict(raw.parameters or {})
        )

    def partition_names(self, database: str, name: str) -> list[str]:
        """The names of a table's partitions (``k=v/k2=v2``, escaped as Hive does)."""
        return list(self._checked(f"{database}.{name}", "get_partition_names", database, name, -1))

    # -- mutations ------------------------------------------------------------

    def create_database(
        self,
        name: str,
        location: str,
        description: str = "",
        parameters: dict[str, str] | None = None,
    ) -> bool:
        """Create a database unless it exists; False if it did."""
        db = hive.Database(
            name=name, description=description, locationUri=location, parameters=parameters or {}
        )
        return self._mutate(
            name, None, "create_database", db, applied=_database_exists(name), exists_ok=True
        )

    def drop_database(self, name: str, cascade: bool = False) -> None:
        """Drop a database (``cascade``: with its tables' definitions; data stays)."""
        exists = _database_exists(name)
        self._mutate(
            name, None, "drop_database", name, False, cascade, applied=lambda c: not exists(c)
        )

    def put_external_table(self, table: TableInfo) -> None:
        """Create the table, or point the existing one at the new location and columns.

        Replacing a table is one ``alter_table`` call, which the metastore
        commits in one database transaction: a reader sees the old definition
        or the new one, never a mix.
        """
        thrift_form = thrift_table(table)
        db, name = table.database, table.name
        try:
            self._failover.read("get_table", db, name)
        except hive.NoSuchObjectException:
            created = self._mutate(
                db, name, "create_table", thrift_form, applied=_holds(table), exists_ok=True
            )
            if created:
                return
            # created meanwhile by another writer: replaced below, as any existing table
        except TException as exc:
            raise MetastoreError(f"metastore call on {db}.{name} failed: {_message(exc)}") from None
        self._mutate(db, name, "alter_table", db, name, thrift_form, applied=_holds(table))

    def create_table(self, table: TableInfo) -> bool:
        """Create a table; False (and nothing changed) if one of that name exists."""
        return self._mutate(
            table.database,
            table.name,
            "create_table",
            thrift_table(table),
            applied=_holds(table),
            exists_ok=True,
        )

    def alter_table(self, table: TableInfo) -> None:
        """Change a table's columns, parameters and SerDe parameters, keeping the rest.

        The metastore's own record is changed (owner, create time, statistics stay)
        and written back in one ``alter_table`` call: one transaction.
        """
        db, name = table.database, table.name
        raw = self._checked(f"{db}.{name}", "get_table", db, name)
        raw.sd.cols = [hive.FieldSchema(c.name, c.type, c.comment) for c in table.columns]
        raw.sd.location = table.location
        raw.parameters = dict(table.parameters)
        if raw.sd.serdeInfo is not None:
            raw.sd.serdeInfo.parameters = dict(table.serde_parameters)
        self._mutate(db, name, "alter_table", db, name, raw, applied=_holds(table))

    def rename_table(self, database: str, name: str, new_database: str, new_name: str) -> None:
        """Give a table (its definition and partitions; data stays where it is) a new name,
        in one ``alter_table`` call: a reader finds it under one name or the other."""
        raw = self._checked(f"{database}.{name}", "get_table", database, name)
        raw.dbName, raw.tableName = new_database, new_name

        def renamed(client: ThriftHiveMetastore.Client) -> bool:
            try:
                client.get_table(new_database, new_name)
            except hive.NoSuchObjectException:
                return False
            return True

        try:
            self._mutate(database, name, "alter_table", database, name, raw, applied=renamed)
        finally:
            self.invalidate(new_database, new_name)

    def put_view(self, view: TableInfo, *, replace: bool) -> None:
        """Create a view, or with ``replace`` change the view of that name (one call each).

        Fails, changing nothing, if a table (or, without ``replace``, a view) holds the name.
        """
        db, name = view.database, view.name
        thrift_view = thrift_table(view)

        def holds(client: ThriftHiveMetastore.Client) -> bool:
            try:
                stored = client.get_table(db, name)
            except hive.NoSuchObjectException:
                return False
            return bool(stored.viewOriginalText == view.view_original_text)

        try:
            existing = table_info(self._failover.read("get_table", db, name))
        except hive.NoSuchObjectException:
            existing = None
        except TException as exc:
            raise MetastoreError(f"metastore call on {db}.{name} failed: {_message(exc)}") from None
        if existing is None:
            self._mutate(db, name, "create_table", thrift_view, applied=holds)
        elif existing.table_type != VIRTUAL_VIEW:
            raise MetastoreError(f"a table named {db}.{name} exists already")
        elif not replace:
            raise MetastoreError(f"view {db}.{name} exists already")
        else:
            self._mutate(db, name, "alter_table", db, name, thrift_view, applied=holds)

    def drop_table(self, database: str, name: str) -> None:
        """Drop a table's definition (external data stays in the lake)."""

        def gone(client: ThriftHiveMetastore.Client) -> bool:
            try:
                client.get_table(database, name)
            except hive.NoSuchObjectException:
                return True
            return False

        self._mutate(database, name, "drop_table", database, name, False, applied=gone)

    def add_partitions(self, database: str, name: str, partitions: list[PartitionInfo]) -> None:
        """Register partitions of a table (one metastore transaction: all or none)."""
        table = self._checked(f"{database}.{name}", "get_table", database, name)
        parts = [thrift_partition(table, p) for p in partitions]

        def present(client: ThriftHiveMetastore.Client) -> bool:
            stored = {
                tuple(p.values): p.sd.location for p in client.get_partitions(database, name, -1)
            }
            return all(_same_location(stored.get(tuple(p.values)), p.location) for p in partitions)

        self._mutate(database, name, "add_partitions", parts, applied=present)

    def move_partition(self, database: str, name: str, partition: PartitionInfo) -> None:
        """Point an existing partition (``partition.values``) at ``partition.location``."""
        what = f"{database}.{name}"
        raw = self._checked(what, "get_partition", database, name, list(partition.values))
        raw.sd.location = partition.location

        def moved(client: ThriftHiveMetastore.Client) -> bool:
            stored = client.get_partition(database, name, list(partition.values))
            return _same_location(stored.sd.location, partition.location)

        self._mutate(database, name, "alter_partition", database, name, raw, applied=moved)

    def drop_partitions(self, database: str, name: str, names: list[str]) -> None:
        """Drop partitions by name (``k=v/k2=v2``) in one metastore transaction; data stays."""
        if not names:
            return
        request = hive.DropPartitionsRequest(
            dbName=database,
            tblName=name,
            parts=hive.RequestPartsSpec(names=list(names)),
            deleteData=False,
            ifExists=False,
            needResult=False,
        )

        def gone(client: ThriftHiveMetastore.Client) -> bool:
            return not set(names) & set(client.get_partition_names(database, name, -1))

        self._mutate(database, name, "drop_partitions_req", request, applied=gone)

    # -- the metastore's own calls (Glue's API works in its objects) -----------

    def raw_read(self, method: str, *args: Any) -> Any:
        """A Thrift read, failing over; the metastore's own exceptions pass through."""
        return self._failover.read(method, *args)

    def raw_mutate(
        self, database: str, table: str | None, method: str, *args: Any, applied: Check
    ) -> Any:
        """A Thrift mutation, with ``applied`` telling whether a call whose answer was lost
        took; the metastore's own exceptions pass through. The cache forgets the table."""
        try:
            return self._failover.mutate(method, *args, applied=applied)
        finally:
            self.invalidate(database, table)

    # -- plumbing -------------------------------------------------------------

    def _mutate(
        self,
        database: str,
        table: str | None,
        method: str,
        *args: Any,
        applied: Check,
        exists_ok: bool = False,
    ) -> bool:
        """Run a mutation; False if it creates what exists already and ``exists_ok``."""
        what = database if table is None else f"{database}.{table}"
        try:
            self._failover.mutate(method, *args, applied=applied)
        except hive.AlreadyExistsException as exc:
            if exists_ok:
                return False
            raise MetastoreError(f"{method} of {what} failed: {_message(exc)}") from None
        except hive.NoSuchObjectException:
            raise TableNotFound(f"{what} does not exist in the metastore") from None
        except TException as exc:
            raise MetastoreError(f"{method} of {what} failed: {_message(exc)}") from None
        finally:
            self.invalidate(database, table)
        return True

    def _checked(self, what: str, method: str, *args: Any) -> Any:
        try:
            return self._failover.read(method, *args)
        except hive.NoSuchObjectException:
            raise TableNotFound(f"{what} does not exist in the metastore") from None
        except TException as exc:
            raise MetastoreError(f"metastore call on {what} failed: {_message(exc)}") from None


def _database_exists(name: str) -> Check:
    def exists(client: ThriftHiveMetastore.Client) -> bool:
        try:
            client.get_database(name)
        except hive.NoSuchObjectException:
            return False
        return True

    return exists


def _holds(table: TableInfo) -> Check:
    """Whether the metastore's table is ``table`` as we wrote it (what a lost create/alter did)."""

    def check(client: ThriftHiveMetastore.Client) -> bool:
        try:
            stored = table_info(client.get_table(table.database, table.name))
        except hive.NoSuchObjectException:
            return False
        return (
            _same_location(stored.location, table.location)
            and [(c.name, c.type) for c in stored.columns]
            == [(c.name, c.type) for c in table.columns]
            and [c.name for c in stored.partition_keys] == [c.name for c in table.partition_keys]
            and table.parameters.items() <= stored.parameters.items()
        )

    return check


def _same_location(stored: str | None, ours: str) -> bool:
    """The metastore stores ``file:///x`` as ``file:/x``; compare the two as one."""

    return stored is not None and file_uri(stored.rstrip("/")) == file_uri(ours.rstrip("/"))


def _message(exc: TException) -> str:
    return str(getattr(exc, "message", None) or exc)
