"""MySQL 8.0.17+ or MariaDB 10.4.13+ behind the metastore.

One backend serves both (``metastore.backend = "mysql"`` or ``"mariadb"``):
the MariaDB JDBC driver (libmariadb-java) speaks to either server, and the
version minimum follows the server actually found.
"""

from __future__ import annotations

from typing import cast

import pymysql  # type: ignore[import-untyped]

from lakeward.errors import MetastoreError
from lakeward.metastore.backends.server import (
    CONNECT_TIMEOUT,
    SCHEMA_LOCK_TIMEOUT,
    Connection,
    Database,
    ServerBackend,
    parse_version,
)


class MysqlBackend(ServerBackend):
    name = "mysql"
    engine = "MySQL"
    default_port = 3306
    jdbc_scheme = "mariadb"
    driver_class = "org.mariadb.jdbc.Driver"
    driver_jar = "mariadb-java-client.jar"
    apt_package = "libmariadb-java"
    table_options = " DEFAULT CHARSET=latin1 COLLATE=latin1_bin"

    def datanucleus_properties(self) -> dict[str, str]:
        return {
            # The MariaDB driver may name its product "MariaDB", which DataNucleus
            # 4.1 does not map to an adapter; MySQL's adapter is right for both.
            "datanucleus.rdbms.datastoreAdapterClassName": MYSQL_ADAPTER,
            # Tables in latin1, as Hive's own MySQL schema scripts make them: the
            # mapping's widest VARCHARs (32672) and indexed keys exceed what
            # utf8mb4's four bytes a character allow.
            "datanucleus.rdbms.mysql.characterSet": "latin1",
        }

    def jdbc_url(self) -> str:
        # The driver names a MariaDB server "MariaDB", a product Hive 2.3 does not know:
        # its lock calls (Iceberg's commits) refuse it, and its direct SQL falls back to
        # slower JDO queries. Both are right with MySQL's dialect, so report that.
        return f"{super().jdbc_url()}?useMysqlMetadata=true"

    def _connect(self, database: Database) -> Connection:
        connection = pymysql.connect(
            host=database.host,
            port=database.port,
            user=database.user,
            password=database.password or "",
            database=database.name,
            connect_timeout=CONNECT_TIMEOUT,
            autocommit=True,
        )
        return cast(Connection, connection)

    def _driver_errors(self) -> tuple[type[Exception], ...]:
        return (pymysql.err.OperationalError, pymysql.err.InternalError)

    def _server_version(self, connection: Connection) -> tuple[str, tuple[int, ...]]:
        cursor = connection.cursor()
        cursor.execute("SELECT VERSION()")
        text = str(cursor.fetchone()[0])
        return ("MariaDB" if "mariadb" in text.lower() else "MySQL"), parse_version(text)

    def _minimum_versions(self) -> dict[str, tuple[int, ...]]:
        return {"MySQL": (8, 0, 17), "MariaDB": (10, 4, 13)}

    def _lock_name(self) -> str:
        # GET_LOCK names are server-wide (64 characters at most): include the database.
        return f"lakeward.metastore.{self.database.name}"[:64]

    def _lock(self, connection: Connection) -> None:
        cursor = connection.cursor()
        cursor.execute("SELECT GET_LOCK(%s, %s)", (self._lock_name(), SCHEMA_LOCK_TIMEOUT))
        if cursor.fetchone()[0] != 1:
            raise MetastoreError(
                f"another metastore node held the schema lock of {self.database.describe()} "
                f"for {SCHEMA_LOCK_TIMEOUT} s; is a schema creation stuck?"
            )

    def _unlock(self, connection: Connection) -> None:
        connection.cursor().execute("SELECT RELEASE_LOCK(%s)", (self._lock_name(),))

    def _tables(self, connection: Connection) -> set[str]:
        cursor = connection.cursor()
        cursor.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()"
        )
        return {row[0] for row in cursor.fetchall()}

    def quote(self, identifier: str) -> str:
        return f"`{identifier}`"


class MariadbBackend(MysqlBackend):
    name = "mariadb"
    engine = "MariaDB"


MYSQL_ADAPTER = "org.datanucleus.store.rdbms.adapter.MySQLAdapter"
