"""STS's AssumeRole over lakeward's IAM: temporary credentials that act as a role.

The caller must be let in by the role's trust policy (trust.py) and, where that
policy trusts the account rather than the caller, allowed ``sts:AssumeRole`` on the
role by its own policies; the decision is audited like any other. The credentials
(an ``ASIA…`` key id, a secret and a session token) sign requests as any key does,
carry the role's policies, and stop working when they expire, when the role's
sessions are revoked, or with the role.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass

from lakeward.access.arns import ACCOUNT_ID, assumed_role_arn, iam_arn
from lakeward.access.control import AccessControl
from lakeward.access.credentials import RoleSession
from lakeward.access.policy import Decision
from lakeward.access.principals import DEFAULT_SESSION_SECONDS, MIN_SESSION_SECONDS
from lakeward.access.trust import ASSUME_ROLE, canonical_principal
from lakeward.errors import AccessDenied, InvalidRequest, LakewardError

_SESSION_NAME = re.compile(r"[\w+=,.@-]{2,64}")
_EXTERNAL_ID = re.compile(r"[\w+=,.@:/-]{2,1224}")


@dataclass(frozen=True)
class AssumedRole:
    credentials: RoleSession
    arn: str  # arn:lakeward:sts:::assumed-role/<role>/<session>
    assumed_role_id: str  # <role id>:<session>


def role_id(role: str) -> str:
    """A role's unique id as IAM shows it (``AROA`` and 17 characters), stable per name."""
    digest = hashlib.sha256(f"role:{role}".encode()).digest()
    return "AROA" + base64.b32encode(digest).decode()[:17]


class ValidationError(InvalidRequest):
    """STS's ValidationError: a parameter out of its constraints."""


def assume_role(
    access: AccessControl,
    principal: str,
    role_arn: str,
    session_name: str,
    duration: int | None = None,
    external_id: str | None = None,
) -> AssumedRole:
    """Issue temporary credentials for the role ``role_arn`` to ``principal``."""
    if not _SESSION_NAME.fullmatch(session_name or ""):
        raise ValidationError(
            f"1 validation error detected: Value '{session_name}' at 'roleSessionName' failed "
            r"to satisfy constraint: Member must have length between 2 and 64 and match "
            r"[\w+=,.@-]*"
        )
    if external_id is not None and not _EXTERNAL_ID.fullmatch(external_id):
        raise ValidationError(
            f"1 validation error detected: Value '{external_id}' at 'externalId' failed to "
            r"satisfy constraint: Member must have length between 2 and 1224 and match "
            r"[\w+=,.@:\/-]*"
        )
    if duration is not None and duration < MIN_SESSION_SECONDS:
        raise ValidationError(
            f"1 validation error detected: Value '{duration}' at 'durationSeconds' failed to "
            f"satisfy constraint: Member must have value greater than or equal to "
            f"{MIN_SESSION_SECONDS}"
        )
    identity = access.identify(principal)
    if identity.is_root:
        raise AccessDenied("Roles may not be assumed by root accounts.")
    role = _role_name(role_arn)
    canonical = iam_arn("role", role)
    context: dict[str, object] = {} if external_id is None else {"sts:ExternalId": external_id}
    try:
        trust, longest = access.principals.role_trust(role)
    except LakewardError:  # no such role: refused as AWS refuses it, without saying so
        trust, longest = None, DEFAULT_SESSION_SECONDS
    said: Decision | None  # None: the trust policy leaves it to the caller's policies
    if trust is None:
        said = Decision("implicitDeny", None)
    else:
        answer, statement = trust.decide(identity.arn, canonical, context)
        if answer == "account":
            said = None
        elif answer == "caller":
            said = Decision("allowed", statement)
        elif answer == "explicitDeny":
            said = Decision("explicitDeny", statement)
        else:
            said = Decision("implicitDeny", None)
    access.authorize(
        ASSUME_ROLE, canonical, principal=principal, context=context, resource_policy=said
    )
    seconds = DEFAULT_SESSION_SECONDS if duration is None else duration
    if seconds > longest:
        raise ValidationError(
            f"The requested DurationSeconds exceeds the MaxSessionDuration set for this role "
            f"({longest} s)."
        )
    issued = access.principals.issue_role_session(role, session_name, seconds)
    return AssumedRole(
        issued, assumed_role_arn(role, session_name), f"{role_id(role)}:{session_name}"
    )


def _role_name(role_arn: str) -> str:
    """The role a RoleArn names: lakeward's spelling, or AWS's in lakeward's account."""
    if not isinstance(role_arn, str) or len(role_arn) < 20:
        raise ValidationError(
            f"1 validation error detected: Value '{role_arn}' at 'roleArn' failed to satisfy "
            "constraint: Member must have length greater than or equal to 20"
        )
    try:
        canonical = canonical_principal(role_arn, "RoleArn")
    except InvalidRequest:
        canonical = ""
    kind, _, name = canonical.rpartition(":")[2].partition("/")
    if kind != "role" or not name:
        raise ValidationError(
            f"{role_arn} is not a role ARN: expected {iam_arn('role', '<name>')} "
            f"(or arn:aws:iam::{ACCOUNT_ID}:role/<name>)"
        )
    return name
