"""The IAM store's tables, the engine that reaches them, and the migrations between versions.

Migrations are an ordered list of functions; ``migrate`` applies the ones a
database lacks, in one transaction, and records the version reached in
``schema_version``. Alembic would bring autogeneration, branches and a command
line for what is, here, a handful of steps applied in order: this small runner
is enough, and keeps the store free of another tool's configuration.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, Engine, make_url

from lakeward.errors import ConfigError, ResourceNotFound

metadata = MetaData()

# The row of ``schema_version`` that is ours: the table is keyed by component so
# that a PostgreSQL database shared with other lakeward stores can hold theirs.
COMPONENT = "access"

schema_version = Table(
    "schema_version",
    metadata,
    Column("component", String(64), primary_key=True),
    Column("version", Integer, nullable=False),
)

# One row (id 1) counting changes to anything that decides access, so that every
# process sharing the database can tell with one cheap read that its cache is stale.
generation = Table(
    "iam_generation",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("value", BigInteger, nullable=False),
)

users = Table(
    "iam_users",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("password_hash", Text),  # argon2id; NULL when the user has no password
    Column("created", DateTime(timezone=True), nullable=False),
    Column("failed_logins", Integer, nullable=False, default=0),
    Column("lockouts", Integer, nullable=False, default=0),
    Column("locked_until", DateTime(timezone=True)),
)


def _user_fk() -> ForeignKey:
    return ForeignKey("iam_users.name", ondelete="CASCADE")


access_keys = Table(
    "iam_access_keys",
    metadata,
    Column("key_id", String(20), primary_key=True),
    Column("user_name", String(64), _user_fk(), nullable=False, index=True),
    # AES-GCM nonce + ciphertext: SigV4 needs the secret itself, so it cannot be hashed.
    Column("secret", LargeBinary, nullable=False),
    Column("active", Boolean, nullable=False),
    Column("created", DateTime(timezone=True), nullable=False),
    Column("last_used", DateTime(timezone=True)),
)

groups = Table(
    "iam_groups",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("created", DateTime(timezone=True), nullable=False),
)

group_members = Table(
    "iam_group_members",
    metadata,
    Column(
        "group_name",
        String(64),
        ForeignKey("iam_groups.name", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("user_name", String(64), _user_fk(), primary_key=True, index=True),
)

roles = Table(
    "iam_roles",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("description", Text, nullable=False, default=""),
    Column("created", DateTime(timezone=True), nullable=False),
)

policies = Table(
    "iam_policies",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("document", Text, nullable=False),
    Column("description", Text, nullable=False, default=""),
    Column("created", DateTime(timezone=True), nullable=False),
)

# Principal kind -> (principal table, managed attachments, inline policies). One
# table per kind rather than a (kind, name) pair, so that foreign keys keep them
# consistent: deleting a user or role takes its attachments with it, and a managed
# policy cannot be deleted from under an attachment.
KINDS = ("user", "group", "role")
PRINCIPALS = {"user": users, "group": groups, "role": roles}
ATTACHMENTS: dict[str, Table] = {}
INLINE: dict[str, Table] = {}
for _kind, _table in PRINCIPALS.items():
    _owner = f"iam_{_kind}s.name"
    ATTACHMENTS[_kind] = Table(
        f"iam_{_kind}_policy_attachments",
        metadata,
        Column("principal", String(64), ForeignKey(_owner, ondelete="CASCADE"), primary_key=True),
        Column(
            "policy_name",
            String(128),
            ForeignKey("iam_policies.name", ondelete="RESTRICT"),
            primary_key=True,
            index=True,
        ),
    )
    INLINE[_kind] = Table(
        f"iam_{_kind}_inline_policies",
        metadata,
        Column("principal", String(64), ForeignKey(_owner, ondelete="CASCADE"), primary_key=True),
        Column("name", String(128), primary_key=True),
        Column("document", Text, nullable=False),
    )


# Console sessions signed out before they expire (``lakeward.access.sessions``): kept
# here, not in a process's memory, so that a sign-out holds after a restart and in
# every server process. ``expires`` is the session's own expiry (Unix time), after
# which the row is useless and pruned.
revoked_sessions = Table(
    "iam_revoked_sessions",
    metadata,
    Column("session_id", String(64), primary_key=True),
    Column("expires", Float, nullable=False, index=True),
)

# -- migrations -------------------------------------------------------------

_LATER_TABLES = (revoked_sessions,)
"""Tables a later migration creates (so that ``_v1`` keeps its own layout)."""


def _v1(conn: Connection) -> None:
    # Built from the definitions above. The day a table changes, freeze its v1
    # shape here first, so that v1 followed by v2 still gives the v2 layout.
    tables = [
        t for t in metadata.sorted_tables if t is not schema_version and t not in _LATER_TABLES
    ]
    metadata.create_all(conn, tables=tables)
    conn.execute(insert(generation).values(id=1, value=0))


def _v2(conn: Connection) -> None:
    revoked_sessions.create(conn)


MIGRATIONS: list[Callable[[Connection], None]] = [_v1, _v2]
LATEST = len(MIGRATIONS)

# Any constant will do, as long as other lakeward stores pick different ones.
_PG_LOCK_KEY = 0x6C616B65_61636373  # "lakeacss"


def migrate(engine: Engine) -> int:
    """Bring the database to ``LATEST``; return the version it was at before."""
    return run_migrations(engine, COMPONENT, MIGRATIONS, _PG_LOCK_KEY, "access")


def run_migrations(
    engine: Engine,
    component: str,
    migrations: list[Callable[[Connection], None]],
    lock_key: int,
    label: str,
) -> int:
    """Apply the ``migrations`` a database lacks for ``component``, in one transaction.

    Shared by every lakeward store that keeps its own tables (``label`` names
    the store in errors); returns the version the database was at before.
    """
    latest = len(migrations)
    with writer(engine).begin() as conn:
        if conn.dialect.name == "postgresql":
            # Two processes starting at once must not both create the tables.
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": lock_key})
        current = current_version(conn, component)
        if current > latest:
            raise ConfigError(
                f"the {label} database {engine.url.render_as_string(hide_password=True)} is at "
                f"schema version {current}, newer than this lakeward knows ({latest}); "
                "upgrade lakeward, or point it at another database"
            )
        for step in migrations[current:]:
            step(conn)
        if current == 0:
            conn.execute(insert(schema_version).values(component=component, version=latest))
        elif current < latest:
            conn.execute(
                update(schema_version)
                .where(schema_version.c.component == component)
                .values(version=latest)
            )
    return current


def current_version(conn: Connection, component: str = COMPONENT) -> int:
    if not inspect(conn).has_table(schema_version.name):
        schema_version.create(conn)
        return 0
    query = select(schema_version.c.version).where(schema_version.c.component == component)
    return int(conn.execute(query).scalar() or 0)


# -- engine -----------------------------------------------------------------

# Execution option marking a transaction that will write (see ``_sqlite_begin``).
_WRITE = "lakeward_write"


def open_engine(url_or_path: str | Path) -> Engine:
    """An engine for a SQLite file (a path) or a database URL (``postgresql://`` uses psycopg 3)."""
    if isinstance(url_or_path, Path) or "://" not in url_or_path:
        path = Path(url_or_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        url_or_path = f"sqlite:///{path}"
    url = make_url(url_or_path)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    try:
        engine = create_engine(url)
    except ModuleNotFoundError as e:
        raise ConfigError(
            f"the database driver for {url.drivername} is not installed ({e.name}); "
            "for PostgreSQL: pip install 'psycopg[binary]'"
        ) from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
    return engine


def writer(engine: Engine) -> Engine:
    """The same engine, with transactions that take the write lock when they begin."""
    return engine.execution_options(**{_WRITE: True})


def _sqlite_connect(connection: Any, _record: Any) -> None:
    # Left to itself, Python's sqlite3 commits DDL on its own and opens
    # transactions late; take over so a migration is one transaction (SQLAlchemy's
    # documented recipe, with BEGIN emitted in _sqlite_begin).
    connection.isolation_level = None
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers go on while a writer writes
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.execute("PRAGMA foreign_keys=ON")  # off by default in SQLite
    cursor.close()


def _sqlite_begin(conn: Connection) -> None:
    # A deferred transaction that reads and then writes fails at once (not after
    # the busy timeout) when another process wrote in between; a writer takes the
    # lock up front instead.
    immediate = conn.get_execution_options().get(_WRITE, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def require_principal(conn: Connection, kind: str, name: str) -> None:
    """Refuse (ResourceNotFound) a user, group, role or policy that does not exist."""
    table = {**PRINCIPALS, "policy": policies}[kind]
    if conn.execute(select(table.c.name).where(table.c.name == name)).first() is None:
        raise ResourceNotFound(f"{kind} {name} does not exist")


def as_utc(value: datetime) -> datetime:
    # SQLite hands datetimes back without their zone; a naive time given to us is UTC.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
