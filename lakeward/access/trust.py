"""A role's trust policy: who may assume it (IAM's ``AssumeRolePolicyDocument``).

A trust policy is a resource-based policy whose resource is the role: each statement
names principals (``Principal`` or ``NotPrincipal``) instead of resources. Its actions
and conditions are checked by the identity-policy parser (policy.py); this module adds
the principals and the decision IAM makes within one account:

- a statement naming the caller (its user or role ARN, or ``"*"``) grants the call by
  itself, unless one of the caller's own policies denies it;
- a statement naming the account (``arn:lakeward:iam:::root`` or the account id) hands
  the decision to the caller's own policies, which must allow ``sts:AssumeRole``;
- a Deny that applies wins over everything.

Principals other than IAM's (``Service``, ``Federated``, ``CanonicalUser``) name things
lakeward has not, and are refused by name rather than never matching.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from lakeward.access import arns
from lakeward.access.arns import ACCOUNT_ID
from lakeward.access.conditions import Context
from lakeward.access.policy import PolicyDocument, Statement, parse_policy
from lakeward.access.templates import describe, fail
from lakeward.errors import InvalidRequest

ASSUME_ROLE = "sts:AssumeRole"
ANYONE = "*"
_IAM_PREFIX = f"{arns.ARN_PREFIX}:iam:::"
_STS_PREFIX = f"{arns.ARN_PREFIX}:sts:::assumed-role/"
_AWS_IAM_PREFIX = f"arn:aws:iam::{ACCOUNT_ID}:"


def account_trust() -> dict[str, Any]:
    """The trust of a role created without one: the account, so that whoever the
    account's own policies allow ``sts:AssumeRole`` on the role may assume it."""
    statement = {"Effect": "Allow", "Principal": {"AWS": arns.ROOT}, "Action": ASSUME_ROLE}
    return {"Version": "2012-10-17", "Statement": [statement]}


@dataclass(frozen=True)
class TrustStatement:
    statement: Statement
    principals: frozenset[str]  # canonical ARNs; ANYONE; arns.ROOT for the account
    not_principal: bool

    def names(self, caller: str) -> Literal["caller", "account"] | None:
        """Whether this statement speaks to ``caller`` (an ARN), and how."""
        if self.not_principal:
            named = caller in self.principals or arns.ROOT in self.principals
            return None if named else "caller"
        if ANYONE in self.principals or caller in self.principals:
            return "caller"
        if arns.ROOT in self.principals:
            return "account"
        return None


@dataclass(frozen=True)
class TrustPolicy:
    source: dict[str, Any]
    statements: tuple[TrustStatement, ...]

    def decide(
        self, caller: str, role_arn: str, context: Mapping[str, object]
    ) -> tuple[Literal["explicitDeny", "caller", "account"] | None, str | None]:
        """What the trust policy says to ``caller`` assuming the role, and which statement
        said it: an explicit deny, a grant to the caller, a hand-over to the account's
        own policies, or nothing (an implicit deny)."""
        values = Context(context)
        granted: tuple[Literal["caller", "account"], str] | None = None
        for trust in self.statements:
            named = trust.names(caller)
            if named is None or not trust.statement.applies(ASSUME_ROLE.lower(), role_arn, values):
                continue
            label = f"trust policy/{trust.statement.label}"
            if trust.statement.effect == "Deny":
                return "explicitDeny", label
            if granted is None or (named == "caller" and granted[0] == "account"):
                granted = (named, label)
        return (None, None) if granted is None else granted


def parse_trust_policy(document: str | Mapping[str, Any]) -> TrustPolicy:
    """Parse and check a trust policy, given as JSON text or as its object."""
    if isinstance(document, str):
        try:
            source = json.loads(document)
        except ValueError as exc:
            raise InvalidRequest(f"trust policy: not JSON: {exc}") from None
    else:
        source = copy.deepcopy(dict(document))
    if not isinstance(source, dict):
        fail("trust policy", f"must be a JSON object, not {describe(source)}")
    raw = source.get("Statement")
    listed = raw if isinstance(raw, list) else [raw]
    principals: list[tuple[frozenset[str], bool]] = []
    stripped = copy.deepcopy(source)
    stripped["Statement"] = []
    for index, statement in enumerate(listed):
        path = f"Statement[{index}]" if isinstance(raw, list) else "Statement"
        if not isinstance(statement, dict):
            stripped["Statement"].append(statement)  # the policy parser names the fault
            continue
        for element in ("Resource", "NotResource"):
            if element in statement:
                fail(f"{path}.{element}", "not allowed in a trust policy: the role is its resource")
        has, has_not = "Principal" in statement, "NotPrincipal" in statement
        if has == has_not:
            fail(path, "needs Principal or NotPrincipal" if not has else "has both")
        key = "Principal" if has else "NotPrincipal"
        principals.append((_principals(statement[key], f"{path}.{key}"), not has))
        rest = {k: v for k, v in statement.items() if k != key}
        stripped["Statement"].append({**rest, "Resource": "*"})
    if not isinstance(raw, list):
        stripped["Statement"] = stripped["Statement"][0] if stripped["Statement"] else raw
    parsed: PolicyDocument = parse_policy(stripped)
    for statement in parsed.statements:
        for action in statement.actions:
            if not action.lower().startswith(("sts:", "*")):
                where = f"Statement[{statement.index}].Action"
                fail(where, f"{describe(action)} is not an STS action: a trust policy grants sts:*")
    statements = tuple(
        TrustStatement(statement, names, negated)
        for statement, (names, negated) in zip(parsed.statements, principals, strict=True)
    )
    return TrustPolicy(source, statements)


def _principals(raw: Any, path: str) -> frozenset[str]:
    if raw == ANYONE:
        return frozenset({ANYONE})
    if not isinstance(raw, dict) or not raw:
        fail(path, f'must be "*" or an object such as {{"AWS": "<ARN>"}}, not {describe(raw)}')
    for kind in raw:
        if kind != "AWS":
            fail(
                f"{path}.{kind}",
                f"{kind} principals are not supported by lakeward: trust IAM users, roles or "
                "the account (AWS)",
            )
    values = raw["AWS"]
    listed = values if isinstance(values, list) else [values]
    if not listed:
        fail(f"{path}.AWS", "is an empty list")
    found = set()
    for i, value in enumerate(listed):
        where = f"{path}.AWS[{i}]" if isinstance(values, list) else f"{path}.AWS"
        if not isinstance(value, str):
            fail(where, f"must be a string, not {describe(value)}")
        found.add(canonical_principal(value, where))
    return frozenset(found)


def canonical_principal(value: str, where: str) -> str:
    """The ARN a principal is named by: lakeward's own, or AWS's spelling in lakeward's
    account (``arn:aws:iam::<account>:user/x``), or the account id for the account."""
    if value in (ANYONE, ACCOUNT_ID, arns.ROOT, f"{_AWS_IAM_PREFIX}root"):
        return ANYONE if value == ANYONE else arns.ROOT
    if value.startswith(_AWS_IAM_PREFIX):
        value = _IAM_PREFIX + value.removeprefix(_AWS_IAM_PREFIX)
    kind, _, name = value.removeprefix(_IAM_PREFIX).partition("/")
    if value.startswith(_IAM_PREFIX) and kind in ("user", "role") and name and "*" not in name:
        return value
    if value.startswith(_STS_PREFIX) and value.count("/") == 2:
        return value
    fail(
        where,
        f"{describe(value)} is not a principal: expected a user or role ARN "
        f"({arns.user_arn('name')}), {arns.ROOT} or the account id {ACCOUNT_ID}",
    )
