"""The IAM store's tables, the engine that reaches them, and the migrations between versions.

Migrations are an ordered list of functions; ``migrate`` applies the ones a
database lacks, in one transaction, and records the version reached in
``schema_version``. Alembic would bring autogeneration, branches and a command
line for what is, here, a handful of steps applied in order: this small runner
is enough, and keeps the store free of another tool's configuration.
"""

from __future__ import annotations

from collections.abc import Callable

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
    insert,
    literal,
    select,
    true,
)
from sqlalchemy.engine import Connection, Engine

from lakeward import sqlstate
from lakeward.errors import ResourceNotFound

metadata = MetaData()

# Our row in sqlstate's ``schema_version``.
COMPONENT = "access"

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

# A user's console sessions issued before ``since`` (Unix time) have ended: their password
# was reset. The row goes with the user.
session_cutoffs = Table(
    "iam_session_cutoffs",
    metadata,
    Column("user", String(64), ForeignKey("iam_users.name", ondelete="CASCADE"), primary_key=True),
    Column("since", Float, nullable=False),
)

# Who may assume a role (its trust policy, IAM's AssumeRolePolicyDocument). A role
# without a row trusts the account: whoever its own policies allow sts:AssumeRole.
role_trust = Table(
    "iam_role_trust",
    metadata,
    Column("role", String(64), ForeignKey("iam_roles.name", ondelete="CASCADE"), primary_key=True),
    Column("document", Text, nullable=False),
    Column("max_session_seconds", Integer, nullable=False),
)

# Temporary credentials handed out by sts:AssumeRole. The secret is sealed like an
# access key's; of the session token only a hash is kept. A row goes with its role,
# when revoked, or once expired (pruned as new ones are issued).
role_sessions = Table(
    "iam_role_sessions",
    metadata,
    Column("key_id", String(32), primary_key=True),
    Column("role", String(64), ForeignKey("iam_roles.name", ondelete="CASCADE"), index=True),
    Column("session_name", String(64), nullable=False),
    Column("secret", LargeBinary, nullable=False),
    Column("token_hash", String(64), nullable=False),
    Column("issued", DateTime(timezone=True), nullable=False),
    Column("expires", DateTime(timezone=True), nullable=False, index=True),
)

# A managed policy's versions, as IAM keeps them: v1, v2... (at most five kept), one the
# default, whose document is also the policy's own (what authorization reads). A deleted
# version keeps its row without a document, so that its number is not given again.
policy_versions = Table(
    "iam_policy_versions",
    metadata,
    Column(
        "policy_name",
        String(128),
        ForeignKey("iam_policies.name", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("version", Integer, primary_key=True),
    Column("document", Text),
    Column("is_default", Boolean, nullable=False),
    Column("created", DateTime(timezone=True), nullable=False),
)

# -- migrations -------------------------------------------------------------

_LATER_TABLES = (revoked_sessions, role_trust, role_sessions, policy_versions, session_cutoffs)
"""Tables a later migration creates (so that ``_v1`` keeps its own layout)."""


def _v1(conn: Connection) -> None:
    # Built from the definitions above. The day a table changes, freeze its v1
    # shape here first, so that v1 followed by v2 still gives the v2 layout.
    tables = [t for t in metadata.sorted_tables if t not in _LATER_TABLES]
    metadata.create_all(conn, tables=tables)
    conn.execute(insert(generation).values(id=1, value=0))


def _v2(conn: Connection) -> None:
    revoked_sessions.create(conn)


def _v3(conn: Connection) -> None:
    role_trust.create(conn)
    role_sessions.create(conn)


def _v4(conn: Connection) -> None:
    policy_versions.create(conn)
    # Every policy made before versions were kept: its document is its version 1.
    conn.execute(
        insert(policy_versions).from_select(
            ["policy_name", "version", "document", "is_default", "created"],
            select(policies.c.name, literal(1), policies.c.document, true(), policies.c.created),
        )
    )


def _v5(conn: Connection) -> None:
    session_cutoffs.create(conn)


MIGRATIONS: list[Callable[[Connection], None]] = [_v1, _v2, _v3, _v4, _v5]
LATEST = len(MIGRATIONS)

# Any constant will do, as long as other lakeward stores pick different ones.


def migrate(engine: Engine) -> int:
    """Bring the database to ``LATEST``; return the version it was at before."""
    return sqlstate.migrate(engine, COMPONENT, MIGRATIONS, label="access")


def require_principal(conn: Connection, kind: str, name: str) -> None:
    """Refuse (ResourceNotFound) a user, group, role or policy that does not exist."""
    table = {**PRINCIPALS, "policy": policies}[kind]
    if conn.execute(select(table.c.name).where(table.c.name == name)).first() is None:
        raise ResourceNotFound(f"{kind} {name} does not exist")
