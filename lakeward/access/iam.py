"""IAM, secrets and the audit log as the CLI and the console use them: authorize, then act.

Each operation asks the caller's permission (``iam:CreateUser`` on
``arn:lakeward:iam:::user/<name>``, ``secretsmanager:GetSecretValue`` on the
secret, ``audit:Query`` on the log, ...) and is audited by that check, then
calls principals, secrets or the audit log. ``lakeward iam`` and the console's
administration pages both go through here, so neither grants what the other
would not.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from lakeward.access.arns import AUDIT_LOG, iam_arn, secret_arn
from lakeward.access.audit import AuditRecord, Segment, VerifyResult
from lakeward.access.control import AccessControl, Identity
from lakeward.access.credentials import AccessKey
from lakeward.access.passwords import check_password
from lakeward.access.policy import Decision, parse_policy
from lakeward.access.policy_versions import PolicyVersion
from lakeward.access.principals import DEFAULT_SESSION_SECONDS, Group, ManagedPolicy, Role, User
from lakeward.access.secrets import SecretInfo
from lakeward.access.sessions import RevokedSessions
from lakeward.errors import InvalidRequest, LakewardError

T = TypeVar("T")

KINDS = ("user", "group", "role")
"""What a managed policy attaches to."""


@dataclass(frozen=True)
class UserOverview:
    """The users with their groups, and every group name (to add a user to one)."""

    users: list[tuple[User, list[str]]]
    groups: list[str]


@dataclass(frozen=True)
class GroupOverview:
    """The groups with their members and attached policies, and every policy name (to
    attach one)."""

    groups: list[tuple[Group, list[str], list[str]]]
    policies: list[str]


class IamService:
    def __init__(self, access: AccessControl) -> None:
        self.access = access
        self.principals = access.principals

    def _iam(self, action: str, kind: str, name: str, work: Callable[[], T]) -> T:
        self.access.authorize(f"iam:{action}", iam_arn(kind, name))
        return work()

    # -- users and groups ----------------------------------------------------------

    def create_user(self, name: str, password: str | None = None) -> None:
        def create() -> None:
            if password is not None:
                check_password(name, password)
            self.principals.create_user(name, password)

        self._iam("CreateUser", "user", name, create)

    def reset_password(self, name: str, password: str) -> None:
        """A new console password for the user (IAM's UpdateLoginProfile), meeting the
        password policy; a lockout after failed sign-ins is lifted with it, and every
        console session the user has ends."""

        def reset() -> None:
            check_password(name, password)
            self.principals.set_password(name, password)
            # Whoever signed in with the old password (it may have leaked) is out.
            RevokedSessions(self.principals.engine).end_all(name, time.time())

        self._iam("UpdateLoginProfile", "user", name, reset)

    def delete_user(self, name: str) -> None:
        self._iam("DeleteUser", "user", name, lambda: self.principals.delete_user(name))

    def list_users(self) -> list[User]:
        return self._iam("ListUsers", "user", "*", self.principals.list_users)

    def user_overview(self) -> UserOverview:
        """What the console's users page shows, under ``iam:ListUsers`` alone."""
        self.access.authorize("iam:ListUsers", iam_arn("user", "*"))
        p = self.principals
        users = [(u, p.groups_of(u.name)) for u in p.list_users()]
        return UserOverview(users, [g.name for g in p.list_groups()])

    def create_group(self, name: str) -> None:
        self._iam("CreateGroup", "group", name, lambda: self.principals.create_group(name))

    def delete_group(self, name: str) -> None:
        self._iam("DeleteGroup", "group", name, lambda: self.principals.delete_group(name))

    def list_groups(self) -> list[Group]:
        return self._iam("ListGroups", "group", "*", self.principals.list_groups)

    def group_overview(self) -> GroupOverview:
        """What the console's groups page shows, under ``iam:ListGroups`` alone."""
        self.access.authorize("iam:ListGroups", iam_arn("group", "*"))
        p = self.principals
        groups = [
            (g, p.members_of(g.name), p.attached_policies("group", g.name)) for g in p.list_groups()
        ]
        return GroupOverview(groups, [x.name for x in p.list_policies()])

    def add_user_to_group(self, user: str, group: str) -> None:
        self._iam("AddUserToGroup", "group", group,
                  lambda: self.principals.add_user_to_group(user, group))  # fmt: skip

    def remove_user_from_group(self, user: str, group: str) -> None:
        self._iam("RemoveUserFromGroup", "group", group,
                  lambda: self.principals.remove_user_from_group(user, group))  # fmt: skip

    def create_role(
        self,
        name: str,
        trust_policy: str | None = None,
        max_session_seconds: int = DEFAULT_SESSION_SECONDS,
    ) -> None:
        self._iam(
            "CreateRole",
            "role",
            name,
            lambda: self.principals.create_role(
                name, trust_policy=trust_policy, max_session_seconds=max_session_seconds
            ),
        )

    def update_assume_role_policy(self, name: str, trust_policy: str) -> None:
        self._iam(
            "UpdateAssumeRolePolicy",
            "role",
            name,
            lambda: self.principals.update_assume_role_policy(name, trust_policy),
        )

    def role_trust(self, name: str) -> tuple[dict[str, Any], int]:
        """The role's trust policy document and its longest session (``iam:GetRole``)."""
        trust, longest = self._iam(
            "GetRole", "role", name, lambda: self.principals.role_trust(name)
        )
        return trust.source, longest

    def revoke_role_sessions(self, name: str) -> int:
        """End the role's temporary credentials now (as IAM's "revoke active sessions",
        authorized as a change of the role's policies, ``iam:PutRolePolicy``)."""
        return self._iam(
            "PutRolePolicy", "role", name, lambda: self.principals.revoke_role_sessions(name)
        )

    def list_roles(self) -> list[Role]:
        return self._iam("ListRoles", "role", "*", self.principals.list_roles)

    # -- policies ------------------------------------------------------------------

    def create_policy(
        self, name: str, document: dict[str, Any] | str, description: str = ""
    ) -> None:
        """Create a managed policy; a document given as text is checked after the permission."""
        self.access.authorize("iam:CreatePolicy", iam_arn("policy", name))
        self.principals.create_policy(name, _checked(name, document), description)

    def create_policy_version(
        self, name: str, document: str | dict[str, Any], set_as_default: bool = False
    ) -> PolicyVersion:
        """A new version of the policy's document; the one that applies if ``set_as_default``."""
        self.access.authorize("iam:CreatePolicyVersion", iam_arn("policy", name))
        checked = _checked(name, document)
        return self.principals.create_policy_version(name, checked, set_as_default)

    def list_policy_versions(self, name: str) -> list[PolicyVersion]:
        return self._iam(
            "ListPolicyVersions", "policy", name, lambda: self.principals.list_policy_versions(name)
        )

    def set_default_policy_version(self, name: str, version_id: str) -> None:
        self._iam(
            "SetDefaultPolicyVersion", "policy", name,
            lambda: self.principals.set_default_policy_version(name, version_id),
        )  # fmt: skip

    def delete_policy_version(self, name: str, version_id: str) -> None:
        self._iam(
            "DeletePolicyVersion", "policy", name,
            lambda: self.principals.delete_policy_version(name, version_id),
        )  # fmt: skip

    def delete_policy(self, name: str) -> None:
        self._iam("DeletePolicy", "policy", name, lambda: self.principals.delete_policy(name))

    def policy_overview(self) -> list[tuple[ManagedPolicy, list[str]]]:
        """What the console's policies page shows: each policy and where it is attached."""
        self.access.authorize("iam:ListPolicies", iam_arn("policy", "*"))
        p = self.principals
        return [(x, p.attachments_of(x.name)) for x in p.list_policies()]

    def list_policies(self) -> list[ManagedPolicy]:
        return self._iam("ListPolicies", "policy", "*", self.principals.list_policies)

    def get_policy(self, name: str) -> ManagedPolicy:
        return self._iam("GetPolicy", "policy", name, lambda: self.principals.get_policy(name))

    def attach_policy(self, kind: str, name: str, policy: str) -> None:
        """Attach ``policy`` to the user, group or role ``name`` (``iam:Attach<Kind>Policy``)."""
        self._policy_link("Attach", kind, name, policy)

    def detach_policy(self, kind: str, name: str, policy: str) -> None:
        self._policy_link("Detach", kind, name, policy)

    def _policy_link(self, verb: str, kind: str, name: str, policy: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"policies attach to {', '.join(KINDS)}, not {kind}")
        work = getattr(self.principals, f"{verb.lower()}_{kind}_policy")
        self._iam(f"{verb}{kind.capitalize()}Policy", kind, name, lambda: work(name, policy))

    # -- access keys ---------------------------------------------------------------

    def create_access_key(self, user: str) -> tuple[str, str]:
        """A new key pair of ``user``; the secret is returned this once."""
        return self._iam("CreateAccessKey", "user", user,
                         lambda: self.principals.create_access_key(user))  # fmt: skip

    def list_access_keys(self, user: str) -> list[AccessKey]:
        return self._iam("ListAccessKeys", "user", user,
                         lambda: self.principals.list_access_keys(user))  # fmt: skip

    def update_access_key(self, user: str, key_id: str, active: bool) -> None:
        self._iam("UpdateAccessKey", "user", user,
                  lambda: self.principals.update_access_key(key_id, active))  # fmt: skip

    def delete_access_key(self, user: str, key_id: str) -> None:
        self._iam("DeleteAccessKey", "user", user,
                  lambda: self.principals.delete_access_key(key_id))  # fmt: skip

    def simulate(self, user: str, action: str, resource: str) -> Decision:
        """Would ``user`` be allowed ``action`` on ``resource``, and by which statement."""
        return self._iam("SimulatePrincipalPolicy", "user", user,
                         lambda: self.access.decide(Identity(user), action, resource))  # fmt: skip

    # -- secrets and the audit log -------------------------------------------------

    def get_secret(self, name: str) -> dict[str, Any]:
        self.access.authorize("secretsmanager:GetSecretValue", secret_arn(name))
        return self.access.secrets.get(name).value

    def put_secret(self, name: str, value: dict[str, Any]) -> str:
        """Store a new version of a secret; returns its version id."""
        self.access.authorize("secretsmanager:PutSecretValue", secret_arn(name))
        return self.access.secrets.put(name, value)

    def list_secrets(self) -> list[SecretInfo]:
        """Secret names and descriptions (never values)."""
        self.access.authorize("secretsmanager:ListSecrets", secret_arn("*"))
        return self.access.secrets.list()

    def audit_query(
        self,
        *,
        user: str | None = None,
        since: datetime | None = None,
        decision: str | None = None,
        limit: int = 100,
    ) -> list[AuditRecord]:
        """Audit records, oldest first, of ``user``'s decisions (everyone's without)."""
        self.access.authorize("audit:Query", AUDIT_LOG)
        return self.access.audit.query(
            principal=iam_arn("user", user) if user else None,
            since=since,
            decision=decision,
            limit=limit,
        )

    def audit_verify(self) -> VerifyResult:
        """Check the audit log's hash chain."""
        self.access.authorize("audit:Query", AUDIT_LOG)
        return self.access.audit.verify()

    def audit_seal(self, older_than: timedelta) -> list[Segment]:
        """Seal the audit records older than ``older_than`` into archive segments."""
        self.access.authorize("audit:Seal", AUDIT_LOG)
        return self.access.audit.seal(older_than)


def _checked(policy: str, document: dict[str, Any] | str) -> dict[str, Any]:
    """A policy document, refused naming the policy when the policy language refuses it."""
    try:
        return parse_policy(document).source
    except LakewardError as exc:
        raise InvalidRequest(f"policy {policy}: {exc.message}") from None
    except ValueError as exc:
        raise InvalidRequest(f"policy {policy}: not a valid policy document ({exc})") from None
