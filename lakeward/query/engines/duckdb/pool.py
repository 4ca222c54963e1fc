"""Locked-down DuckDB connections kept open between executions, by what they may read.

Opening a connection and locking it down costs more than a small query. A
connection is locked when it opens (``lock_down``): the directories it may
read, no other file or network access, and no configuration change ever after,
so a connection can only be reused by executions that may read the same
directories under the same limits: that is its key.

A connection goes back to the pool only after an execution that ended
normally, and only once it is clean again: the catalogs its views were created
in detached, the datasets it read unregistered, and nothing left behind that a
query could see (no view, table, macro, sequence, prepared statement or
variable beyond the built-in ones and the macros every connection is given
when it opens, unchanged). Anything else closes it. After SELECTs only (DuckDB's
own parser tells each statement's type; a SELECT makes no view, table, macro,
sequence, prepared statement or variable and attaches no database), cleaning is
detaching the catalogs lakeward attached for its views. The attached databases
are listed, and the catalog for leftovers, only after a statement that was not a
SELECT, or after views were made in a built-in database, which no DETACH
removes: the listings cost more CPU (1.5 ms for the databases, 2-3 ms for the
rest, then 10-30 ms for the functions) than a small query.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from lakeward.errors import QueryFailed
from lakeward.process import is_running
from lakeward.query.engines.base import Limits
from lakeward.query.engines.duckdb.scanned import sql_literal
from lakeward.query.translate.duckdb import FUNCTIONS, MACROS

PER_KEY = 8  # as many as the executions that run at once over the same tables
TOTAL = 32
BUILT_IN_DATABASES = ("memory", "system", "temp")
_LEFTOVERS = """
    SELECT (SELECT count(*) FROM duckdb_views() WHERE NOT internal)
         + (SELECT count(*) FROM duckdb_tables())
         + (SELECT count(*) FROM duckdb_sequences())
         + (SELECT count(*) FROM duckdb_prepared_statements())
         + (SELECT count(*) FROM duckdb_variables())
         + (SELECT count(*) FROM duckdb_databases() WHERE NOT internal
              AND database_name NOT IN ('memory'))
"""
# The functions a query may call beyond DuckDB's own: the macros each connection opens with.
_OWN_FUNCTIONS = """
    SELECT schema_name, function_name, function_type, parameters, parameter_types,
           macro_definition
    FROM duckdb_functions() WHERE NOT internal ORDER BY ALL
"""


@dataclass(frozen=True)
class Key:
    directories: tuple[str, ...]
    limits: Limits


@dataclass
class Connection:
    con: duckdb.DuckDBPyConnection
    key: Key
    spill: Path
    registered: list[str] = field(default_factory=list)  # names of registered datasets
    functions: list[tuple[Any, ...]] = field(default_factory=list)  # as it opened
    # Whether something since it was clean may outlive the DETACH of the catalogs it
    # attached: a statement other than a SELECT (DuckDB's parser tells each one's type; a
    # SELECT makes and drops nothing), or lakeward's views in a built-in database (a
    # catalog named "memory"). Only then is its catalog listed for leftovers.
    unsettled: bool = False
    # The catalogs lakeward attached for its views: detached by name when the connection
    # is settled (listing the attached databases costs more than detaching them).
    attached: set[str] = field(default_factory=set)

    def ran(self, sql: str) -> None:
        """Note a statement that is about to run on it and is not lakeward's own set-up."""
        kinds = statement_kinds(self.con, sql)
        if not kinds or any(kind != duckdb.StatementType.SELECT for kind in kinds):
            self.unsettled = True

    def attaching(self, catalog: str) -> None:
        """Note a catalog that lakeward's set-up is about to make views in."""
        if catalog.lower() in BUILT_IN_DATABASES:  # not detached: its views would stay
            self.unsettled = True
        else:
            self.attached.add(catalog)


def statement_kinds(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[Any, ...]:
    """The type of each statement in ``sql``, as DuckDB's parser tells (kept per text);
    none if it does not parse."""
    with _kinds_lock:
        kinds = _kinds.get(sql)
    if kinds is None:
        try:
            kinds = tuple(statement.type for statement in con.extract_statements(sql))
        except duckdb.Error:
            kinds = ()
        with _kinds_lock:
            _kinds[sql] = kinds
            while len(_kinds) > _KINDS_KEPT:
                _kinds.popitem(last=False)
    return kinds


# Dashboards and tools send the same texts again and again: each is parsed once.
_KINDS_KEPT = 1024
_kinds: OrderedDict[str, tuple[Any, ...]] = OrderedDict()
_kinds_lock = threading.Lock()


class ConnectionPool:
    def __init__(self, per_key: int = PER_KEY, total: int = TOTAL) -> None:
        self.per_key = per_key
        self.total = total
        self._idle: OrderedDict[Key, list[Connection]] = OrderedDict()
        self._count = 0
        self._serial = itertools.count()
        self._lock = threading.Lock()

    def take(self, directories: list[str], limits: Limits) -> Connection:
        """A locked-down connection that may read ``directories`` only: pooled, or new."""
        key = Key(tuple(sorted(set(directories))), limits)
        with self._lock:
            idle = self._idle.get(key)
            if idle:
                self._count -= 1
                self._idle.move_to_end(key)
                return idle.pop()
        return self._open(key)

    def give(self, connection: Connection) -> None:
        """Back to the pool once clean; closed if it cannot be made clean or there is no room."""
        if not _clean(connection):
            close(connection)
            return
        evicted: list[Connection] = []
        with self._lock:
            idle = self._idle.setdefault(connection.key, [])
            if len(idle) >= self.per_key:
                evicted.append(connection)
            else:
                idle.append(connection)
                self._idle.move_to_end(connection.key)
                self._count += 1
                while self._count > self.total:  # the least recently used key's first
                    oldest = next(pooled for pooled in self._idle.values() if pooled)
                    evicted.append(oldest.pop(0))
                    self._count -= 1
        for extra in evicted:
            close(extra)

    def close(self) -> None:
        with self._lock:
            idle = [c for pooled in self._idle.values() for c in pooled]
            self._idle.clear()
            self._count = 0
        for connection in idle:
            close(connection)

    def _open(self, key: Key) -> Connection:
        name = f"duckdb-{os.getpid()}-{id(self):x}-{next(self._serial)}"
        if key.limits.spill_directory:
            sweep_orphan_spills(Path(key.limits.spill_directory), "duckdb-")
            spill = Path(key.limits.spill_directory) / name
            spill.mkdir(parents=True, exist_ok=True)
        else:
            sweep_orphan_spills(Path(tempfile.gettempdir()), "lakeward-spill-duckdb-")
            spill = Path(tempfile.mkdtemp(prefix=f"lakeward-spill-{name}-"))
        config: dict[str, str | bool | int | float | list[str]] = {
            "memory_limit": key.limits.memory_limit,
            "temp_directory": str(spill),
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "python_enable_replacements": False,  # no reading Python variables by name
        }
        if key.limits.threads:
            config["threads"] = key.limits.threads
        try:
            con = duckdb.connect(":memory:", config=config)
            lock_down(con, key.directories)
            for macro in MACROS:  # Trino's semantics (query/translate): every query may use them
                con.execute(macro)
            for name, function, parameters, result in FUNCTIONS:
                con.create_function(name, function, [p.lower() for p in parameters], result)
            functions = con.execute(_OWN_FUNCTIONS).fetchall()
        except duckdb.Error as exc:
            shutil.rmtree(spill, ignore_errors=True)
            raise QueryFailed(f"could not start DuckDB: {exc}") from None
        return Connection(con, key, spill, functions=functions)


_swept: set[tuple[Path, str]] = set()
_swept_lock = threading.Lock()


def sweep_orphan_spills(directory: Path, prefix: str) -> None:
    """Remove the spill directories of processes that are gone (killed before they could
    clean up), once per directory and process. A spill directory's name carries the pid
    of the process that made it: ``<prefix><pid>-...``."""
    with _swept_lock:
        if (directory, prefix) in _swept:
            return
        _swept.add((directory, prefix))
    try:
        entries = list(directory.glob(f"{prefix}*"))
    except OSError:
        return
    for entry in entries:
        pid = entry.name.removeprefix(prefix).partition("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not is_running(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def lock_down(con: duckdb.DuckDBPyConnection, directories: tuple[str, ...]) -> None:
    """Restrict the connection before anything else runs on it, views included.

    ``allowed_directories`` match as prefixes: a trailing '/' keeps /lake/t1/
    from also opening /lake/t10/.
    """
    dirs = sorted({d.rstrip("/") + "/" for d in directories})
    con.execute("SET TimeZone = 'UTC'")  # Athena's sessions run in UTC
    con.execute(f"SET allowed_directories = [{', '.join(map(sql_literal, dirs))}]")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def close(connection: Connection) -> None:
    try:
        connection.con.close()
    finally:
        shutil.rmtree(connection.spill, ignore_errors=True)


def _clean(connection: Connection) -> bool:
    """Undo what an execution set up (its catalogs, its datasets); True if nothing is left."""
    con: Any = connection.con
    try:
        for name in connection.registered:
            con.unregister(name)
        connection.registered.clear()
        if connection.unsettled:  # a statement may have attached others
            listed = con.execute("SELECT database_name FROM duckdb_databases() WHERE NOT internal")
            attached = {name for (name,) in listed.fetchall() if name not in BUILT_IN_DATABASES}
        else:
            attached = connection.attached
        for name in attached:
            con.execute(f'DETACH IF EXISTS "{name.replace(chr(34), chr(34) * 2)}"')
        connection.attached.clear()
        if not connection.unsettled:
            return True
        # fetchall, not fetchone: a result read part-way stays open on the connection.
        ((left,),) = con.execute(_LEFTOVERS).fetchall()
        if left != 0 or con.execute(_OWN_FUNCTIONS).fetchall() != connection.functions:
            return False
        connection.unsettled = False
        return True
    except duckdb.Error:
        return False
