"""The IAM principal store: one behaviour suite, run on SQLite and on PostgreSQL.

PostgreSQL is expected on 127.0.0.1:5432 (trust auth, user postgres); each test
gets a schema of its own (the ``db`` fixture of tests/conftest.py). Without PostgreSQL
(or psycopg) those tests skip, and under CI=true they fail.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from argon2 import PasswordHasher, extract_parameters
from sqlalchemy import select, update

from lakeward import sqlstate
from lakeward.access import schema
from lakeward.access.principals import ADMIN_POLICIES, Principals
from lakeward.errors import AccessDenied, ConfigError, InvalidRequest, ResourceNotFound

KEY = os.urandom(32)
ADMIN = next(iter(ADMIN_POLICIES))
T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def doc(action: str = "s3:GetObject", resource: str = "*") -> dict[str, Any]:
    statement = {"Effect": "Allow", "Action": action, "Resource": resource}
    return {"Version": "2012-10-17", "Statement": [statement]}


def cheap_hasher() -> PasswordHasher:
    # Still argon2id; only the cost is low, so that the lockout tests stay quick.
    return PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)


# -- backends ---------------------------------------------------------------


@pytest.fixture
def database(db: str | Path) -> str | Path:
    """Where a store lives: the shared ``db`` fixture's SQLite file or PostgreSQL schema,
    the latter named with the bare scheme, as a user would write it (the store picks
    psycopg 3)."""
    return db.replace("postgresql+psycopg://", "postgresql://", 1) if isinstance(db, str) else db


@pytest.fixture
def open_store(database: str | Path) -> Iterator[Callable[..., Principals]]:
    opened: list[Principals] = []

    def open_(**kwargs: Any) -> Principals:
        kwargs.setdefault("secret_key", KEY)
        kwargs.setdefault("password_hasher", cheap_hasher())
        store = Principals(database, **kwargs)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


@pytest.fixture
def iam(open_store: Callable[..., Principals]) -> Principals:
    return open_store()


def raw(iam: Principals, query: Any) -> list[Any]:
    with iam.engine.connect() as conn:
        return list(conn.execute(query).all())


# -- names and duplicates -----------------------------------------------------


@pytest.mark.parametrize("bad", ["", "has space", "x" * 65, "slash/name", "ünï", "semi;colon"])
def test_bad_names_are_refused_and_named(iam: Principals, bad: str) -> None:
    for create in (iam.create_user, iam.create_group, iam.create_role):
        with pytest.raises(InvalidRequest, match=re.escape(repr(bad))):
            create(bad)
    policy_name = "p" * 129 if len(bad) == 65 else bad  # policy names may be 128 long
    with pytest.raises(InvalidRequest, match=f"invalid policy name {re.escape(repr(policy_name))}"):
        iam.create_policy(policy_name, doc())


def test_names_use_the_whole_iam_alphabet_and_lengths(iam: Principals) -> None:
    name = "Aa0+=,.@_-"
    iam.create_user(name)
    iam.create_group("g" * 64)
    iam.create_role("r" * 64)
    iam.create_policy("p" * 128, doc())
    assert [u.name for u in iam.list_users()] == [name]
    assert [g.name for g in iam.list_groups()] == ["g" * 64]
    assert [r.name for r in iam.list_roles()] == ["r" * 64]
    assert iam.get_policy("p" * 128).name == "p" * 128


def test_duplicates_are_refused(iam: Principals) -> None:
    iam.create_user("alice")
    iam.create_group("team")
    iam.create_role("etl")
    iam.create_policy("Read", doc())
    creators: list[tuple[Callable[[str], object], str]] = [
        (iam.create_user, "user alice"),
        (iam.create_group, "group team"),
        (iam.create_role, "role etl"),
    ]
    for create, what in creators:
        with pytest.raises(InvalidRequest, match=f"{what} already exists"):
            create(what.split()[1])
    with pytest.raises(InvalidRequest, match="policy Read already exists"):
        iam.create_policy("Read", doc())


# -- users and passwords ------------------------------------------------------


def test_users_are_created_listed_and_deleted(iam: Principals) -> None:
    iam.create_user("bob", password="correct horse")
    iam.create_user("alice")
    assert [(u.name, u.has_password) for u in iam.list_users()] == [
        ("alice", False),
        ("bob", True),
    ]
    assert iam.get_user("bob").created.tzinfo is not None
    iam.delete_user("bob")
    with pytest.raises(ResourceNotFound, match="user bob does not exist"):
        iam.get_user("bob")
    with pytest.raises(ResourceNotFound):
        iam.delete_user("bob")


def test_passwords_are_stored_as_argon2id_hashes_only(iam: Principals) -> None:
    iam.create_user("bob", password="correct horse")
    (stored,) = raw(iam, select(schema.users.c.password_hash))[0]
    assert stored.startswith("$argon2id$")
    assert "correct horse" not in stored
    assert iam.check_password("bob", "correct horse", now=T0)
    assert not iam.check_password("bob", "wrong", now=T0)
    with pytest.raises(InvalidRequest):
        iam.create_user("carol", password="")


def test_set_password_replaces_and_removes(iam: Principals) -> None:
    iam.create_user("bob", password="one")
    iam.set_password("bob", "two")
    assert not iam.check_password("bob", "one", now=T0)
    assert iam.check_password("bob", "two", now=T0)
    iam.set_password("bob", None)
    assert not iam.check_password("bob", "two", now=T0)
    assert not iam.get_user("bob").has_password
    with pytest.raises(ResourceNotFound):
        iam.set_password("nobody", "x")


def fail(iam: Principals, times: int, at: datetime) -> None:
    for _ in range(times):
        assert not iam.check_password("bob", "wrong", now=at)


def test_lockout_after_five_failures_with_doubling_backoff(iam: Principals) -> None:
    iam.create_user("bob", password="right")
    fail(iam, 4, T0)
    assert iam.check_password("bob", "right", now=T0)  # a success starts the count over
    fail(iam, 5, T0)
    with pytest.raises(AccessDenied, match=r"too many failed logins; try again in 30 s"):
        iam.check_password("bob", "right", now=T0)
    with pytest.raises(AccessDenied, match=r"try again in 20 s"):
        iam.check_password("bob", "right", now=T0 + timedelta(seconds=10))
    # Five more failures once it is lifted: locked again, for twice as long.
    later = T0 + timedelta(seconds=30)
    fail(iam, 5, later)
    with pytest.raises(AccessDenied, match=r"try again in 60 s"):
        iam.check_password("bob", "right", now=later)
    later += timedelta(seconds=60)
    fail(iam, 5, later)
    with pytest.raises(AccessDenied, match=r"try again in 120 s"):
        iam.check_password("bob", "wrong", now=later)
    # A success resets the backoff.
    later += timedelta(seconds=120)
    assert iam.check_password("bob", "right", now=later)
    fail(iam, 5, later)
    with pytest.raises(AccessDenied, match=r"try again in 30 s"):
        iam.check_password("bob", "right", now=later)


def test_backoff_is_capped_at_an_hour(iam: Principals) -> None:
    iam.create_user("bob", password="right")
    at = T0
    for expected in [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]:
        fail(iam, 5, at)
        with pytest.raises(AccessDenied, match=rf"try again in {expected} s"):
            iam.check_password("bob", "right", now=at)
        at += timedelta(seconds=expected)


def test_a_locked_account_does_not_check_the_password(
    iam: Principals, monkeypatch: pytest.MonkeyPatch
) -> None:
    iam.create_user("bob", password="right")
    fail(iam, 5, T0)
    checked: list[str] = []

    def verify(hashed: str, password: str) -> bool:
        checked.append(hashed)
        return True

    monkeypatch.setattr(iam, "_verify", verify)
    with pytest.raises(AccessDenied):
        iam.check_password("bob", "right", now=T0 + timedelta(seconds=1))
    assert checked == []


def test_set_password_lifts_a_lockout(iam: Principals) -> None:
    iam.create_user("bob", password="right")
    fail(iam, 5, T0)
    iam.set_password("bob", "new")
    assert iam.check_password("bob", "new", now=T0)


def test_unknown_users_are_verified_against_a_dummy_hash(
    iam: Principals, monkeypatch: pytest.MonkeyPatch
) -> None:
    iam.create_user("bob", password="right")
    iam.create_user("nopass")
    (real,) = raw(iam, select(schema.users.c.password_hash))[0]
    original = iam._verify
    checked: list[str] = []

    def spy(hashed: str, password: str) -> bool:
        checked.append(hashed)
        return original(hashed, password)

    monkeypatch.setattr(iam, "_verify", spy)
    assert not iam.check_password("ghost", "right", now=T0)
    assert not iam.check_password("nopass", "right", now=T0)
    assert len(checked) == 2 and checked[0] == checked[1] != real
    # The same cost as a real hash, so the time taken is the same.
    assert extract_parameters(checked[0]) == extract_parameters(real)
    # Unknown users never lock (nothing is stored for them) and are never let in.
    fail_at = T0 + timedelta(seconds=1)
    for _ in range(6):
        assert not iam.check_password("ghost", "anything", now=fail_at)
    assert [u.name for u in iam.list_users()] == ["bob", "nopass"]


def test_a_hasher_other_than_argon2id_is_refused(database: str | Path) -> None:
    from argon2 import Type

    with pytest.raises(ConfigError, match="argon2id"):
        Principals(database, secret_key=KEY, password_hasher=PasswordHasher(type=Type.I))


def test_hashes_with_old_parameters_are_redone_at_login(
    open_store: Callable[..., Principals],
) -> None:
    old = open_store()
    old.create_user("bob", password="right")
    stronger = PasswordHasher(time_cost=2, memory_cost=128, parallelism=1)
    new = open_store(password_hasher=stronger)
    assert new.check_password("bob", "right", now=T0)
    (stored,) = raw(new, select(schema.users.c.password_hash))[0]
    assert extract_parameters(stored).time_cost == 2


# -- access keys ----------------------------------------------------------------


def test_access_keys_look_like_aws_and_are_stored_encrypted(iam: Principals) -> None:
    iam.create_user("bob")
    key_id, secret = iam.create_access_key("bob")
    assert re.fullmatch(r"AKLW[A-Z2-7]{16}", key_id)
    assert len(secret) == 40
    assert iam.lookup_key(key_id) == ("bob", secret)
    (sealed,) = raw(iam, select(schema.access_keys.c.secret))[0]
    assert secret.encode() not in bytes(sealed)
    (listed,) = iam.list_access_keys("bob")
    assert (listed.key_id, listed.status, listed.last_used) == (key_id, "Active", None)


def test_a_different_encryption_key_cannot_read_secrets(
    open_store: Callable[..., Principals],
) -> None:
    iam = open_store()
    iam.create_user("bob")
    key_id, _secret = iam.create_access_key("bob")
    other = open_store(secret_key=os.urandom(32))
    with pytest.raises(ConfigError, match="does not decrypt"):
        other.lookup_key(key_id)
    with pytest.raises(ConfigError, match="32"):
        open_store(secret_key=b"short")


def test_at_most_two_access_keys(iam: Principals) -> None:
    iam.create_user("bob")
    iam.create_access_key("bob")
    iam.create_access_key("bob")
    with pytest.raises(InvalidRequest, match="already has 2 access keys"):
        iam.create_access_key("bob")
    with pytest.raises(ResourceNotFound):
        iam.create_access_key("nobody")


def test_inactive_keys_and_keys_of_deleted_users_are_not_found(iam: Principals) -> None:
    iam.create_user("bob")
    key_id, secret = iam.create_access_key("bob")
    iam.update_access_key(key_id, active=False)
    assert iam.lookup_key(key_id) is None
    assert iam.list_access_keys("bob")[0].status == "Inactive"
    iam.update_access_key(key_id, active=True)
    assert iam.lookup_key(key_id) == ("bob", secret)
    assert iam.lookup_key("AKLWAAAAAAAAAAAAAAAA") is None
    iam.delete_user("bob")
    assert iam.lookup_key(key_id) is None
    with pytest.raises(ResourceNotFound):
        iam.update_access_key(key_id, active=True)
    with pytest.raises(ResourceNotFound):
        iam.delete_access_key(key_id)


def test_key_rotation(iam: Principals) -> None:
    iam.create_user("bob")
    old_id, old_secret = iam.create_access_key("bob")
    new_id, new_secret = iam.create_access_key("bob")
    assert iam.lookup_key(old_id) == ("bob", old_secret)  # both work during the switch
    assert iam.lookup_key(new_id) == ("bob", new_secret)
    iam.update_access_key(old_id, active=False)
    assert iam.lookup_key(old_id) is None
    iam.delete_access_key(old_id)
    assert [k.key_id for k in iam.list_access_keys("bob")] == [new_id]
    third_id, _ = iam.create_access_key("bob")  # room again for the next rotation
    assert {k.key_id for k in iam.list_access_keys("bob")} == {new_id, third_id}


def test_key_usage_is_recorded_and_never_goes_back(iam: Principals) -> None:
    iam.create_user("bob")
    key_id, _ = iam.create_access_key("bob")
    iam.mark_key_used(key_id, T0)
    iam.mark_key_used(key_id, T0 - timedelta(hours=1))
    assert iam.list_access_keys("bob")[0].last_used == T0
    iam.mark_key_used(key_id, T0 - timedelta(days=1))
    iam.flush_key_usage()
    assert iam.list_access_keys("bob")[0].last_used == T0
    iam.mark_key_used(key_id, T0 + timedelta(minutes=5))
    iam.mark_key_used("AKLWGONEGONEGONEGONE", T0)  # a key deleted meanwhile is ignored
    assert iam.list_access_keys("bob")[0].last_used == T0 + timedelta(minutes=5)


# -- groups -----------------------------------------------------------------------


def test_group_membership(iam: Principals) -> None:
    iam.create_user("alice")
    iam.create_user("bob")
    iam.create_group("Sales")
    iam.create_group("Eng")
    iam.add_user_to_group("bob", "Sales")
    iam.add_user_to_group("alice", "Sales")
    iam.add_user_to_group("alice", "Sales")  # idempotent
    iam.add_user_to_group("alice", "Eng")
    assert iam.members_of("Sales") == ["alice", "bob"]
    assert iam.groups_of("alice") == ["Eng", "Sales"]
    iam.remove_user_from_group("alice", "Sales")
    assert iam.members_of("Sales") == ["bob"]
    with pytest.raises(ResourceNotFound, match="not in group Sales"):
        iam.remove_user_from_group("alice", "Sales")
    with pytest.raises(ResourceNotFound, match="group Nope"):
        iam.add_user_to_group("alice", "Nope")
    with pytest.raises(ResourceNotFound, match="user carol"):
        iam.add_user_to_group("carol", "Sales")


def test_deleting_a_group_in_use_is_refused(iam: Principals) -> None:
    iam.create_user("a")
    iam.create_user("b")
    iam.create_group("G")
    iam.create_policy("Read", doc())
    iam.add_user_to_group("b", "G")
    iam.add_user_to_group("a", "G")
    with pytest.raises(InvalidRequest, match="group G still has members: a, b"):
        iam.delete_group("G")
    iam.remove_user_from_group("a", "G")
    iam.remove_user_from_group("b", "G")
    iam.attach_group_policy("G", "Read")
    with pytest.raises(InvalidRequest, match="group G still has attached policies: Read"):
        iam.delete_group("G")
    iam.detach_group_policy("G", "Read")
    iam.put_group_policy("G", "extra", doc())
    with pytest.raises(InvalidRequest, match="group G still has inline policies: extra"):
        iam.delete_group("G")
    iam.delete_group_policy("G", "extra")
    iam.delete_group("G")
    assert iam.list_groups() == []
    with pytest.raises(ResourceNotFound):
        iam.delete_group("G")


# -- roles ------------------------------------------------------------------------


def test_roles(iam: Principals) -> None:
    iam.create_role("bi-service", "The BI service")
    iam.create_role("etl")
    assert [(r.name, r.description) for r in iam.list_roles()] == [
        ("bi-service", "The BI service"),
        ("etl", ""),
    ]
    iam.create_policy("Read", doc())
    iam.attach_role_policy("etl", "Read")
    iam.put_role_policy("etl", "spill", doc("s3:PutObject"))
    assert [n for n, _ in iam.policies_for_role("etl")] == ["Read", "role/etl/spill"]
    iam.detach_role_policy("etl", "Read")
    iam.attach_role_policy("etl", "Read")
    iam.delete_role("etl")  # takes its attachments and inline policies along
    assert iam.get_policy("Read").attachment_count == 0
    assert iam.policies_for_role("etl") == []
    with pytest.raises(ResourceNotFound):
        iam.delete_role("etl")


# -- managed and inline policies ------------------------------------------------


def test_policies_are_validated_and_stored_as_json(iam: Principals) -> None:
    iam.create_policy("FromDict", doc(), description="reads")
    iam.create_policy("FromText", json.dumps(doc("s3:ListBucket")))
    assert iam.get_policy("FromDict") == ("FromDict", doc(), "reads", 0)
    assert iam.get_policy("FromText").document == doc("s3:ListBucket")
    assert [p.name for p in iam.list_policies()] == ["FromDict", "FromText"]
    bad = {"Version": "2012-10-17", "Statement": [{"Effect": "Maybe", "Action": "*"}]}
    with pytest.raises(InvalidRequest):
        iam.create_policy("Bad", bad)
    with pytest.raises(InvalidRequest):
        iam.create_policy("Bad", "{not json")
    iam.create_user("u")
    with pytest.raises(InvalidRequest):
        iam.put_user_policy("u", "bad", bad)
    assert [p.name for p in iam.list_policies()] == ["FromDict", "FromText"]
    with pytest.raises(ResourceNotFound):
        iam.get_policy("Bad")


def test_attachments_and_refusals(iam: Principals) -> None:
    iam.create_user("u")
    iam.create_group("G")
    iam.create_role("R")
    iam.create_policy("P", doc())
    iam.attach_user_policy("u", "P")
    iam.attach_user_policy("u", "P")  # idempotent
    iam.attach_group_policy("G", "P")
    iam.attach_role_policy("R", "P")
    assert iam.get_policy("P").attachment_count == 3
    assert iam.list_policies()[0].attachment_count == 3
    with pytest.raises(
        InvalidRequest, match="policy P is still attached to: user/u, group/G, role/R"
    ):
        iam.delete_policy("P")
    iam.detach_user_policy("u", "P")
    iam.detach_group_policy("G", "P")
    iam.detach_role_policy("R", "P")
    for detach, principal in [
        (iam.detach_user_policy, "u"),
        (iam.detach_group_policy, "G"),
        (iam.detach_role_policy, "R"),
    ]:
        with pytest.raises(ResourceNotFound, match=f"policy P is not attached to .* {principal}"):
            detach(principal, "P")
    with pytest.raises(ResourceNotFound, match="policy Nope"):
        iam.attach_user_policy("u", "Nope")
    with pytest.raises(ResourceNotFound, match="user ghost"):
        iam.attach_user_policy("ghost", "P")
    iam.delete_policy("P")
    with pytest.raises(ResourceNotFound):
        iam.delete_policy("P")


def test_inline_policies_are_replaced_and_deleted(iam: Principals) -> None:
    iam.create_user("u")
    iam.put_user_policy("u", "mine", doc("s3:GetObject"))
    iam.put_user_policy("u", "mine", doc("s3:PutObject"))
    assert iam.policies_for_user("u") == [("user/u/mine", doc("s3:PutObject"))]
    iam.delete_user_policy("u", "mine")
    assert iam.policies_for_user("u") == []
    with pytest.raises(ResourceNotFound, match="user u has no inline policy mine"):
        iam.delete_user_policy("u", "mine")
    with pytest.raises(ResourceNotFound):
        iam.put_group_policy("NoGroup", "x", doc())
    with pytest.raises(InvalidRequest, match="invalid policy name"):
        iam.put_user_policy("u", "bad name", doc())


def test_policies_for_user_gathers_direct_group_and_inline(iam: Principals) -> None:
    iam.create_user("de_user")
    iam.create_user("other")
    for name in ("DataBucketReadAccessPolicy", "AthenaQueryAccessPolicy", "Unrelated"):
        iam.create_policy(name, doc(resource=f"arn:lakeward:s3:::{name}"))
    iam.create_group("DataEngineerGroup")
    iam.create_group("SalesGroup")
    iam.add_user_to_group("de_user", "DataEngineerGroup")
    iam.add_user_to_group("de_user", "SalesGroup")
    iam.attach_user_policy("de_user", "DataBucketReadAccessPolicy")
    iam.attach_group_policy("DataEngineerGroup", "AthenaQueryAccessPolicy")
    iam.attach_group_policy("SalesGroup", "AthenaQueryAccessPolicy")  # reached twice
    iam.attach_user_policy("other", "Unrelated")
    iam.put_user_policy("de_user", "own", doc("s3:PutObject"))
    iam.put_group_policy("SalesGroup", "sales-extra", doc("athena:*"))
    iam.put_user_policy("other", "not-mine", doc())
    assert iam.policies_for_user("de_user") == [
        ("AthenaQueryAccessPolicy", doc(resource="arn:lakeward:s3:::AthenaQueryAccessPolicy")),
        (
            "DataBucketReadAccessPolicy",
            doc(resource="arn:lakeward:s3:::DataBucketReadAccessPolicy"),
        ),
        ("group/SalesGroup/sales-extra", doc("athena:*")),
        ("user/de_user/own", doc("s3:PutObject")),
    ]
    assert iam.policies_for_user("nobody") == []


# -- administrators ---------------------------------------------------------------


def test_the_last_administrator_cannot_be_deleted(iam: Principals) -> None:
    iam.create_policy(ADMIN, doc("*"))
    iam.create_user("root_admin")
    iam.create_user("plain")
    iam.attach_user_policy("root_admin", ADMIN)
    iam.delete_user("plain")  # not an administrator: fine
    with pytest.raises(InvalidRequest, match="user root_admin is the last administrator"):
        iam.delete_user("root_admin")
    with pytest.raises(InvalidRequest, match="last administrator"):
        iam.detach_user_policy("root_admin", ADMIN)
    # An administrator through a group counts too; then the first may go.
    iam.create_group("Admins")
    iam.attach_group_policy("Admins", ADMIN)
    iam.create_user("second")
    iam.add_user_to_group("second", "Admins")
    iam.delete_user("root_admin")
    with pytest.raises(InvalidRequest, match="user second is the last administrator"):
        iam.remove_user_from_group("second", "Admins")
    with pytest.raises(InvalidRequest, match="last administrator"):
        iam.detach_group_policy("Admins", ADMIN)
    with pytest.raises(InvalidRequest, match="last administrator"):
        iam.delete_user("second")
    assert iam.members_of("Admins") == ["second"]


def test_administrators_by_callback(open_store: Callable[..., Principals]) -> None:
    iam = open_store(is_admin=lambda user: user.startswith("admin"))
    iam.create_user("admin1")
    iam.create_user("admin2")
    iam.create_user("user")
    iam.delete_user("admin1")
    iam.delete_user("user")
    with pytest.raises(InvalidRequest, match="user admin2 is the last administrator"):
        iam.delete_user("admin2")


def test_without_any_administrator_users_can_be_deleted(iam: Principals) -> None:
    iam.create_user("only")
    iam.delete_user("only")
    assert iam.list_users() == []


# -- generation ---------------------------------------------------------------------


def test_generation_moves_with_every_change_that_matters(
    open_store: Callable[..., Principals],
) -> None:
    iam = open_store()
    other_process = open_store()
    seen = [iam.generation()]

    def changed() -> None:
        now = iam.generation()
        assert now > seen[-1]
        assert other_process.generation() == now  # visible through the database at once
        seen.append(now)

    iam.create_user("u", password="pw")
    changed()
    iam.create_group("G")
    changed()
    iam.add_user_to_group("u", "G")
    changed()
    iam.create_policy("P", doc())
    changed()
    iam.attach_group_policy("G", "P")
    changed()
    iam.put_user_policy("u", "inline", doc())
    changed()
    key_id, _ = iam.create_access_key("u")
    changed()
    iam.update_access_key(key_id, active=False)
    changed()
    iam.delete_access_key(key_id)
    changed()
    iam.detach_group_policy("G", "P")
    changed()
    iam.remove_user_from_group("u", "G")
    changed()
    # Reads, logins and key usage leave it alone: caches stay valid.
    iam.policies_for_user("u")
    iam.check_password("u", "pw", now=T0)
    iam.check_password("u", "wrong", now=T0)
    iam.list_users()
    assert iam.generation() == seen[-1]
    # A refused change leaves it alone too.
    with pytest.raises(InvalidRequest):
        iam.create_user("u")
    assert iam.generation() == seen[-1]


# -- migrations -------------------------------------------------------------------


def test_migrations_are_idempotent(open_store: Callable[..., Principals]) -> None:
    iam = open_store()
    iam.create_user("kept")
    assert schema.migrate(iam.engine) == schema.LATEST
    again = open_store()
    assert [u.name for u in again.list_users()] == ["kept"]
    rows = raw(iam, select(sqlstate.schema_version))
    assert [(r.component, r.version) for r in rows] == [(schema.COMPONENT, schema.LATEST)]


def test_a_database_from_a_newer_version_is_refused(
    open_store: Callable[..., Principals],
) -> None:
    iam = open_store()
    with iam.engine.begin() as conn:
        conn.execute(update(sqlstate.schema_version).values(version=schema.LATEST + 1))
    with pytest.raises(ConfigError, match=rf"schema version {schema.LATEST + 1}, newer"):
        open_store()


def test_a_failed_migration_leaves_nothing_behind(
    database: str | Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(conn: Any) -> None:
        raise RuntimeError("step 2 broke")

    engine = sqlstate.open_engine(database)
    try:
        monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, broken])
        monkeypatch.setattr(schema, "LATEST", len(schema.MIGRATIONS))
        with pytest.raises(RuntimeError):
            schema.migrate(engine)
        with engine.connect() as conn:
            assert not conn.dialect.has_table(conn, schema.users.name)
            assert not conn.dialect.has_table(conn, sqlstate.schema_version.name)
    finally:
        engine.dispose()


def test_concurrent_deletions_keep_an_administrator(
    open_store: Callable[..., Principals],
) -> None:
    # Two processes each deleting one of the two administrators: writers are
    # serialized, so the second sees the first's deletion and is refused.
    setup = open_store()
    setup.create_policy(ADMIN, doc("*"))
    for name in ("admin1", "admin2"):
        setup.create_user(name)
        setup.attach_user_policy(name, ADMIN)
    stores = [open_store(), open_store()]
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def delete(store: Principals, name: str) -> None:
        barrier.wait()
        try:
            store.delete_user(name)
            outcomes.append("deleted")
        except InvalidRequest:
            outcomes.append("refused")

    threads = [
        threading.Thread(target=delete, args=(store, name))
        for store, name in zip(stores, ["admin1", "admin2"], strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["deleted", "refused"]
    assert len(setup.list_users()) == 1
