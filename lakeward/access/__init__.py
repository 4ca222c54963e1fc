"""Who may do what: the single authorization check every service calls.

Every permission decision goes through ``authorize``; until principals and
policies exist, every authenticated caller is allowed, and the decision is
logged so that the audit trail starts now.
"""

from __future__ import annotations

import logging

log = logging.getLogger("lakeward.audit")

ARN_PREFIX = "arn:lakeward"


def catalog_arn(name: str) -> str:
    return f"{ARN_PREFIX}:athena:::datacatalog/{name}"


def workgroup_arn(name: str) -> str:
    return f"{ARN_PREFIX}:athena:::workgroup/{name}"


def authorize(principal: str, action: str, resource: str) -> None:
    """Raise ``AccessDenied`` unless ``principal`` may do ``action`` on ``resource``."""
    log.info("allow %s %s %s", principal, action, resource)
