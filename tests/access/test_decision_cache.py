"""Cached access decisions: invalidated by any IAM change, from any process, at the next call.

Each call below stands for one API request (its own request id), as the server
makes them; the IAM changes come from another process (the ``lakeward iam``
command) or from this one.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lakeward.access import current_request_id
from lakeward.access.control import AccessControl, Identity
from lakeward.config import Settings, load_settings
from lakeward.errors import AccessDenied
from tests.helpers import lakeward

WORKGROUP = "arn:lakeward:athena:::workgroup/primary"
ALLOW_START = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "athena:Start*", "Resource": WORKGROUP}],
}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(data_dir=tmp_path / "data", env={})


@pytest.fixture
def access(settings: Settings) -> Iterator[AccessControl]:
    access = AccessControl(settings)
    access.principals.create_user("dana")
    access.principals.create_policy("StartQueries", json.dumps(ALLOW_START))
    access.principals.attach_user_policy("dana", "StartQueries")
    yield access


def request(access: AccessControl, context: dict[str, object] | None = None) -> str:
    """One API request's decision on StartQueryExecution, as the server makes it."""
    token = current_request_id.set(str(uuid.uuid4()))
    try:
        return access.decide(
            Identity("dana"), "athena:StartQueryExecution", WORKGROUP, context
        ).decision
    finally:
        current_request_id.reset(token)


def test_a_change_made_by_another_process_decides_the_very_next_request(
    access: AccessControl, settings: Settings
) -> None:
    assert [request(access) for _ in range(3)] == ["allowed"] * 3  # the later ones cached
    lakeward(
        "iam", "detach-user-policy", "--user", "dana", "--policy", "StartQueries",
        data_dir=settings.data_dir,
    )  # fmt: skip
    assert request(access) == "implicitDeny"
    lakeward(
        "iam", "attach-user-policy", "--user", "dana", "--policy", "StartQueries",
        data_dir=settings.data_dir,
    )  # fmt: skip
    assert request(access) == "allowed"
    # A group the user joins elsewhere, with a Deny attached: the next request sees it.
    deny = {**ALLOW_START, "Statement": [{**ALLOW_START["Statement"][0], "Effect": "Deny"}]}
    other = AccessControl(settings)  # another server process over the same IAM database
    other.principals.create_group("Blocked")
    other.principals.create_policy("NoStarts", json.dumps(deny))
    other.principals.attach_group_policy("Blocked", "NoStarts")
    assert request(access) == "allowed"
    other.principals.add_user_to_group("dana", "Blocked")
    assert request(access) == "explicitDeny"


def test_a_change_made_mid_request_through_this_process_is_seen_at_once(
    access: AccessControl,
) -> None:
    token = current_request_id.set("one-request")
    try:
        identity = Identity("dana")
        assert access.decide(identity, "athena:StartQueryExecution", WORKGROUP).allowed
        access.principals.detach_user_policy("dana", "StartQueries")
        decision = access.decide(identity, "athena:StartQueryExecution", WORKGROUP)
        assert decision.decision == "implicitDeny"
    finally:
        current_request_id.reset(token)


def test_decisions_differ_by_the_context_keys_conditions_read(access: AccessControl) -> None:
    from_office = {
        **ALLOW_START,
        "Statement": [
            {
                **ALLOW_START["Statement"][0],
                "Condition": {"IpAddress": {"aws:SourceIp": "10.1.0.0/16"}},
            }
        ],
    }
    access.principals.detach_user_policy("dana", "StartQueries")
    access.principals.create_policy("FromOffice", json.dumps(from_office))
    access.principals.attach_user_policy("dana", "FromOffice")
    answers = [
        request(access, {"aws:SourceIp": ip})
        for ip in ("10.1.2.3", "192.168.0.9", "10.1.2.3", "192.168.0.9", "10.1.200.1")
    ]
    assert answers == ["allowed", "implicitDeny", "allowed", "implicitDeny", "allowed"]
    assert request(access) == "implicitDeny"  # the key absent: the condition is false


def test_decisions_that_read_the_time_are_never_cached(access: AccessControl) -> None:
    until_2030 = {
        **ALLOW_START,
        "Statement": [
            {
                **ALLOW_START["Statement"][0],
                "Condition": {"DateLessThan": {"aws:CurrentTime": "2030-01-01T00:00:00Z"}},
            }
        ],
    }
    access.principals.detach_user_policy("dana", "StartQueries")
    access.principals.create_policy("Until2030", json.dumps(until_2030))
    access.principals.attach_user_policy("dana", "Until2030")
    before, after = datetime(2029, 12, 31, tzinfo=UTC), datetime(2030, 1, 2, tzinfo=UTC)
    answers = [request(access, {"aws:CurrentTime": t}) for t in (before, after, before, after)]
    assert answers == ["allowed", "implicitDeny", "allowed", "implicitDeny"]


def test_the_cache_gives_the_answers_evaluation_gives(
    access: AccessControl, settings: Settings
) -> None:
    uncached = AccessControl(settings, cache_decisions=False)
    resources = [WORKGROUP, "arn:lakeward:athena:::workgroup/other", WORKGROUP.upper()]
    actions = ["athena:StartQueryExecution", "ATHENA:startqueryexecution", "athena:GetWorkGroup"]
    for _ in range(2):
        for action in actions:
            for resource in resources:
                token = current_request_id.set(str(uuid.uuid4()))
                try:
                    cached = access.decide(Identity("dana"), action, resource)
                    fresh = uncached.decide(Identity("dana"), action, resource)
                finally:
                    current_request_id.reset(token)
                assert cached == fresh, (action, resource)


def test_a_calls_decisions_are_recorded_together_up_to_the_first_refusal(
    access: AccessControl,
) -> None:
    asked = [
        ("athena:StartQueryExecution", WORKGROUP),
        ("lakeward:UseCatalog", "arn:lakeward:athena:::datacatalog/awsdatacatalog"),
        ("athena:StartQueryExecution", WORKGROUP + "-never-asked"),
    ]
    with pytest.raises(AccessDenied, match="lakeward:UseCatalog on resource: .*awsdatacatalog$"):
        access.authorize_all(asked, principal="dana")
    assert getattr(access.authorize_all(asked[:1], principal="dana"), "name", None) == "dana"
    records = access.audit.query(principal="arn:lakeward:iam:::user/dana")
    assert [(r.action, r.resource, r.decision) for r in records] == [
        ("athena:StartQueryExecution", WORKGROUP, "allowed"),
        ("lakeward:UseCatalog", asked[1][1], "implicitDeny"),
        ("athena:StartQueryExecution", WORKGROUP, "allowed"),
    ]
    assert access.audit.verify().ok
