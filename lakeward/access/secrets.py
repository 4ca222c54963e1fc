"""Secrets: named JSON values, versioned and encrypted at rest (the Secrets Manager analogue).

Each version is sealed with AES-256-GCM under the secrets subkey of the master
key, with a fresh 96-bit nonce, and with the secret's name and the version id as
associated data: a ciphertext moved to another row, or altered, fails to open
instead of yielding someone else's value. A key check stored beside the tables
tells a wrong master key apart from tampering, at start-up.

No authorization happens here: callers check the policy first. Values never
reach a log, an error message or a repr.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import (
    Column,
    DateTime,
    ForeignKey,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from lakeward.access.keys import derive_key, load_master_key
from lakeward.config import Settings
from lakeward.errors import (
    ConfigError,
    InvalidRequest,
    ResourceNotFound,
    SecretIntegrityError,
)
from lakeward.sqlstate import as_utc, migrate, open_engine, writer

CURRENT = "AWSCURRENT"
PREVIOUS = "AWSPREVIOUS"
STAGES = (CURRENT, PREVIOUS)

MAX_VALUE_BYTES = 64 * 1024
# Versions that lost their stage stay readable by id, up to this many per secret
# in all, so that a secret rotated every minute does not grow without end.
MAX_VERSIONS = 100

_NAME = re.compile(r"[A-Za-z0-9/_+=.@-]{1,512}")
_NONCE_BYTES = 12
_KEY_CHECK_LABEL = b"lakeward secret store key check"

metadata = MetaData()
COMPONENT = "secrets"  # its row in sqlstate's schema_version

secrets = Table(
    "secrets",
    metadata,
    Column("name", String(512), primary_key=True),
    Column("description", Text, nullable=False, default=""),
    Column("created", DateTime(timezone=True), nullable=False),
    Column("last_changed", DateTime(timezone=True), nullable=False),
)

secret_versions = Table(
    "secret_versions",
    metadata,
    Column("version_id", String(36), primary_key=True),
    Column("name", String(512), ForeignKey("secrets.name"), nullable=False, index=True),
    Column("created", DateTime(timezone=True), nullable=False),
    Column("ciphertext", LargeBinary, nullable=False),
    Column("nonce", LargeBinary(_NONCE_BYTES), nullable=False),
    Column("stage", String(16)),
    # NULLs do not collide, so this allows one version per stage and any number
    # of unstaged ones, on SQLite and PostgreSQL alike.
    UniqueConstraint("name", "stage", name="one_version_per_stage"),
)

store_meta = Table(
    "secret_store_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)


@dataclass(frozen=True)
class SecretValue:
    name: str
    version_id: str
    value: dict[str, Any] = field(repr=False)
    created: datetime


@dataclass(frozen=True)
class SecretInfo:
    name: str
    description: str
    created: datetime
    last_changed: datetime
    # Version id -> its stage (None once it has lost both), oldest first.
    versions: dict[str, str | None]


class SecretStore:
    def __init__(self, url_or_path: str | Path, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError(f"the secrets key is 32 bytes, not {len(key)}")
        # SQLite's foreign keys (on for every store) keep a version from outliving its
        # secret when a delete races a put.
        self.engine: Engine = open_engine(url_or_path)
        migrate(self.engine, COMPONENT, MIGRATIONS, label="secrets")
        self._writer = writer(self.engine)
        self._aead = AESGCM(key)
        self._check_key(key)

    def close(self) -> None:
        self.engine.dispose()

    def put(self, name: str, value: Mapping[str, Any], description: str = "") -> str:
        """Store ``value`` as the new AWSCURRENT version of ``name``; return its version id.

        Creates the secret if needed; the version that was current becomes
        AWSPREVIOUS. A non-empty ``description`` replaces the old one.
        """
        _check_name(name)
        plaintext = _encode(name, value)
        version_id = str(uuid.uuid4())
        nonce = _random_nonce()
        ciphertext = self._aead.encrypt(nonce, plaintext, _associated_data(name, version_id))
        try:
            self._put(name, version_id, nonce, ciphertext, description)
        except IntegrityError:
            # Another writer created the same secret between our look and our
            # insert; now it exists, and a second try adds a version to it.
            self._put(name, version_id, nonce, ciphertext, description)
        return version_id

    def get(self, name: str, version_id: str | None = None, stage: str = CURRENT) -> SecretValue:
        """A version of ``name``: by ``version_id`` if given (then ``stage`` is not used)."""
        _check_name(name)
        query = select(secret_versions).where(secret_versions.c.name == name)
        if version_id is not None:
            query = query.where(secret_versions.c.version_id == version_id)
        elif stage in STAGES:
            query = query.where(secret_versions.c.stage == stage)
        else:
            raise InvalidRequest(f"unknown version stage {stage!r}; use one of {', '.join(STAGES)}")
        with self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
            if row is None:
                exists = conn.execute(select(secrets.c.name).where(secrets.c.name == name)).first()
        if row is None:
            if not exists:
                raise ResourceNotFound(f"secret {name} not found")
            wanted = (
                f"version {version_id}" if version_id is not None else f"version in stage {stage}"
            )
            raise ResourceNotFound(f"secret {name} has no {wanted}")
        return SecretValue(
            name=name,
            version_id=row["version_id"],
            value=self._open(name, row["version_id"], row["nonce"], row["ciphertext"]),
            created=as_utc(row["created"]),
        )

    def list(self) -> list[SecretInfo]:
        """Every secret with its versions and stages, and never a value."""
        versions_query = select(
            secret_versions.c.name, secret_versions.c.version_id, secret_versions.c.stage
        ).order_by(secret_versions.c.created, secret_versions.c.version_id)
        with self.engine.connect() as conn:
            rows = conn.execute(select(secrets).order_by(secrets.c.name)).mappings().all()
            staged: dict[str, dict[str, str | None]] = {r["name"]: {} for r in rows}
            for name, version_id, stage in conn.execute(versions_query):
                staged.setdefault(name, {})[version_id] = stage
        return [
            SecretInfo(
                name=r["name"],
                description=r["description"],
                created=as_utc(r["created"]),
                last_changed=as_utc(r["last_changed"]),
                versions=staged[r["name"]],
            )
            for r in rows
        ]

    def delete(self, name: str) -> None:
        """Delete ``name`` and every version of it, at once and for good."""
        _check_name(name)
        with self._writer.begin() as conn:
            conn.execute(delete(secret_versions).where(secret_versions.c.name == name))
            gone = conn.execute(delete(secrets).where(secrets.c.name == name)).rowcount
        if not gone:
            raise ResourceNotFound(f"secret {name} not found")

    # -- internals ----------------------------------------------------------

    def _put(
        self, name: str, version_id: str, nonce: bytes, ciphertext: bytes, description: str
    ) -> None:
        now = datetime.now(UTC)
        with self._writer.begin() as conn:
            # Locking the secret's row (PostgreSQL; SQLite's writer lock does the
            # same) keeps two writers from shifting the stages at once.
            found = conn.execute(
                select(secrets.c.name).where(secrets.c.name == name).with_for_update()
            ).first()
            if found is None:
                conn.execute(
                    insert(secrets).values(
                        name=name, description=description, created=now, last_changed=now
                    )
                )
            else:
                changes: dict[str, Any] = {"last_changed": now}
                if description:
                    changes["description"] = description
                conn.execute(update(secrets).where(secrets.c.name == name).values(**changes))
                self._shift_stages(conn, name)
            conn.execute(
                insert(secret_versions).values(
                    version_id=version_id,
                    name=name,
                    created=now,
                    ciphertext=ciphertext,
                    nonce=nonce,
                    stage=CURRENT,
                )
            )
            self._prune(conn, name)

    @staticmethod
    def _shift_stages(conn: Connection, name: str) -> None:
        of_secret = secret_versions.c.name == name
        # Order matters: the unique (name, stage) pair must hold after each step.
        conn.execute(
            update(secret_versions)
            .where(of_secret, secret_versions.c.stage == PREVIOUS)
            .values(stage=None)
        )
        conn.execute(
            update(secret_versions)
            .where(of_secret, secret_versions.c.stage == CURRENT)
            .values(stage=PREVIOUS)
        )

    @staticmethod
    def _prune(conn: Connection, name: str) -> None:
        unstaged = (
            select(secret_versions.c.version_id)
            .where(secret_versions.c.name == name, secret_versions.c.stage.is_(None))
            .order_by(secret_versions.c.created.desc(), secret_versions.c.version_id.desc())
            .offset(MAX_VERSIONS - len(STAGES))
        )
        old = [r[0] for r in conn.execute(unstaged)]
        if old:
            conn.execute(delete(secret_versions).where(secret_versions.c.version_id.in_(old)))

    def _open(self, name: str, version_id: str, nonce: bytes, ciphertext: bytes) -> dict[str, Any]:
        try:
            plaintext = self._aead.decrypt(nonce, ciphertext, _associated_data(name, version_id))
        except InvalidTag:
            raise SecretIntegrityError(
                f"secret {name} version {version_id} failed its integrity check: "
                "the stored row was altered or copied from another secret or version"
            ) from None
        value: dict[str, Any] = json.loads(plaintext)
        return value

    def _check_key(self, key: bytes) -> None:
        """Refuse a key other than the one this store was first opened with."""
        check = hmac.new(key, _KEY_CHECK_LABEL, hashlib.sha256).hexdigest()
        found = self._stored_key_check()
        if found is None:
            try:
                with self._writer.begin() as conn:
                    conn.execute(insert(store_meta).values(key="key_check", value=check))
                return
            except IntegrityError:
                found = self._stored_key_check()  # another process stored it first
        if found is None or not hmac.compare_digest(found, check):
            raise ConfigError(
                f"the master key is not the one the secret store at "
                f"{self.engine.url.render_as_string(hide_password=True)} was created with; "
                "restore the original master.key file or LAKEWARD_MASTER_KEY"
            )

    def _stored_key_check(self) -> str | None:
        query = select(store_meta.c.value).where(store_meta.c.key == "key_check")
        with self.engine.connect() as conn:
            value = conn.execute(query).scalar()
        return None if value is None else str(value)


def open_secret_store(settings: Settings) -> SecretStore:
    """The stack's secrets store, without the rest of access control."""
    state = settings.data_dir / "access"
    state.mkdir(parents=True, exist_ok=True)
    master = load_master_key(settings.data_dir)
    where = settings.access.database_url or state / "secrets.db"
    return SecretStore(where, derive_key(master, "secrets"))


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidRequest(
            f"invalid secret name {name!r}: use 1 to 512 of the characters "
            "A-Z a-z 0-9 / _ + = . @ -"
        )


def _encode(name: str, value: Mapping[str, Any]) -> bytes:
    if not isinstance(value, Mapping):
        raise InvalidRequest(
            f"the value of secret {name} must be a JSON object, not {type(value).__name__}"
        )
    try:
        # Neither exception message carries the value itself.
        text = json.dumps(dict(value), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise InvalidRequest(f"the value of secret {name} is not JSON: {e}") from None
    data = text.encode()
    if len(data) > MAX_VALUE_BYTES:
        raise InvalidRequest(
            f"the value of secret {name} is {len(data)} bytes as JSON; the limit is "
            f"{MAX_VALUE_BYTES} bytes (64 KiB)"
        )
    return data


def _associated_data(name: str, version_id: str) -> bytes:
    # Names cannot hold NUL, so this split is unambiguous.
    return b"lakeward-secret\x00" + name.encode() + b"\x00" + version_id.encode()


def _random_nonce() -> bytes:
    # Random nonces are safe for AES-GCM up to about 2**32 versions per key.
    return os.urandom(_NONCE_BYTES)


def _create_v1(conn: Connection) -> None:
    metadata.create_all(conn)  # also adopts the tables of a database made before versions


MIGRATIONS = [_create_v1]
