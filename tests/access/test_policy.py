"""The policy language and its evaluator, against IAM's documented semantics."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import pytest

from lakeward.access.policy import (
    KNOWN_ACTIONS,
    Decision,
    PolicyDocument,
    Request,
    evaluate,
    parse_policy,
    policy_warnings,
)
from lakeward.errors import InvalidRequest

USER = "arn:lakeward:iam:::user/de_user"
WORKGROUP = "arn:lakeward:athena:::workgroup/primary"
DATA = "arn:lakeward:s3:::lakeward-data/raw/covid/confirmed.csv"
CATALOG = "arn:lakeward:athena:::datacatalog/"


def stmt(
    effect: str = "Allow", action: Any = "*", resource: Any = "*", **extra: Any
) -> dict[str, Any]:
    return {"Effect": effect, "Action": action, "Resource": resource, **extra}


def policy(*statements: dict[str, Any], version: str = "2012-10-17") -> PolicyDocument:
    return parse_policy({"Version": version, "Statement": list(statements)})


def decide(
    policies: list[tuple[str, PolicyDocument]] | PolicyDocument,
    action: str = "athena:StartQueryExecution",
    resource: str = WORKGROUP,
    context: Mapping[str, object] | None = None,
) -> Decision:
    if isinstance(policies, PolicyDocument):
        policies = [("p", policies)]
    return evaluate(policies, Request(USER, action, resource, context or {}))


def when(condition: dict[str, Any], context: Mapping[str, object]) -> bool:
    """Whether an Allow of everything under ``condition`` allows a request with ``context``."""
    return decide(policy(stmt(Condition=condition)), context=context).allowed


# ------------------------------------------------------------------------- evaluation


@pytest.mark.parametrize("deny_first", [True, False])
def test_explicit_deny_beats_allow_across_policies_in_either_order(deny_first: bool) -> None:
    allow = ("allow-all", policy(stmt(Sid="Everything")))
    deny = ("no-athena", policy(stmt("Deny", "athena:*", Sid="NoAthena")))
    policies = [deny, allow] if deny_first else [allow, deny]
    assert decide(policies) == Decision("explicitDeny", "no-athena/NoAthena")
    assert decide(policies, "s3:GetObject", DATA) == Decision("allowed", "allow-all/Everything")


def test_implicit_deny_when_nothing_matches() -> None:
    only_s3 = policy(stmt(action="s3:GetObject", resource="arn:lakeward:s3:::lakeward-data/*"))
    assert decide(only_s3) == Decision("implicitDeny", None)
    assert not decide(only_s3).allowed
    assert decide([]) == Decision("implicitDeny", None)
    assert decide(only_s3, "s3:GetObject", "arn:lakeward:s3:::elsewhere/x").decision == (
        "implicitDeny"
    )


def test_decision_names_first_matching_allow_and_deny_by_sid_or_index() -> None:
    first = policy(stmt(action="s3:*"), stmt(action="athena:Get*"), stmt(Sid="Any"))
    second = policy(stmt("Deny", "athena:List*"), stmt("Deny", "athena:*", Sid="Late"))
    assert decide([("a", first)]) == Decision("allowed", "a/Any")
    assert decide([("a", first)], "athena:GetWorkGroup").statement == "a/Statement[1]"
    both = [("a", first), ("b", second)]
    assert decide(both, "athena:ListWorkGroups") == Decision("explicitDeny", "b/Statement[0]")
    assert decide(both, "athena:GetWorkGroup") == Decision("explicitDeny", "b/Late")


@pytest.mark.parametrize(
    ("pattern", "action", "allowed"),
    [
        ("athena:Get*", "athena:GetQueryResults", True),
        ("athena:Get*", "athena:StartQueryExecution", False),
        ("athena:Get*", "athenax:GetQueryResults", False),
        ("athena:*", "athena:StopQueryExecution", True),
        ("athena:*", "s3:GetObject", False),
        ("*", "secretsmanager:GetSecretValue", True),
        ("s3:?etObject", "s3:GetObject", True),
        ("s3:?etObject", "s3:PutObject", False),  # ? is one character, not two
        ("s3:??Object", "s3:GetObject", False),
        ("iam:*AccessKey*", "iam:UpdateAccessKey", True),
        ("*:Get*", "athena:GetWorkGroup", True),
    ],
)
def test_action_wildcards(pattern: str, action: str, allowed: bool) -> None:
    assert decide(policy(stmt(action=pattern)), action).allowed is allowed


@pytest.mark.parametrize(
    ("pattern", "resource", "allowed"),
    [
        ("arn:lakeward:s3:::lakeward-data/*", DATA, True),  # * crosses "/"
        ("arn:lakeward:s3:::lakeward-data/*", "arn:lakeward:s3:::lakeward-data", False),
        ("arn:lakeward:s3:::lakeward-data/*", "arn:lakeward:s3:::lakeward-database/x", False),
        (CATALOG + "demo_*", CATALOG + "demo_sales", True),
        (CATALOG + "demo_*", CATALOG + "prod", False),
        (CATALOG + "demo_?", CATALOG + "demo_1", True),
        (CATALOG + "demo_?", CATALOG + "demo_", False),
        (CATALOG + "demo_?", CATALOG + "demo_12", False),
        ("arn:lakeward:*:::*", WORKGROUP, True),
        ("arn:lakeward:athena:::*primary", WORKGROUP, True),
        # * crosses ":" too, as IAM does for resources (unlike the ArnLike operator)
        ("arn:lakeward:*:::x", "arn:lakeward:a:b:::x", True),
        ("arn:lakeward:athena:*:*:workgroup/*", WORKGROUP, True),
        ("arn:lakeward:s3:::*", WORKGROUP, False),
        ("*", "arn:lakeward:secretsmanager:::secret/db", True),
    ],
)
def test_resource_wildcards(pattern: str, resource: str, allowed: bool) -> None:
    assert decide(policy(stmt(resource=pattern)), resource=resource).allowed is allowed


def test_actions_are_case_insensitive_resources_case_sensitive() -> None:
    doc = policy(stmt(action="s3:GetObject", resource="arn:lakeward:s3:::lakeward-data/*"))
    assert decide(doc, "S3:getobject", DATA).allowed
    assert decide(doc, "s3:GETOBJECT", DATA).allowed
    assert not decide(doc, "s3:GetObject", DATA.replace("lakeward-data", "Lakeward-Data")).allowed
    upper = policy(stmt(action="ATHENA:START*"))
    assert decide(upper, "athena:StartQueryExecution").allowed


def test_allow_with_not_action() -> None:
    doc = policy({"Effect": "Allow", "NotAction": ["iam:*", "secretsmanager:*"], "Resource": "*"})
    assert decide(doc, "s3:GetObject", DATA).allowed
    assert decide(doc, "athena:GetWorkGroup").allowed
    assert decide(doc, "iam:CreateUser").decision == "implicitDeny"
    assert decide(doc, "SecretsManager:GetSecretValue").decision == "implicitDeny"


def test_deny_with_not_resource() -> None:
    doc = policy(
        stmt(Sid="All"),
        {
            "Sid": "OnlyLakeData",
            "Effect": "Deny",
            "Action": "s3:*",
            "NotResource": ["arn:lakeward:s3:::lakeward-data", "arn:lakeward:s3:::lakeward-data/*"],
        },
    )
    assert decide(doc, "s3:GetObject", DATA) == Decision("allowed", "p/All")
    assert decide(doc, "s3:ListBucket", "arn:lakeward:s3:::lakeward-data").allowed
    assert decide(doc, "s3:GetObject", "arn:lakeward:s3:::other/x") == Decision(
        "explicitDeny", "p/OnlyLakeData"
    )
    assert decide(doc).allowed  # the Deny speaks only of s3 actions


# ------------------------------------------------------------------------- conditions

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
CONDITION_CASES: list[tuple[str, str, Any, object, bool]] = [
    # operator, key, policy value(s), request value, allowed
    ("StringEquals", "aws:username", "de_user", "de_user", True),
    ("StringEquals", "aws:username", "de_user", "DE_USER", False),
    ("StringNotEquals", "aws:username", "de_user", "ops", True),
    ("StringNotEquals", "aws:username", "de_user", "de_user", False),
    ("StringEqualsIgnoreCase", "aws:username", "de_user", "DE_User", True),
    ("StringEqualsIgnoreCase", "aws:username", "de_user", "ops", False),
    ("StringNotEqualsIgnoreCase", "aws:username", "de_user", "ops", True),
    ("StringNotEqualsIgnoreCase", "aws:username", "de_user", "DE_USER", False),
    ("StringLike", "s3:prefix", "home/*/reports/?", "home/de/a/reports/1", True),
    ("StringLike", "s3:prefix", "home/*/reports/?", "home/de/reports/12", False),
    ("StringNotLike", "s3:prefix", "tmp/*", "home/x", True),
    ("StringNotLike", "s3:prefix", "tmp/*", "tmp/x", False),
    ("NumericEquals", "s3:max-keys", "10", 10, True),
    ("NumericEquals", "s3:max-keys", 10, "10.0", True),
    ("NumericEquals", "s3:max-keys", "10", 11, False),
    ("NumericNotEquals", "s3:max-keys", "10", 11, True),
    ("NumericNotEquals", "s3:max-keys", "10", 10, False),
    ("NumericLessThan", "s3:max-keys", "10", 9, True),
    ("NumericLessThan", "s3:max-keys", "10", 10, False),
    ("NumericLessThanEquals", "s3:max-keys", "10", 10, True),
    ("NumericLessThanEquals", "s3:max-keys", "10", 10.5, False),
    ("NumericGreaterThan", "s3:max-keys", "10", "11", True),
    ("NumericGreaterThan", "s3:max-keys", "10", "10", False),
    ("NumericGreaterThanEquals", "s3:max-keys", 2.5, 2.5, True),
    ("NumericGreaterThanEquals", "s3:max-keys", 2.5, 2.4, False),
    ("NumericEquals", "s3:max-keys", "10", "ten", False),  # not a number: no match
    ("DateEquals", "aws:CurrentTime", "2025-06-01T12:00:00Z", NOW, True),
    ("DateEquals", "aws:CurrentTime", "2025-06-01T12:00:01Z", NOW, False),
    ("DateNotEquals", "aws:CurrentTime", "2025-06-01", NOW, True),
    ("DateNotEquals", "aws:CurrentTime", "2025-06-01T14:00:00+02:00", NOW, False),
    ("DateLessThan", "aws:CurrentTime", "2025-07-01T00:00:00Z", NOW, True),
    ("DateLessThan", "aws:CurrentTime", "2025-06-01T12:00:00Z", NOW, False),
    ("DateLessThanEquals", "aws:CurrentTime", "2025-06-01T12:00:00Z", NOW, True),
    ("DateLessThanEquals", "aws:CurrentTime", "2025-05-01", NOW, False),
    ("DateGreaterThan", "aws:CurrentTime", "2025-01-01", NOW, True),
    ("DateGreaterThan", "aws:CurrentTime", "2026-01-01", NOW, False),
    ("DateGreaterThanEquals", "aws:CurrentTime", "2025-06-01T12:00:00Z", NOW, True),
    ("DateGreaterThanEquals", "aws:CurrentTime", "2025-06-01T12:00:01Z", NOW, False),
    ("DateEquals", "aws:CurrentTime", int(NOW.timestamp()), NOW, True),  # epoch in the policy
    ("DateEquals", "aws:CurrentTime", str(int(NOW.timestamp())), NOW, True),
    ("DateLessThan", "aws:CurrentTime", "2025-07-01", NOW.timestamp(), True),  # epoch request
    ("DateLessThan", "aws:CurrentTime", "2025-07-01", "2025-08-01T00:00:00Z", False),
    ("DateLessThan", "aws:CurrentTime", "2025-07-01", datetime(2025, 6, 1), True),  # naive = UTC
    ("Bool", "aws:SecureTransport", "true", True, True),
    ("Bool", "aws:SecureTransport", "true", False, False),
    ("Bool", "aws:SecureTransport", False, "false", True),
    ("Bool", "aws:SecureTransport", "True", "TRUE", True),
    ("BinaryEquals", "lakeward:Blob", "QmluYXJ5", b"Binary", True),
    ("BinaryEquals", "lakeward:Blob", "QmluYXJ5", b"binary", False),
    ("IpAddress", "aws:SourceIp", "10.0.0.0/8", "10.20.30.40", True),
    ("IpAddress", "aws:SourceIp", "10.0.0.0/8", "192.168.0.1", False),
    ("IpAddress", "aws:SourceIp", "203.0.113.7", "203.0.113.7", True),  # a bare address
    ("IpAddress", "aws:SourceIp", "2001:db8::/32", "2001:db8:1::5", True),
    ("IpAddress", "aws:SourceIp", "2001:db8::/32", "2001:db9::5", False),
    ("IpAddress", "aws:SourceIp", "::/0", "10.0.0.1", False),  # v4 is not in a v6 range
    ("IpAddress", "aws:SourceIp", "10.0.0.0/8", "not an address", False),
    ("NotIpAddress", "aws:SourceIp", "10.0.0.0/8", "192.168.0.1", True),
    ("NotIpAddress", "aws:SourceIp", "10.0.0.0/8", "10.0.0.1", False),
    ("NotIpAddress", "aws:SourceIp", "fd00::/8", "fd12::1", False),
    ("ArnEquals", "aws:SourceArn", WORKGROUP, WORKGROUP, True),
    ("ArnEquals", "aws:SourceArn", WORKGROUP, WORKGROUP + "2", False),
    ("ArnLike", "aws:PrincipalArn", "arn:lakeward:iam:::user/*", USER, True),
    ("ArnLike", "aws:PrincipalArn", "arn:lakeward:iam:::role/*", USER, False),
    ("ArnLike", "aws:PrincipalArn", "arn:lakeward:*:::user/de_user", USER, True),
    # In ARN operators each of the first five segments is matched on its own.
    ("ArnLike", "aws:SourceArn", "arn:lakeward:*:::x", "arn:lakeward:a:b:::x", False),
    ("ArnLike", "aws:SourceArn", "arn:lakeward:s3:::b/*", "arn:lakeward:s3:::b/a:b", True),
    ("ArnNotEquals", "aws:PrincipalArn", "arn:lakeward:iam:::user/ops", USER, True),
    ("ArnNotEquals", "aws:PrincipalArn", USER, USER, False),
    ("ArnNotLike", "aws:PrincipalArn", "arn:lakeward:iam:::role/*", USER, True),
    ("ArnNotLike", "aws:PrincipalArn", "arn:lakeward:iam:::user/*", USER, False),
]


@pytest.mark.parametrize(("operator", "key", "value", "actual", "allowed"), CONDITION_CASES)
def test_condition_operator(
    operator: str, key: str, value: Any, actual: object, allowed: bool
) -> None:
    assert when({operator: {key: value}}, {key: actual}) is allowed


def test_every_operator_has_a_true_and_a_false_case() -> None:
    seen = {(op, allowed) for op, _, _, _, allowed in CONDITION_CASES}
    for op, *_ in CONDITION_CASES:
        assert (op, True) in seen and (op, False) in seen, op


def test_condition_keys_are_case_insensitive_values_case_sensitive() -> None:
    condition = {"StringEquals": {"AWS:UserName": "de_user"}}
    assert when(condition, {"aws:username": "de_user"})
    assert when(condition, {"Aws:USERNAME": "de_user"})
    assert not when(condition, {"aws:username": "De_User"})
    tag = {"StringEquals": {"aws:PrincipalTag/Team": "data"}}
    assert when(tag, {"aws:principaltag/team": "data"})


@pytest.mark.parametrize(
    "operator",
    ["StringEquals", "StringLike", "NumericLessThan", "DateGreaterThan", "Bool", "IpAddress"]
    + ["ArnLike", "BinaryEquals"],
)
def test_a_missing_key_makes_a_condition_false(operator: str) -> None:
    value = {
        "StringEquals": "x",
        "StringLike": "*",
        "NumericLessThan": "100",
        "DateGreaterThan": "2000-01-01",
        "Bool": "true",
        "IpAddress": "0.0.0.0/0",
        "ArnLike": "arn:*:*:*:*:*",
        "BinaryEquals": "eA==",
    }[operator]
    assert not when({operator: {"lakeward:Key": value}}, {"other": "x"})
    assert when({f"{operator}IfExists": {"lakeward:Key": value}}, {"other": "x"})


@pytest.mark.parametrize(
    "operator", ["StringNotEquals", "StringNotLike", "NumericNotEquals", "NotIpAddress"]
)
def test_a_missing_key_makes_a_negated_condition_true(operator: str) -> None:
    # IAM's documentation: "If the policy condition requires that the key is not matched,
    # such as StringNotLike or ArnNotLike, and the right key is not present, the
    # condition is true."
    value = "10.0.0.0/8" if operator == "NotIpAddress" else "1"
    assert when({operator: {"lakeward:Key": value}}, {})
    # A Deny on a missing key therefore applies: the classic way to require a key.
    doc = policy(stmt(), stmt("Deny", Condition={operator: {"lakeward:Key": value}}))
    assert decide(doc).decision == "explicitDeny"


def test_if_exists_checks_the_key_only_when_present() -> None:
    condition = {"StringEqualsIfExists": {"aws:PrincipalTag/team": "data"}}
    assert when(condition, {})
    assert when(condition, {"aws:PrincipalTag/team": "data"})
    assert not when(condition, {"aws:PrincipalTag/team": "ops"})
    negated = {"NumericNotEqualsIfExists": {"s3:max-keys": "10"}}
    assert when(negated, {})
    assert not when(negated, {"s3:max-keys": 10})
    ip = {"IpAddressIfExists": {"aws:SourceIp": "10.0.0.0/8"}}
    assert when(ip, {}) and when(ip, {"aws:SourceIp": "10.0.0.1"})
    assert not when(ip, {"aws:SourceIp": "11.0.0.1"})


@pytest.mark.parametrize(
    ("value", "context", "allowed"),
    [
        ("true", {}, True),
        ("true", {"aws:TokenIssueTime": None}, True),  # None counts as absent
        ("true", {"aws:TokenIssueTime": NOW}, False),
        ("false", {"aws:TokenIssueTime": NOW}, True),
        ("false", {}, False),
        (True, {}, True),
        ("false", {"aws:TagKeys": []}, False),  # an empty multi-valued key is absent
    ],
)
def test_null_checks_presence(value: object, context: dict[str, object], allowed: bool) -> None:
    key = "aws:TagKeys" if "aws:TagKeys" in context else "aws:TokenIssueTime"
    assert when({"Null": {key: value}}, context) is allowed


@pytest.mark.parametrize(
    ("operator", "tags", "allowed"),
    [
        ("ForAllValues:StringEquals", ["team", "env"], True),
        ("ForAllValues:StringEquals", ["team", "cost"], False),
        ("ForAllValues:StringEquals", None, True),  # vacuously true when the key is missing
        ("ForAllValues:StringEquals", [], True),
        ("ForAnyValue:StringEquals", ["cost", "env"], True),
        ("ForAnyValue:StringEquals", ["cost", "owner"], False),
        ("ForAnyValue:StringEquals", None, False),
        ("ForAnyValue:StringEquals", [], False),
        ("ForAllValues:StringLike", ["team-a", "env"], True),
        # Negated: each value must match none of the policy's values.
        ("ForAllValues:StringNotEquals", ["cost", "owner"], True),
        ("ForAllValues:StringNotEquals", ["cost", "team"], False),
        ("ForAllValues:StringNotEquals", None, True),
        ("ForAnyValue:StringNotEquals", ["team", "cost"], True),
        ("ForAnyValue:StringNotEquals", ["team", "env"], False),
        ("ForAnyValue:StringNotEquals", None, False),
        ("ForAnyValue:StringEqualsIfExists", None, True),
    ],
)
def test_set_operators(operator: str, tags: list[str] | None, allowed: bool) -> None:
    values = ["team*", "env"] if "Like" in operator else ["team", "env"]
    context: dict[str, object] = {} if tags is None else {"aws:TagKeys": tags}
    assert when({operator: {"aws:TagKeys": values}}, context) is allowed


def test_multiple_values_are_ored() -> None:
    condition = {"StringEquals": {"aws:username": ["de_user", "analyst"]}}
    assert when(condition, {"aws:username": "analyst"})
    assert when(condition, {"aws:username": "de_user"})
    assert not when(condition, {"aws:username": "ops"})


def test_multiple_keys_are_anded() -> None:
    condition = {"StringEquals": {"aws:username": "de_user", "aws:PrincipalTag/team": "data"}}
    assert when(condition, {"aws:username": "de_user", "aws:PrincipalTag/team": "data"})
    assert not when(condition, {"aws:username": "de_user", "aws:PrincipalTag/team": "ops"})
    assert not when(condition, {"aws:username": "de_user"})


def test_multiple_operators_are_anded() -> None:
    condition = {
        "IpAddress": {"aws:SourceIp": ["10.0.0.0/8", "2001:db8::/32"]},
        "Bool": {"aws:SecureTransport": "true"},
        "DateLessThan": {"aws:CurrentTime": "2030-01-01T00:00:00Z"},
    }
    good = {"aws:SourceIp": "2001:db8::1", "aws:SecureTransport": True, "aws:CurrentTime": NOW}
    assert when(condition, good)
    assert not when(condition, {**good, "aws:SecureTransport": False})
    assert not when(condition, {**good, "aws:SourceIp": "192.0.2.1"})
    assert not when(condition, {**good, "aws:CurrentTime": datetime(2031, 1, 1, tzinfo=UTC)})


def test_negated_operators_with_several_values_are_nored() -> None:
    condition = {"StringNotEquals": {"aws:username": ["root", "admin"]}}
    assert when(condition, {"aws:username": "de_user"})
    assert not when(condition, {"aws:username": "root"})
    assert not when(condition, {"aws:username": "admin"})
    ip = {"NotIpAddress": {"aws:SourceIp": ["10.0.0.0/8", "fd00::/8"]}}
    assert when(ip, {"aws:SourceIp": "192.0.2.1"})
    assert not when(ip, {"aws:SourceIp": "10.1.1.1"})
    assert not when(ip, {"aws:SourceIp": "fd00::1"})


def test_deny_outside_office_network() -> None:
    doc = policy(
        stmt(Sid="Work"),
        stmt("Deny", Sid="Office", Condition={"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}}),
    )
    assert decide(doc, context={"aws:SourceIp": "10.9.9.9"}) == Decision("allowed", "p/Work")
    assert decide(doc, context={"aws:SourceIp": "8.8.8.8"}) == Decision("explicitDeny", "p/Office")


# -------------------------------------------------------------------------- variables

HOME = "arn:lakeward:s3:::lakeward-data/home/${aws:username}/*"


def test_policy_variables_in_resources() -> None:
    doc = policy(stmt(action="s3:*", resource=HOME))
    mine = "arn:lakeward:s3:::lakeward-data/home/de_user/notes.csv"
    theirs = "arn:lakeward:s3:::lakeward-data/home/ops/notes.csv"
    assert decide(doc, "s3:GetObject", mine, {"aws:username": "de_user"}).allowed
    assert not decide(doc, "s3:GetObject", theirs, {"aws:username": "de_user"}).allowed
    # A value with wildcard characters is taken literally.
    assert not decide(doc, "s3:GetObject", mine, {"aws:username": "*"}).allowed
    # No value for the variable: the statement does not match.
    assert not decide(doc, "s3:GetObject", mine).allowed


def test_policy_variables_in_conditions() -> None:
    doc = policy(
        stmt(Condition={"StringLike": {"s3:prefix": "home/${aws:username}/*"}}),
        stmt(
            action="iam:GetUser",
            Condition={
                "ArnEquals": {"aws:PrincipalArn": "arn:lakeward:iam:::user/${aws:username}"}
            },
        ),
    )
    ctx = {"aws:username": "de_user", "s3:prefix": "home/de_user/x", "aws:PrincipalArn": USER}
    assert decide(doc, context=ctx).allowed
    assert not decide(doc, context={**ctx, "s3:prefix": "home/ops/x"}).allowed
    assert decide([("p", doc)], "iam:GetUser", context={**ctx, "s3:prefix": "-"}).allowed
    assert not decide(doc, context={"s3:prefix": "home/de_user/x"}).allowed  # no username


def test_missing_variable_makes_a_negated_condition_not_apply() -> None:
    deny = policy(
        stmt(),
        stmt("Deny", Condition={"StringNotEquals": {"aws:PrincipalTag/team": "${aws:username}"}}),
    )
    assert decide(deny, context={"aws:PrincipalTag/team": "ops"}).allowed


def test_missing_variable_makes_a_not_resource_statement_not_apply() -> None:
    doc = policy(stmt(), {"Effect": "Deny", "Action": "s3:*", "NotResource": HOME})
    assert decide(doc, "s3:GetObject", DATA).allowed
    assert decide(doc, "s3:GetObject", DATA, {"aws:username": "x"}).decision == "explicitDeny"


def test_variable_defaults_escapes_and_case() -> None:
    doc = policy(
        stmt(
            resource="arn:lakeward:s3:::b/${aws:PrincipalTag/team, 'shared'}/${*}",
            Condition={"StringEquals": {"lakeward:Note": "${$}5 for ${AWS:USERNAME}"}},
        )
    )
    ctx: dict[str, object] = {"lakeward:Note": "$5 for de", "aws:username": "de"}
    assert decide(doc, "s3:GetObject", "arn:lakeward:s3:::b/shared/*", ctx).allowed
    # ${*} is a literal star, not a wildcard.
    assert not decide(doc, "s3:GetObject", "arn:lakeward:s3:::b/shared/x", ctx).allowed
    ctx["aws:PrincipalTag/team"] = "data"
    assert decide(doc, "s3:GetObject", "arn:lakeward:s3:::b/data/*", ctx).allowed
    assert not decide(doc, "s3:GetObject", "arn:lakeward:s3:::b/shared/*", ctx).allowed
    del ctx["aws:username"]
    assert not decide(doc, "s3:GetObject", "arn:lakeward:s3:::b/data/*", ctx).allowed
    quoted = policy(stmt(resource="arn:lakeward:s3:::b/${aws:username, 'it''s'}"))
    assert decide(quoted, "s3:GetObject", "arn:lakeward:s3:::b/it's").allowed


def test_version_2008_takes_variables_literally() -> None:
    doc = policy(stmt(resource=HOME), version="2008-10-17")
    literal = "arn:lakeward:s3:::lakeward-data/home/${aws:username}/x"
    assert decide(doc, "s3:GetObject", literal, {"aws:username": "de_user"}).allowed
    home = "arn:lakeward:s3:::lakeward-data/home/de_user/x"
    assert not decide(doc, "s3:GetObject", home, {"aws:username": "de_user"}).allowed
    assert any(w.startswith("Version: policy variables") for w in policy_warnings(doc))


# ---------------------------------------------------------------------------- grammar


def test_single_statement_object_and_text_forms() -> None:
    text = '{"Version": "2012-10-17", "Id": "demo",\n "Statement": {"Effect": "Allow",'
    text += ' "Action": "athena:*", "Resource": "*"}}'
    doc = parse_policy(text)
    assert doc.source == json.loads(text)
    assert doc.id == "demo" and doc.version == "2012-10-17"
    assert len(doc.statements) == 1 and doc.statements[0].label == "Statement[0]"
    assert decide(doc).allowed
    assert parse_policy(doc.source) == doc
    conditioned = {"Statement": stmt(Condition={"Bool": {"aws:SecureTransport": "true"}})}
    assert parse_policy(MappingProxyType(conditioned)) == parse_policy(json.dumps(conditioned))
    missing_version = parse_policy({"Statement": stmt()})
    assert missing_version.version is None and decide(missing_version).allowed


def _errors() -> list[tuple[Any, str]]:
    ok = stmt()
    cases: list[tuple[Any, str]] = [
        ({"Statement": {**ok, "Effect": "Permit"}},
         'Statement.Effect: must be "Allow" or "Deny", not "Permit"'),
        ({"Statement": [ok, {**ok, "Effect": "allow"}]},
         'Statement[1].Effect: must be "Allow" or "Deny", not "allow"'),
        ({"Statement": [{"Action": "*", "Resource": "*"}]},
         'Statement[0].Effect: must be "Allow" or "Deny", missing'),
        ({"Statement": [{**ok, "NotAction": "s3:*"}]},
         "Statement[0]: has both Action and NotAction"),
        ({"Statement": [{**ok, "NotResource": "*"}]},
         "Statement[0]: has both Resource and NotResource"),
        ({"Statement": [{"Effect": "Allow", "Resource": "*"}]},
         "Statement[0]: needs Action or NotAction"),
        ({"Statement": [{"Effect": "Allow", "Action": "*"}]},
         "Statement[0]: needs Resource or NotResource"),
        ({"Statement": [ok, ok, {**ok, "Condition": {"StringEqualz": {"a": "b"}}}]},
         "Statement[2].Condition.StringEqualz: unknown condition operator"),
        ({"Statement": [{**ok, "Condition": {"ForAnyValue:Foo": {"a": "b"}}}]},
         "Statement[0].Condition.ForAnyValue:Foo: unknown condition operator"),
        ({"Statement": [{**ok, "Condition": {"NullIfExists": {"a": "true"}}}]},
         "Statement[0].Condition.NullIfExists: Null has no IfExists form"),
        ({"Statement": [{**ok, "Condition": {"Null": {"a": "yes"}}}]},
         'Statement[0].Condition.Null.a: Null takes "true" or "false", not "yes"'),
        ({"Statement": [{**ok, "Condition": {"Bool": {"a": ["true", "maybe"]}}}]},
         'Statement[0].Condition.Bool.a[1]: Bool takes "true" or "false", not "maybe"'),
        ({"Statement": [{**ok, "Condition": {"NumericLessThan": {"a": "x"}}}]},
         'Statement[0].Condition.NumericLessThan.a: NumericLessThan takes a number, not "x"'),
        ({"Statement": [{**ok, "Condition": {"DateLessThan": {"a": "soon"}}}]},
         "Statement[0].Condition.DateLessThan.a: DateLessThan takes a date"),
        ({"Statement": [{**ok, "Condition": {"IpAddress": {"a": "10.0.0.300/8"}}}]},
         "Statement[0].Condition.IpAddress.a: IpAddress takes an IP address or CIDR range"),
        ({"Statement": [{**ok, "Condition": {"ArnLike": {"a": "user/x"}}}]},
         'Statement[0].Condition.ArnLike.a: "user/x" is not an ARN'),
        ({"Statement": [{**ok, "Condition": {"StringEquals": {"a": []}}}]},
         "Statement[0].Condition.StringEquals.a: has no values"),
        ({"Statement": [{**ok, "Condition": {"StringEquals": {"a": [None]}}}]},
         "Statement[0].Condition.StringEquals.a[0]: a condition value must be a string"),
        ({"Statement": [{**ok, "Condition": {"StringEquals": {}}}]},
         "Statement[0].Condition.StringEquals: names no condition keys"),
        ({"Statement": [{**ok, "Condition": {"StringEquals": "x"}}]},
         "Statement[0].Condition.StringEquals: must be an object of condition keys"),
        ({"Statement": [{**ok, "Condition": []}]},
         "Statement[0].Condition: must be an object of condition operators"),
        ({"Statement": [{**ok, "Principal": "*"}]},
         "Statement[0].Principal: not allowed in an identity policy"),
        ({"Statement": [{**ok, "NotPrincipal": {"AWS": "*"}}]},
         "Statement[0].NotPrincipal: not allowed in an identity policy"),
        ({"Statement": [{**ok, "Actions": "*"}]},
         "Statement[0].Actions: unknown element (did you mean Action?)"),
        ({"Statement": [ok], "Versions": "2012-10-17"},
         "Versions: unknown element (did you mean Version?)"),
        ({"Statement": [{**ok, "Action": ["s3:GetObject", "athena"]}]},
         'Statement[0].Action[1]: "athena" is not an action'),
        ({"Statement": [{**ok, "Action": ["s3:GetObject", 7]}]},
         "Statement[0].Action[1]: must be a string, not the number 7"),
        ({"Statement": [{**ok, "Action": []}]}, "Statement[0].Action: is an empty list"),
        ({"Statement": [{**ok, "Resource": "arn:aws:s3:::bucket/*"}]},
         'Statement[0].Resource: "arn:aws:s3:::bucket/*" is not a lakeward ARN'),
        ({"Statement": [{**ok, "Resource": ["*", "lakeward-data"]}]},
         'Statement[0].Resource[1]: "lakeward-data" is not a lakeward ARN'),
        ({"Statement": [{"Effect": "Deny", "Action": "*", "NotResource": "arn:lakeward:s3"}]},
         'Statement[0].NotResource: "arn:lakeward:s3" is not a lakeward ARN'),
        ({"Version": "2012-10-17", "Statement": [{**ok, "Resource": "arn:lakeward:s3:::${x"}]},
         "Statement[0].Resource: malformed policy variable"),
        ({"Statement": [{**ok, "Sid": "read-all"}]},
         'Statement[0].Sid: must contain only letters and digits, not "read-all"'),
        ({"Statement": [{**ok, "Sid": "A"}, {**ok, "Sid": "A"}]},
         'Statement[1].Sid: "A" is already the Sid of Statement[0]'),
        ({"Version": "2012-10-18", "Statement": [ok]},
         'Version: must be "2012-10-17" or "2008-10-17", not "2012-10-18"'),
        ({"Id": 5, "Statement": [ok]}, "Id: must be a string, not the number 5"),
        ({"Version": "2012-10-17"}, "policy document: has no Statement"),
        ({"Statement": []}, "Statement: has no statements"),
        ({"Statement": "x"}, "Statement: must be a list of statements or one statement"),
        ({"Statement": [ok, "x"]}, 'Statement[1]: must be an object, not "x"'),
        ('{"Statement": [\n  {"Effect": "Allow" "Action": "*"}]}',
         "policy document: not valid JSON: line 2, column 22: Expecting ',' delimiter"),
        ('{"Statement": [{"Effect": "Allow", "Effect": "Deny", "Action": "*", "Resource": "*"}]}',
         'Statement[0]: has the key "Effect" twice'),
        ("[]", "policy document: must be a JSON object, not a list"),
        ("[" * 100_000, "policy document: nested too deeply"),
    ]  # fmt: skip
    return cases


@pytest.mark.parametrize(("document", "message"), _errors())
def test_grammar_errors_name_the_path(document: Any, message: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_policy(document)
    assert str(caught.value).startswith(message)
    assert caught.value.http_status == 400


def test_size_limit_counts_the_document_without_whitespace() -> None:
    big = {
        "Version": "2012-10-17",
        "Statement": [stmt(action=f"s3:Get{'x' * 20}{i}") for i in range(200)],
    }
    size = len(json.dumps(big, separators=(",", ":")))
    with pytest.raises(InvalidRequest, match=f"policy document: is {size} bytes .* 6144 limit"):
        parse_policy(big)
    parse_policy(big, max_bytes=size)
    # Indentation does not count against the limit.
    small = {"Version": "2012-10-17", "Statement": [stmt()]}
    parse_policy(json.dumps(small, indent=1000), max_bytes=100)


def test_warnings_for_unknown_actions() -> None:
    doc = parse_policy(
        {
            "Version": "2012-10-17",
            "Statement": [
                stmt(action=["athena:StartQueryExecution", "athena:StartQuery"]),
                {"Effect": "Deny", "NotAction": "athena:Frobnicate*", "Resource": "*"},
                stmt(action="S3:GETOBJECT"),
                stmt(action="lakeward:UseCatalog"),
            ],
        }
    )
    assert policy_warnings(doc) == [
        "Statement[0].Action[1]: unknown action athena:StartQuery (accepted; AWS accepts it too)",
        "Statement[1].NotAction: athena:Frobnicate* matches no action lakeward knows"
        " (accepted; AWS accepts it too)",
    ]
    assert policy_warnings(policy(stmt(action="athena:Get*"))) == []


def test_warning_for_for_all_values_in_an_allow() -> None:
    loose = {"ForAllValues:StringEquals": {"aws:TagKeys": ["team", "env"]}}
    assert policy_warnings(policy(stmt(Condition=loose))) == [
        "Statement[0].Condition.ForAllValues:StringEquals.aws:TagKeys: ForAllValues is also"
        ' true when the request lacks the key; add "Null": {"aws:TagKeys": "false"} to'
        " require it (accepted; AWS accepts it too)"
    ]
    tight = {**loose, "Null": {"aws:tagkeys": "false"}}
    assert policy_warnings(policy(stmt(Condition=tight))) == []
    assert not when(tight, {})
    assert when(tight, {"aws:TagKeys": ["env"]})
    assert policy_warnings(policy(stmt("Deny", Condition=loose))) == []


def test_known_actions() -> None:
    assert len(KNOWN_ACTIONS) == 22 + 1 + 18 + 4 + 2 + 5 + 32 + 27 + 9 + 2
    assert {"sts:AssumeRole", "iam:UpdateAssumeRolePolicy", "iam:GetRole"} <= KNOWN_ACTIONS
    assert {"athena:StartQueryExecution", "athena:BatchGetNamedQuery"} <= KNOWN_ACTIONS
    assert {"glue:CreateTable", "glue:BatchCreatePartition", "glue:GetPartitions"} <= KNOWN_ACTIONS
    assert "iam:SimulatePrincipalPolicy" in KNOWN_ACTIONS
    assert "quicksight:QueryDashboard" in KNOWN_ACTIONS
    assert "erasure:BuildIndex" in KNOWN_ACTIONS
    assert {"erasure:ListRequests", "erasure:GetRequest"} <= KNOWN_ACTIONS
    assert "erasure:UseApprovalLink" in KNOWN_ACTIONS
    assert {"erasure:GetWebhookToken", "erasure:RotateWebhookToken"} <= KNOWN_ACTIONS
    assert {"audit:Query", "audit:Seal"} <= KNOWN_ACTIONS


# ----------------------------------------------------------------------------- timing


def test_evaluation_time_against_100_policies() -> None:
    """Not an assertion: prints the median time of one decision over 100 policies."""
    services = ["athena", "s3", "secretsmanager", "iam", "quicksight", "erasure", "audit"]
    policies = []
    for i in range(100):
        statements = []
        for j, service in enumerate(services[i % 7 :] + services[: i % 7]):
            if j >= 4:
                break
            statement = stmt(
                "Deny" if j == 3 and service != "athena" else "Allow",
                [f"{service}:Get*", f"{service}:List*"],
                [
                    f"arn:lakeward:{service}:::p{i}/*",
                    f"arn:lakeward:{service}:::${{aws:username}}/*",
                ],
            )
            if j % 2:
                statement["Condition"] = {
                    "IpAddress": {"aws:SourceIp": "10.0.0.0/8"},
                    "Bool": {"aws:SecureTransport": "true"},
                }
            statements.append(statement)
        policies.append((f"p{i}", policy(*statements)))
    policies.append(
        ("analyst", policy(stmt(action="athena:*", resource="arn:lakeward:athena:::workgroup/*")))
    )
    context = {"aws:SourceIp": "10.0.0.1", "aws:SecureTransport": True, "aws:username": "de_user"}
    request = Request(USER, "athena:StartQueryExecution", WORKGROUP, context)
    assert evaluate(policies, request) == Decision("allowed", "analyst/Statement[0]")
    times = []
    for _ in range(3000):
        start = time.perf_counter_ns()
        evaluate(policies, request)
        times.append(time.perf_counter_ns() - start)
    print(f"\nevaluate over {len(policies)} policies: p50 {statistics.median(times) / 1000:.1f} µs")
