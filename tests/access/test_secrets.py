"""The secret store and the master key, on SQLite and on PostgreSQL.

The PostgreSQL runs use a throwaway database on 127.0.0.1:5432 (user postgres,
trust auth), one schema per test; they skip without a server, and fail under
CI=true.
"""

from __future__ import annotations

import base64
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select, text, update

from lakeward.access import keys
from lakeward.access import secrets as secrets_module
from lakeward.access.keys import derive_key, load_master_key
from lakeward.access.secrets import CURRENT, MAX_VALUE_BYTES, PREVIOUS, SecretStore, secret_versions
from lakeward.errors import ConfigError, InvalidRequest, ResourceNotFound, SecretIntegrityError

KEY = derive_key(b"k" * 32, keys.SECRETS)


# -- backends ---------------------------------------------------------------


@pytest.fixture
def store(db: str | Path) -> Iterator[SecretStore]:
    s = SecretStore(db, KEY)
    yield s
    s.close()


# -- values, versions, stages -------------------------------------------------


def test_round_trip(store: SecretStore) -> None:
    value = {"username": "etl", "password": "hunter2", "port": 5432, "tags": ["a", "é"]}
    version_id = store.put("prod/db-password", value, description="the ETL login")
    found = store.get("prod/db-password")
    assert found.value == value
    assert found.version_id == version_id
    assert found.name == "prod/db-password"
    assert found.created.tzinfo is not None


def test_reopened_store_reads_what_was_written(db: str | Path) -> None:
    first = SecretStore(db, KEY)
    first.put("s", {"a": 1})
    first.close()
    again = SecretStore(db, KEY)
    assert again.get("s").value == {"a": 1}
    again.close()


def test_versions_and_stages(store: SecretStore) -> None:
    v1 = store.put("rotating", {"n": 1})
    v2 = store.put("rotating", {"n": 2})
    v3 = store.put("rotating", {"n": 3})
    assert store.get("rotating").value == {"n": 3}
    assert store.get("rotating", stage=CURRENT).version_id == v3
    assert store.get("rotating", stage=PREVIOUS).value == {"n": 2}
    # A version that lost its stage stays readable by id.
    assert store.get("rotating", version_id=v1).value == {"n": 1}
    [info] = store.list()
    assert info.versions == {v1: None, v2: PREVIOUS, v3: CURRENT}


def test_old_unstaged_versions_are_pruned(
    store: SecretStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(secrets_module, "MAX_VERSIONS", 4)
    ids = [store.put("busy", {"n": n}) for n in range(7)]
    [info] = store.list()
    assert list(info.versions) == ids[-4:]
    with pytest.raises(ResourceNotFound, match=f"has no version {ids[0]}"):
        store.get("busy", version_id=ids[0])


def test_first_version_has_no_previous(store: SecretStore) -> None:
    store.put("new", {"n": 1})
    with pytest.raises(ResourceNotFound, match="secret new has no version in stage AWSPREVIOUS"):
        store.get("new", stage=PREVIOUS)
    with pytest.raises(InvalidRequest, match="unknown version stage"):
        store.get("new", stage="AWSPENDING")
    with pytest.raises(ResourceNotFound, match="has no version nope"):
        store.get("new", version_id="nope")


def test_list_shows_no_values(store: SecretStore) -> None:
    store.put("b/one", {"password": "hunter2-marker"}, description="first")
    store.put("a/two", {"token": "s3cr3t-marker"})
    store.put("b/one", {"password": "hunter3-marker"}, description="rotated")
    infos = store.list()
    assert [i.name for i in infos] == ["a/two", "b/one"]
    assert infos[1].description == "rotated"
    assert infos[1].last_changed >= infos[1].created
    assert not any(hasattr(i, "value") for i in infos)
    assert "marker" not in repr(infos)
    # Nor does the value show when a SecretValue is logged by mistake.
    assert "marker" not in repr(store.get("b/one"))


def test_delete(store: SecretStore) -> None:
    store.put("gone", {"a": 1})
    store.put("gone", {"a": 2})
    store.put("kept", {"b": 1})
    store.delete("gone")
    with pytest.raises(ResourceNotFound, match="secret gone not found"):
        store.get("gone")
    with pytest.raises(ResourceNotFound, match="secret gone not found"):
        store.delete("gone")
    assert [i.name for i in store.list()] == ["kept"]
    with store.engine.connect() as conn:
        rows = conn.execute(select(secret_versions).where(secret_versions.c.name == "gone"))
        assert rows.first() is None
    # The name can be used again, as a new secret.
    store.put("gone", {"a": 3})
    assert list(store.list()[0].versions.values()) == [CURRENT]


def test_concurrent_puts_keep_one_version_per_stage(store: SecretStore) -> None:
    errors: list[BaseException] = []

    def rotate(worker: int) -> None:
        try:
            for n in range(5):
                store.put("hot", {"worker": worker, "n": n})
        except BaseException as e:  # reported below, from the main thread
            errors.append(e)

    threads = [threading.Thread(target=rotate, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    [info] = store.list()
    assert len(info.versions) == 20
    stages = sorted(s for s in info.versions.values() if s)
    assert stages == [CURRENT, PREVIOUS]


# -- encryption at rest -------------------------------------------------------


def test_ciphertext_at_rest_is_not_the_plaintext(store: SecretStore, db: str | Path) -> None:
    store.put("at-rest", {"password": "plaintext-marker-4711"})
    with store.engine.connect() as conn:
        row = conn.execute(text("SELECT ciphertext, nonce FROM secret_versions")).one()
    assert b"plaintext-marker-4711" not in bytes(row.ciphertext)
    assert len(bytes(row.nonce)) == 12
    if isinstance(db, Path):  # and not in the SQLite files either, WAL included
        for path in db.parent.iterdir():
            assert b"plaintext-marker-4711" not in path.read_bytes(), path


def test_nonces_are_not_reused(store: SecretStore) -> None:
    for n in range(10):
        store.put("n", {"n": n})
    with store.engine.connect() as conn:
        nonces = [bytes(r[0]) for r in conn.execute(select(secret_versions.c.nonce))]
    assert len(set(nonces)) == 10


def _tamper(store: SecretStore, version_id: str, **values: object) -> None:
    with store.engine.begin() as conn:
        conn.execute(
            update(secret_versions)
            .where(secret_versions.c.version_id == version_id)
            .values(**values)
        )


def _row(store: SecretStore, version_id: str) -> tuple[bytes, bytes]:
    query = select(secret_versions.c.ciphertext, secret_versions.c.nonce).where(
        secret_versions.c.version_id == version_id
    )
    with store.engine.connect() as conn:
        ciphertext, nonce = conn.execute(query).one()
    return bytes(ciphertext), bytes(nonce)


def test_tampered_ciphertext_fails_the_integrity_check(store: SecretStore) -> None:
    version_id = store.put("t", {"password": "hunter2"})
    ciphertext, _ = _row(store, version_id)
    flipped = bytes([ciphertext[0] ^ 1]) + ciphertext[1:]
    _tamper(store, version_id, ciphertext=flipped)
    with pytest.raises(SecretIntegrityError) as caught:
        store.get("t")
    assert str(caught.value).startswith(f"secret t version {version_id} failed its integrity check")
    assert "hunter2" not in str(caught.value)


def test_rows_swapped_between_secrets_fail_the_integrity_check(store: SecretStore) -> None:
    mine = store.put("mine", {"password": "mine"})
    theirs = store.put("theirs", {"password": "theirs"})
    ciphertext, nonce = _row(store, theirs)
    _tamper(store, mine, ciphertext=ciphertext, nonce=nonce)
    with pytest.raises(SecretIntegrityError, match=f"secret mine version {mine} failed"):
        store.get("mine")
    assert store.get("theirs").value == {"password": "theirs"}


def test_rows_swapped_between_versions_fail_the_integrity_check(store: SecretStore) -> None:
    old = store.put("v", {"password": "old"})
    new = store.put("v", {"password": "new"})
    ciphertext, nonce = _row(store, old)
    _tamper(store, new, ciphertext=ciphertext, nonce=nonce)
    with pytest.raises(SecretIntegrityError, match=f"secret v version {new} failed"):
        store.get("v")


def test_wrong_master_key_fails_clearly(db: str | Path) -> None:
    good = SecretStore(db, KEY)
    good.put("s", {"a": 1})
    good.close()
    other = derive_key(b"o" * 32, keys.SECRETS)
    with pytest.raises(ConfigError, match="the master key is not the one the secret store"):
        SecretStore(db, other)


def test_key_must_be_32_bytes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        SecretStore(tmp_path / "s.db", b"short")


# -- validation ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "has space", "x" * 513, "ümlaut", "nul\x00", "semi;colon"])
def test_bad_names_are_refused(store: SecretStore, name: str) -> None:
    with pytest.raises(InvalidRequest, match="invalid secret name"):
        store.put(name, {"a": 1})
    with pytest.raises(InvalidRequest, match="invalid secret name"):
        store.get(name)


def test_good_names(store: SecretStore) -> None:
    for name in ["a", "x" * 512, "team/app_1+2=3.x@y-z"]:
        store.put(name, {"ok": True})
        assert store.get(name).value == {"ok": True}


def test_value_size_limit(store: SecretStore) -> None:
    # {"v":"..."} is 8 bytes of JSON around the string.
    store.put("fits", {"v": "x" * (MAX_VALUE_BYTES - 8)})
    with pytest.raises(InvalidRequest, match=r"65537 bytes as JSON; the limit is 65536"):
        store.put("too-big", {"v": "x" * (MAX_VALUE_BYTES - 7)})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("just a string", "must be a JSON object, not str"),
        (["a"], "must be a JSON object, not list"),
        ({"raw": b"hunter2"}, "is not JSON"),
        ({"n": float("nan")}, "is not JSON"),
    ],
)
def test_values_must_be_json_objects(store: SecretStore, value: object, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message) as caught:
        store.put("s", value)  # type: ignore[arg-type]
    assert "hunter2" not in str(caught.value)


# -- the master key -----------------------------------------------------------


def test_key_file_is_created_0600_and_reused(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    key = load_master_key(data_dir, env={})
    path = data_dir / "master.key"
    assert len(key) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes() == key
    assert load_master_key(data_dir, env={}) == key
    assert [p.name for p in data_dir.iterdir()] == ["master.key"]  # no temp file left


def test_concurrent_first_use_agrees_on_one_key(tmp_path: Path) -> None:
    found: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: found.append(load_master_key(tmp_path, env={})))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(found) == 8
    assert len(set(found)) == 1


def test_env_key_wins_over_the_file(tmp_path: Path) -> None:
    key = os.urandom(32)
    env = {"LAKEWARD_MASTER_KEY": base64.b64encode(key).decode()}
    assert load_master_key(tmp_path, env=env) == key
    assert not (tmp_path / "master.key").exists()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("not base64!", "LAKEWARD_MASTER_KEY is not valid base64"),
        (base64.b64encode(b"x" * 16).decode(), "LAKEWARD_MASTER_KEY decodes to 16 bytes"),
        ("", "LAKEWARD_MASTER_KEY decodes to 0 bytes"),
    ],
)
def test_bad_env_key(tmp_path: Path, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_master_key(tmp_path, env={"LAKEWARD_MASTER_KEY": value})


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_key_file_open_to_others_is_refused(tmp_path: Path) -> None:
    load_master_key(tmp_path, env={})
    path = tmp_path / "master.key"
    path.chmod(0o640)
    with pytest.raises(ConfigError) as caught:
        load_master_key(tmp_path, env={})
    assert str(path) in str(caught.value)
    assert f"chmod 600 {path}" in str(caught.value)


def test_key_file_of_wrong_length_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    path.write_bytes(b"x" * 31)
    path.chmod(0o600)
    with pytest.raises(ConfigError, match="holds 31 bytes, not 32") as caught:
        load_master_key(tmp_path, env={})
    assert str(path) in str(caught.value)


def test_subkeys_differ_by_purpose() -> None:
    master = os.urandom(32)
    subkeys = {
        p: derive_key(master, p) for p in (keys.SECRETS, keys.ACCESS_KEY_SECRETS, keys.SESSIONS)
    }
    assert len(set(subkeys.values())) == 3
    assert all(len(k) == 32 for k in subkeys.values())
    assert derive_key(master, keys.SECRETS) == subkeys[keys.SECRETS]
    assert master not in subkeys.values()
    with pytest.raises(ValueError):
        derive_key(b"short", keys.SECRETS)
