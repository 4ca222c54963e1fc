"""PostgreSQL 12.3 or newer behind the metastore (JDBC driver: libpostgresql-jdbc-java)."""

from __future__ import annotations

from typing import cast

import psycopg

from lakeward.metastore.backends.server import (
    CONNECT_TIMEOUT,
    SCHEMA_LOCK_TIMEOUT,
    Connection,
    Database,
    ServerBackend,
)

# pg_advisory_lock key guarding schema creation; advisory locks are per database.
SCHEMA_LOCK_KEY = 0x6C616B6577617264  # "lakeward"


class PostgresBackend(ServerBackend):
    name = "postgres"
    engine = "PostgreSQL"
    default_port = 5432
    jdbc_scheme = "postgresql"
    driver_class = "org.postgresql.Driver"
    driver_jar = "postgresql.jar"
    apt_package = "libpostgresql-jdbc-java"

    def _connect(self, database: Database) -> Connection:
        connection = psycopg.connect(
            host=database.host,
            port=database.port,
            user=database.user,
            password=database.password,
            dbname=database.name,
            connect_timeout=CONNECT_TIMEOUT,
            autocommit=True,
        )
        return cast(Connection, connection)

    def _driver_errors(self) -> tuple[type[Exception], ...]:
        return (psycopg.OperationalError,)

    def _server_version(self, connection: Connection) -> tuple[str, tuple[int, ...]]:
        cursor = connection.cursor()
        cursor.execute("SHOW server_version_num")
        number = int(cursor.fetchone()[0])  # 150004 is 15.4; 120003 is 12.3
        return "PostgreSQL", (number // 10000, number % 10000)

    def _minimum_versions(self) -> dict[str, tuple[int, ...]]:
        return {"PostgreSQL": (12, 3)}

    def _lock(self, connection: Connection) -> None:
        cursor = connection.cursor()
        cursor.execute(f"SET lock_timeout = '{SCHEMA_LOCK_TIMEOUT}s'")
        cursor.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK_KEY,))

    def _unlock(self, connection: Connection) -> None:
        connection.cursor().execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK_KEY,))

    def _tables(self, connection: Connection) -> set[str]:
        cursor = connection.cursor()
        cursor.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
        return {row[0] for row in cursor.fetchall()}

    def quote(self, identifier: str) -> str:
        return f'"{identifier}"'
