"""Who may read an execution: its owner, or whoever may read others' (docs/access.md).

A service over its own small state (no metastore: ``SELECT 1`` needs no table),
with two users of the same workgroup and a reviewer allowed others' executions.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeward.access import current_principal
from lakeward.access.arns import catalog_arn, s3_arn, workgroup_arn
from lakeward.access.control import AccessControl
from lakeward.config import load_settings
from lakeward.errors import AccessDenied
from lakeward.query.model import QueryState
from lakeward.query.owners import OTHERS_ACTION, OWNER_KEY
from lakeward.query.service import QueryService


def allow(*statements: tuple[list[str], list[str]]) -> dict[str, object]:
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": a, "Resource": r} for a, r in statements],
    }


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QueryService]:
    settings = load_settings(data_dir=tmp_path_factory.mktemp("owners") / "data", env={})
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    access = AccessControl(settings)
    bucket = settings.lake.data_bucket
    principals = access.principals
    principals.create_policy(
        "Query",
        allow(
            (["athena:*"], [workgroup_arn("primary")]),
            (["lakeward:UseCatalog"], [catalog_arn("*")]),
            (["s3:PutObject", "s3:GetObject"], [s3_arn(bucket, "*")]),
        ),
    )
    principals.create_policy("ReadOthers", allow(([OTHERS_ACTION], [workgroup_arn("primary")])))
    reads_alice = {
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow", "Action": OTHERS_ACTION, "Resource": workgroup_arn("primary"),
            "Condition": {"StringEquals": {OWNER_KEY: "alice"}},
        }],
    }  # fmt: skip
    principals.create_policy("ReadAlice", reads_alice)
    for user in ("alice", "bob", "reviewer", "alice_watcher"):
        principals.create_user(user)
        principals.attach_user_policy(user, "Query")
    principals.attach_user_policy("reviewer", "ReadOthers")
    principals.attach_user_policy("alice_watcher", "ReadAlice")
    service = QueryService(settings, access=access, owner=True)
    yield service
    service.close()


def run_as(service: QueryService, user: str, sql: str) -> str:
    token = current_principal.set(user)
    try:
        execution_id = service.start_query_execution(sql)
        deadline = time.monotonic() + 60
        while not (execution := service.get_query_execution(execution_id)).state.done:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert execution.state == QueryState.SUCCEEDED, execution.state_change_reason
        return execution_id
    finally:
        current_principal.reset(token)


def listed(service: QueryService, user: str) -> list[str]:
    token = current_principal.set(user)
    try:
        return service.list_query_executions("primary")[0]
    finally:
        current_principal.reset(token)


def reads(service: QueryService, user: str, execution_id: str) -> bool:
    token = current_principal.set(user)
    try:
        service.get_query_execution(execution_id)
        service.get_query_results(execution_id)
        return True
    except AccessDenied as exc:
        assert OTHERS_ACTION in exc.message
        return False
    finally:
        current_principal.reset(token)


def test_each_user_reads_their_own_executions_only(service: QueryService) -> None:
    mine = run_as(service, "alice", "SELECT 'alice secret' AS s")
    theirs = run_as(service, "bob", "SELECT 'bob secret' AS s")
    assert mine in listed(service, "alice") and theirs not in listed(service, "alice")
    assert theirs in listed(service, "bob") and mine not in listed(service, "bob")
    assert reads(service, "alice", mine) and not reads(service, "alice", theirs)
    assert not reads(service, "bob", mine)
    token = current_principal.set("bob")
    try:
        found, missing = service.batch_get_query_execution([mine, theirs])
    finally:
        current_principal.reset(token)
    assert [e.id for e in found] == [theirs] and [m[0] for m in missing] == [mine]


def test_a_policy_lets_a_reviewer_read_others(service: QueryService) -> None:
    mine = run_as(service, "alice", "SELECT 2 AS n")
    theirs = run_as(service, "bob", "SELECT 3 AS n")
    assert {mine, theirs} <= set(listed(service, "reviewer"))
    assert reads(service, "reviewer", mine) and reads(service, "reviewer", theirs)
    # Narrowed to one owner by the condition key: alice's, not bob's, and the list
    # (which names no owner) stays the watcher's own.
    assert reads(service, "alice_watcher", mine) and not reads(service, "alice_watcher", theirs)
    assert mine not in listed(service, "alice_watcher")


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        (
            "SELECT x FROM (SELECT 1 AS a)",
            "COLUMN_NOT_FOUND: line 1:8: Column 'x' cannot be resolved",
        ),
        # Inside an aggregate that lakeward turns into a macro with overloads.
        (
            "SELECT sum(deathz) FROM (SELECT 1 AS deaths)",
            "COLUMN_NOT_FOUND: line 1:12: Column 'deathz' cannot be resolved",
        ),
    ],
)
def test_a_failed_query_says_what_athena_says(service: QueryService, sql: str, reason: str) -> None:
    token = current_principal.set("alice")
    try:
        execution_id = service.start_query_execution(sql)
        while not (execution := service.get_query_execution(execution_id)).state.done:
            time.sleep(0.02)
    finally:
        current_principal.reset(token)
    assert execution.state == QueryState.FAILED
    assert execution.state_change_reason == reason


def test_a_retried_start_is_authorized_and_audited_like_the_first(service: QueryService) -> None:
    """A retry with the same ClientRequestToken (its answer was lost) names the same
    execution; it is decided and audited as a call of its own, as any answered call is."""
    service.access.principals.create_user("no_rights")
    audit = service.access.audit

    def starts() -> list[str]:  # the users, in order, of the recorded starts
        records = audit.query(action="athena:StartQueryExecution", limit=10_000)
        return [r.principal.rsplit("/", 1)[-1] for r in records]

    before = starts()
    token = current_principal.set("alice")
    try:
        first = service.start_query_execution("SELECT 4 AS n", client_request_token="retry-1")
        again = service.start_query_execution("SELECT 4 AS n", client_request_token="retry-1")
    finally:
        current_principal.reset(token)
    assert again == first
    assert starts()[len(before) :] == ["alice", "alice"]
    token = current_principal.set("no_rights")
    try:
        with pytest.raises(AccessDenied, match="athena:StartQueryExecution"):
            service.start_query_execution("SELECT 4 AS n", client_request_token="retry-1")
    finally:
        current_principal.reset(token)
    assert starts()[len(before) + 2 :] == ["no_rights"]


def test_a_query_stopped_by_its_process_stopping_fails_naming_that(tmp_path: Path) -> None:
    """A worker stopping (its supervisor died, say) ends its queries FAILED with that
    cause, not CANCELLED as if a user had stopped them."""
    settings = load_settings(data_dir=tmp_path / "data", env={})
    settings.data_dir.mkdir(parents=True)
    stopping = QueryService(settings, owner=True)
    slow = (
        "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 1000000000) "
        "SELECT count(*) FROM t"
    )
    execution_id = stopping.start_query_execution(slow)
    deadline = time.monotonic() + 60
    while stopping.get_query_execution(execution_id).state != QueryState.RUNNING:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    stopping.close()
    execution = stopping.store.execution(execution_id)
    assert execution is not None and execution.state == QueryState.FAILED
    assert execution.state_change_reason == (
        f"the server process running the query (pid {os.getpid()} on {socket.gethostname()}) "
        "was stopped; run it again"
    )
