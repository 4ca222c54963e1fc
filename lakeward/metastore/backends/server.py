"""What the database-server backends (PostgreSQL, MySQL, MariaDB) share.

The database is either an existing one (``metastore.url``) or one inside a
managed instance (``metastore.instance``). Before any node starts, the server
is checked from Python (reachable, credentials, version), so that a mistake is
reported naming the setting rather than as a Java stack trace in a node's log.

The schema is created once: every node takes a database-level lock, looks at
the real tables, and only the first one runs DataNucleus' SchemaTool and writes
the ``VERSION`` row. Nodes started at the same moment wait on the lock, then
find the schema made.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, urlsplit

from lakeward.config import hide_password
from lakeward.errors import ConfigError, LakewardError, MetastoreError
from lakeward.metastore.backends.base import MetastoreBackend

if TYPE_CHECKING:
    from lakeward.config import Settings

JDBC_DIR = Path("/usr/share/java")
SCHEMA_VERSION = "2.3.0"
# How long a node waits for another to finish creating the schema.
SCHEMA_LOCK_TIMEOUT = 600
CONNECT_TIMEOUT = 5


class Connection(Protocol):
    """What lakeward uses of a DB-API connection (psycopg's or PyMySQL's)."""

    def cursor(self) -> Any: ...
    def commit(self) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class Database:
    """Where the metastore's database is and how to sign in to it."""

    host: str
    port: int
    user: str
    password: str | None
    name: str

    @classmethod
    def from_url(cls, url: str, default_port: int, setting: str) -> Database:
        parsed = urlsplit(url)
        name = unquote(parsed.path.lstrip("/"))
        if not parsed.hostname or not name:
            raise ConfigError(f"{setting}: {hide_password(url)} names no host or database")
        try:
            port = parsed.port or default_port
        except ValueError:
            raise ConfigError(f"{setting}: {hide_password(url)} has an invalid port") from None
        return cls(
            host=parsed.hostname,
            port=port,
            user=unquote(parsed.username or "root"),
            password=None if parsed.password is None else unquote(parsed.password),
            name=name,
        )

    def describe(self) -> str:
        return f"{self.user}@{self.host}:{self.port}/{self.name}"


class ServerBackend(MetastoreBackend):
    """A database on a server, shared by every node of the stack."""

    engine: str  # the engine's name in messages, e.g. PostgreSQL
    default_port: int
    jdbc_scheme: str
    driver_class: str
    driver_jar: str  # file name under /usr/share/java
    apt_package: str
    table_options = ""  # appended to CREATE TABLE
    writes_version = True

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self._database: Database | None = None

    @property
    def setting(self) -> str:
        """The setting that names the database, for messages."""
        return "metastore.instance" if self.settings.metastore.instance else "metastore.url"

    @property
    def database(self) -> Database:
        if self._database is None:
            self._database = Database.from_url(self._url(), self.default_port, self.setting)
        return self._database

    def _url(self) -> str:
        metastore = self.settings.metastore
        if metastore.url:
            return metastore.url
        if metastore.instance:
            return instance_url(self.settings, metastore.instance)
        raise ConfigError(
            f"metastore.backend is {self.name}: set metastore.url to an existing database "
            "or metastore.instance to a managed one (lakeward up creates one named metastore)"
        )

    # -- what each engine provides ------------------------------------------------

    @abstractmethod
    def _connect(self, database: Database) -> Connection:
        """A DB-API connection in autocommit mode; raises the driver's own errors."""

    @abstractmethod
    def _driver_errors(self) -> tuple[type[Exception], ...]:
        """The driver's exception classes that mean: cannot connect or sign in."""

    @abstractmethod
    def _server_version(self, connection: Connection) -> tuple[str, tuple[int, ...]]:
        """The server's product name (as minimums are keyed) and version."""

    @abstractmethod
    def _minimum_versions(self) -> dict[str, tuple[int, ...]]:
        """The oldest supported version of each product this backend may meet."""

    @abstractmethod
    def _lock(self, connection: Connection) -> None:
        """Take the database-wide lock that guards schema creation."""

    @abstractmethod
    def _unlock(self, connection: Connection) -> None: ...

    @abstractmethod
    def _tables(self, connection: Connection) -> set[str]:
        """The names of the tables in the metastore's database."""

    @abstractmethod
    def quote(self, identifier: str) -> str: ...

    # -- shared behaviour -------------------------------------------------------

    def jdbc_url(self) -> str:
        db = self.database
        return f"jdbc:{self.jdbc_scheme}://{db.host}:{db.port}/{db.name}"

    def connection_properties(self, creating: bool = False) -> dict[str, str]:
        db = self.database
        properties = {
            "javax.jdo.option.ConnectionURL": self.jdbc_url(),
            "javax.jdo.option.ConnectionDriverName": self.driver_class,
            "javax.jdo.option.ConnectionUserName": db.user,
            "javax.jdo.option.ConnectionPassword": db.password or "",
        }
        return properties

    def driver_jars(self) -> list[Path]:
        jar = JDBC_DIR / self.driver_jar
        if not jar.is_file():
            raise MetastoreError(
                f"metastore.backend is {self.name}, but its JDBC driver {jar} is missing; "
                f"install it with: sudo apt-get install -y {self.apt_package} "
                "(./dev.sh install does)"
            )
        return [jar]

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        db = self.database
        try:
            connection = self._connect(db)
        except self._driver_errors() as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise ConfigError(
                f"{self.setting}: cannot connect to the {self.engine} database "
                f"{db.describe()}: {reason}"
            ) from None
        try:
            yield connection
        finally:
            connection.close()

    def check(self) -> None:
        self.driver_jars()
        with self.connection() as connection:
            self.check_version(connection)

    def check_version(self, connection: Connection) -> None:
        product, version = self._server_version(connection)
        minimum = self._minimum_versions()[product]
        if version < minimum:
            found = ".".join(map(str, version))
            need = ".".join(map(str, minimum))
            raise ConfigError(
                f"{self.setting}: the server at {self.database.host}:{self.database.port} is "
                f"{product} {found}; the metastore needs {product} {need} or newer"
            )

    def schema_ready(self) -> bool:
        with self.connection() as connection:
            return self._schema_ready(connection)

    def _schema_ready(self, connection: Connection) -> bool:
        """Whether Hive 2.3's schema is there; a schema of another version is refused."""
        if not {"DBS", "VERSION"} <= self._tables(connection):
            return False
        cursor = connection.cursor()
        cursor.execute(f"SELECT {self.quote('SCHEMA_VERSION')} FROM {self.quote('VERSION')}")
        versions = {str(row[0]) for row in cursor.fetchall()}
        if not versions:
            return False  # created, but interrupted before the row was written
        foreign = sorted(v for v in versions if v.split(".")[:2] != SCHEMA_VERSION.split(".")[:2])
        if foreign:
            raise ConfigError(
                f"{self.setting}: the database {self.database.describe()} holds a Hive metastore "
                f"schema of version {', '.join(foreign)}; lakeward's metastore is Hive "
                f"{SCHEMA_VERSION}: use another database (or upgrade it with Hive's schematool)"
            )
        return True

    def ensure_schema(self, java: Path) -> None:
        with self.connection() as connection:
            self.check_version(connection)
            self._lock(connection)
            try:
                if not self._schema_ready(connection):
                    self.create_schema(java)
                    self._record_version(connection)
            finally:
                self._unlock(connection)

    def _record_version(self, connection: Connection) -> None:
        """Write the row Hive's schema tools and version checks read.

        Also create DataNucleus' id table, as Hive's own schema scripts do: a
        node would otherwise create it at its first insert, and two nodes
        doing so at once collide.
        """
        cursor = connection.cursor()
        if "SEQUENCE_TABLE" not in self._tables(connection):
            name, value = self.quote("SEQUENCE_NAME"), self.quote("NEXT_VAL")
            cursor.execute(
                f"CREATE TABLE {self.quote('SEQUENCE_TABLE')} ({name} VARCHAR(255) NOT NULL, "
                f"{value} BIGINT NOT NULL, PRIMARY KEY ({name})){self.table_options}"
            )
        table = self.quote("VERSION")
        columns = ", ".join(self.quote(c) for c in ("VER_ID", "SCHEMA_VERSION", "VERSION_COMMENT"))
        cursor.execute(f"SELECT COUNT(*) FROM {table}")
        if int(cursor.fetchone()[0]) == 0:
            cursor.execute(
                f"INSERT INTO {table} ({columns}) VALUES (1, %s, %s)",
                (SCHEMA_VERSION, f"Hive release version {SCHEMA_VERSION}"),
            )
        connection.commit()


def parse_version(text: str) -> tuple[int, ...]:
    """``10.11.6-MariaDB-0+deb12u1`` -> (10, 11, 6)."""
    numbers = []
    for part in text.split("-")[0].split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)


def instance_url(settings: Settings, name: str) -> str:
    """The URL (with credentials) of the metastore's database inside a managed instance."""
    from lakeward.access.secrets import open_secret_store  # only when an instance is used
    from lakeward.databases import Instances

    try:
        return Instances(settings, open_secret_store(settings)).connection_url(
            name, database="metastore"
        )
    except LakewardError as exc:
        raise ConfigError(f"metastore.instance: {exc.message}") from None
