"""The access decision point: who is asking, may they, and the audit record of the answer.

Every entry point (the Athena API, the CLI, later the console) identifies a
principal and calls ``AccessControl.authorize``; it evaluates the principal's
policies (cached until anything in the IAM store changes, so a policy change
takes effect at once), appends the decision to the audit log, and raises
``AccessDenied`` naming the action and resource, never the policies.

The stack's own key pair (``settings.api``) is the root credential: like an
AWS account's root user it may do everything, and its decisions are audited
too.

Decisions are cached per (principal, action, resource, and the values of the
request context keys the principal's policies read), for one IAM generation:
every change to users, groups, roles, policies, attachments or keys bumps the
generation in the IAM database (whichever process or CLI made it), and the
cache is emptied when it moves. The generation is read once per request (per
API request id; on every call without one), so a change committed before a
request began decides that request; a change made through this process
mid-request is seen at once too (``Principals.local_changes``). Decisions that
read the time (``aws:CurrentTime``) are never cached.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from lakeward.access import (
    ROOT,
    arns,
    current_context,
    current_principal,
    current_request_id,
    current_source,
)
from lakeward.access.arns import assumed_role_arn, iam_arn, user_arn
from lakeward.access.audit import AuditLog, AuditRecord
from lakeward.access.credentials import SESSION_KEY_PREFIX, StoredSession
from lakeward.access.keys import derive_key, load_master_key
from lakeward.access.policy import (
    Decision,
    PolicyDocument,
    Request,
    context_keys,
    evaluate,
    parse_policy,
)
from lakeward.access.principals import Principals
from lakeward.access.secrets import open_secret_store
from lakeward.config import Settings
from lakeward.errors import AccessDenied, ExpiredToken

ROLE_PREFIX = "role/"
EXPIRED_TOKEN = "The security token included in the request is expired"
SESSION_CACHE_SIZE = 10_000
DECISION_CACHE_SIZE = 65536  # entries; the cache starts over when full

# (request id, Principals.local_changes, generation): the generation a request decides by.
_request_generation: ContextVar[tuple[str, int, int] | None] = ContextVar(
    "lakeward_iam_generation", default=None
)


def role_principal(name: str, session: str | None = None) -> str:
    """How a service acting as a role names itself to ``authorize`` (``role/<name>``),
    or how the holder of a role's temporary credentials is named (``role/<name>/<session>``).

    User names cannot hold ``/``, so this never stands for a user.
    """
    return f"{ROLE_PREFIX}{name}" + (f"/{session}" if session else "")


@dataclass(frozen=True)
class Identity:
    """Who a request comes from: the root credential, an IAM user, a role a service acts
    as, or a session of a role assumed through STS."""

    name: str  # "root", the user name, role/<role name> or role/<role name>/<session>

    @property
    def is_root(self) -> bool:
        return self.name == ROOT

    @property
    def is_role(self) -> bool:
        return self.name.startswith(ROLE_PREFIX)

    @property
    def role(self) -> str | None:
        """The role this identity acts as, if any."""
        return self.name.removeprefix(ROLE_PREFIX).partition("/")[0] if self.is_role else None

    @property
    def session(self) -> str | None:
        """The session name, for temporary credentials of a role (sts:AssumeRole)."""
        return (
            self.name.removeprefix(ROLE_PREFIX).partition("/")[2] or None if self.is_role else None
        )

    @property
    def arn(self) -> str:
        if self.is_root:
            return arns.ROOT
        if self.role is not None:
            if self.session is not None:
                return assumed_role_arn(self.role, self.session)
            return iam_arn("role", self.role)
        return user_arn(self.name)


class _Policies:
    """A principal's parsed policies, and the context keys their decisions read."""

    __slots__ = ("documents", "keys")

    def __init__(self, documents: list[tuple[str, PolicyDocument]]) -> None:
        self.documents = documents
        keys = context_keys([d for _, d in documents])
        self.keys = None if keys is None else tuple(sorted(keys))


class AccessControl:
    def __init__(self, settings: Settings, *, cache_decisions: bool = True) -> None:
        """``cache_decisions=False`` evaluates every call (for comparing, in bench/authz.py)."""
        state = settings.data_dir / "access"
        state.mkdir(parents=True, exist_ok=True)
        master = load_master_key(settings.data_dir)
        self.settings = settings
        url = settings.access.database_url

        def where(name: str) -> str | Path:
            return url or state / f"{name}.db"

        self.principals = Principals(where("iam"), secret_key=derive_key(master, "access-keys"))
        self.secrets = open_secret_store(settings)
        self.audit = AuditLog(
            where("audit"), archive=settings.access.audit_archive or state / "audit-archive"
        )
        self._policies: dict[str, tuple[int, _Policies]] = {}
        self._keys: dict[str, tuple[int, tuple[str, str] | None]] = {}
        self._sessions: dict[str, tuple[int, StoredSession]] = {}
        self._cache_decisions = cache_decisions
        self._decisions: dict[tuple[object, ...], Decision] = {}
        self._decisions_generation = -1
        self._lock = threading.Lock()

    def generation(self) -> int:
        """The IAM generation this call decides by: read once per API request."""
        request_id = current_request_id.get()
        local = self.principals.local_changes
        if request_id is not None:
            known = _request_generation.get()
            if known is not None and known[0] == request_id and known[1] == local:
                return known[2]
        generation = self.principals.generation()
        if request_id is not None:
            _request_generation.set((request_id, local, generation))
        return generation

    # -- authentication -----------------------------------------------------

    def secret_for(self, access_key_id: str, session_token: str | None = None) -> str | None:
        """The secret of an active access key (for SigV4), root's included; for temporary
        credentials, only with their session token, and until they expire."""
        if access_key_id.startswith(SESSION_KEY_PREFIX):
            session = self._lookup_session(access_key_id)
            if session is None or not session.accepts(session_token):
                return None
            if session.expires <= datetime.now(UTC):
                raise ExpiredToken(EXPIRED_TOKEN)
            return session.secret
        if session_token is not None:
            return None  # a session token goes with temporary credentials only
        api = self.settings.api
        if api.access_key_id is not None and access_key_id == api.access_key_id:
            return api.secret_access_key
        found = self._lookup_key(access_key_id)
        return found[1] if found else None

    def _lookup_session(self, key_id: str) -> StoredSession | None:
        """``lookup_role_session``, kept while the IAM store does not change (revoking
        sessions and deleting roles bump it); a key not found is asked again next time,
        as it may have been issued by another process since."""
        generation = self.generation()
        with self._lock:
            cached = self._sessions.get(key_id)
        if cached is not None and cached[0] == generation:
            return cached[1]
        found = self.principals.lookup_role_session(key_id)
        if found is not None:
            with self._lock:
                if len(self._sessions) >= SESSION_CACHE_SIZE:
                    self._sessions.clear()
                self._sessions[key_id] = (generation, found)
        return found

    def _lookup_key(self, access_key_id: str) -> tuple[str, str] | None:
        """``lookup_key``, cached until the IAM store changes (every key change bumps it)."""
        generation = self.generation()
        with self._lock:
            cached = self._keys.get(access_key_id)
        if cached is not None and cached[0] == generation:
            return cached[1]
        found = self.principals.lookup_key(access_key_id)
        with self._lock:
            self._keys[access_key_id] = (generation, found)
        return found

    def identify(self, principal: str) -> Identity:
        """An access key id or a user name to the identity it stands for."""
        api = self.settings.api
        if principal in (ROOT, api.access_key_id):
            return Identity(ROOT)
        if principal.startswith(ROLE_PREFIX):
            return Identity(principal)
        if principal.startswith(SESSION_KEY_PREFIX):
            session = self._lookup_session(principal)
            if session is not None:
                return Identity(role_principal(session.role, session.session_name))
        found = self._lookup_key(principal)
        if found is not None:
            self.principals.mark_key_used(principal, datetime.now(UTC))
            return Identity(found[0])
        return Identity(principal)

    # -- authorization ------------------------------------------------------

    def _policies_of(self, user: str, generation: int) -> _Policies:
        with self._lock:
            cached = self._policies.get(user)
        if cached is not None and cached[0] == generation:
            return cached[1]
        role = Identity(user).role
        found = (
            self.principals.policies_for_role(role)
            if role is not None
            else self.principals.policies_for_user(user)
        )
        policies = _Policies([(name, parse_policy(doc)) for name, doc in found])
        with self._lock:
            self._policies[user] = (generation, policies)
        return policies

    def decide(
        self,
        identity: Identity,
        action: str,
        resource: str,
        context: Mapping[str, object] | None = None,
    ) -> Decision:
        if identity.is_root:
            return Decision("allowed", "root")
        generation = self.generation()
        policies = self._policies_of(identity.name, generation)
        values = {
            # As in AWS, a role (assumed or not) has no user name for ${aws:username}.
            **({} if identity.is_role else {"aws:username": identity.name}),
            "aws:PrincipalArn": iam_arn("role", identity.role) if identity.role else identity.arn,
            "aws:CurrentTime": datetime.now(UTC),
            **current_context.get(),
            **(context or {}),
        }
        key = self._decision_key(identity, action, resource, policies, values)
        if key is not None:
            with self._lock:
                if self._decisions_generation != generation:
                    self._decisions.clear()
                    self._decisions_generation = generation
                hit = self._decisions.get(key)
            if hit is not None:
                return hit
        request = Request(principal=identity.arn, action=action, resource=resource, context=values)
        decision = evaluate(policies.documents, request)
        if key is not None:
            with self._lock:
                if self._decisions_generation == generation:
                    if len(self._decisions) >= DECISION_CACHE_SIZE:
                        self._decisions.clear()
                    self._decisions[key] = decision
        return decision

    def _decision_key(
        self,
        identity: Identity,
        action: str,
        resource: str,
        policies: _Policies,
        values: Mapping[str, object],
    ) -> tuple[object, ...] | None:
        """What a decision depends on, or None if it must not be cached."""
        if not self._cache_decisions or policies.keys is None:
            return None
        read: list[object] = []
        if policies.keys:
            lowered = {k.lower(): v for k, v in values.items()}
            for name in policies.keys:
                value = lowered.get(name)
                if isinstance(value, list | set | frozenset):
                    value = tuple(value)
                try:
                    hash(value)
                except TypeError:
                    return None
                read.append(value)
        # Action names are case-insensitive to IAM, resources are not.
        return (identity.name, action.lower(), resource, *read)

    def authorize(
        self,
        action: str,
        resource: str,
        *,
        principal: str | None = None,
        context: Mapping[str, object] | None = None,
        shared: bool = False,
        resource_policy: Decision | None = None,
    ) -> Identity:
        """Allow or raise ``AccessDenied``; the decision is audited either way.

        ``shared``: the resource itself grants this to the caller (a BI object
        shared with them, like a resource-based policy in AWS): that allows
        unless one of the caller's policies denies it explicitly.

        ``resource_policy``: what a resource-based policy that must allow the call
        says of it (a role's trust policy): its Deny or its silence refuses whatever
        the caller's policies say; its Allow grants unless they deny explicitly.
        """
        identity = self.identify(principal or current_principal.get())
        decision = self.decide(identity, action, resource, context)
        if shared and decision.decision == "implicitDeny":
            decision = Decision("allowed", "resource share")
        if resource_policy is not None and decision.decision != "explicitDeny":
            decision = resource_policy
        self.audit.append(_record(identity, action, resource, decision))
        if not decision.allowed:
            raise _refusal(identity, action, resource, decision)
        return identity

    def authorize_all(
        self, requests: Sequence[tuple[str, str]], *, principal: str | None = None
    ) -> Identity:
        """``authorize`` each (action, resource) in turn, up to the first refused; their
        decisions are audited in one commit, before anything is done or refused."""
        identity = self.identify(principal or current_principal.get())
        records, refused = [], None
        for action, resource in requests:
            decision = self.decide(identity, action, resource, None)
            records.append(_record(identity, action, resource, decision))
            if not decision.allowed:
                refused = _refusal(identity, action, resource, decision)
                break
        self.audit.append_all(records)
        if refused is not None:
            raise refused
        return identity

    def allowed(self, action: str, resource: str, *, principal: str | None = None) -> bool:
        """Like ``authorize`` but answers instead of raising (for filtering lists)."""
        try:
            self.authorize(action, resource, principal=principal)
        except AccessDenied:
            return False
        return True


def _record(identity: Identity, action: str, resource: str, decision: Decision) -> AuditRecord:
    return AuditRecord(
        time=datetime.now(UTC),
        principal=identity.arn,
        action=action,
        resource=resource,
        decision=decision.decision,
        statement=decision.statement,
        request_id=current_request_id.get() or str(uuid.uuid4()),
        source=current_source.get(),
    )


def _refusal(identity: Identity, action: str, resource: str, decision: Decision) -> AccessDenied:
    explicit = " with an explicit deny" if decision.decision == "explicitDeny" else ""
    return AccessDenied(
        f"User: {identity.arn} is not authorized to perform: {action} on resource: "
        f"{resource}{explicit}"
    )
