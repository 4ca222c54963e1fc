"""Who may do what: the single authorization check every service calls.

Every permission decision goes through ``authorize``; until principals and
policies exist, every authenticated caller is allowed, and the decision is
logged so that the audit trail starts now.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Protocol

log = logging.getLogger("lakeward.audit")

ROOT = "root"

# Who the request being served comes from, set by the entry point (the HTTP
# layer after authentication, the CLI): services read it instead of passing a
# principal through every call.
current_principal: ContextVar[str] = ContextVar("lakeward_principal", default=ROOT)
current_request_id: ContextVar[str | None] = ContextVar("lakeward_request_id", default=None)
current_source: ContextVar[str] = ContextVar("lakeward_source", default="cli")
current_context: ContextVar[dict[str, object]] = ContextVar("lakeward_context", default={})  # noqa: B039 - never mutated; each request sets its own


class Authorizer(Protocol):
    """The one check every service makes before acting (``AccessControl`` implements it)."""

    def authorize(
        self,
        action: str,
        resource: str,
        *,
        principal: str | None = None,
        context: Mapping[str, object] | None = None,
    ) -> object:
        """Return if allowed; raise ``AccessDenied`` naming the action and resource if not.

        ``context``: condition keys of this request beside the global ones.
        """
        ...

    def authorize_all(
        self, requests: Sequence[tuple[str, str]], *, principal: str | None = None
    ) -> object:
        """``authorize`` each (action, resource) in turn, up to the first refused, their
        decisions recorded together."""
        ...

    def allowed(self, action: str, resource: str, *, principal: str | None = None) -> bool: ...


class AllowAll:
    """For a service used as a library, without principals: allows, and logs."""

    def authorize(
        self,
        action: str,
        resource: str,
        *,
        principal: str | None = None,
        context: Mapping[str, object] | None = None,
    ) -> object:
        log.info("allow %s %s %s", principal or current_principal.get(), action, resource)
        return None

    def authorize_all(
        self, requests: Sequence[tuple[str, str]], *, principal: str | None = None
    ) -> object:
        for action, resource in requests:
            self.authorize(action, resource, principal=principal)
        return None

    def allowed(self, action: str, resource: str, *, principal: str | None = None) -> bool:
        self.authorize(action, resource, principal=principal)
        return True
