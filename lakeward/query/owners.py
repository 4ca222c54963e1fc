"""Whose executions a principal may read: their own, others' only with a permission.

An execution records who started it. Reading another principal's execution
(its SQL text, state, result; stopping it) needs ``OTHERS_ACTION`` on the
workgroup besides the Athena action; ``OWNER_KEY``, the starter's name, lets
a policy narrow that to some owners. ``athena:*`` does not grant it (it is
another service's action), so by default each user sees their own history.
See docs/access.md.
"""

from __future__ import annotations

from lakeward.access import Authorizer, current_principal
from lakeward.access.arns import workgroup_arn
from lakeward.errors import AccessDenied
from lakeward.query.model import QueryExecution

OTHERS_ACTION = "lakeward:ReadOthersQueryExecutions"
OWNER_KEY = "lakeward:QueryExecutionOwner"


def check_reader(access: Authorizer, execution: QueryExecution, action: str) -> None:
    """Allow ``athena:<action>`` on the execution, or raise ``AccessDenied``."""
    resource = workgroup_arn(execution.workgroup)
    access.authorize(f"athena:{action}", resource)
    if execution.started_by != current_principal.get():
        access.authorize(OTHERS_ACTION, resource, context={OWNER_KEY: execution.started_by or ""})


def may_read(access: Authorizer, execution: QueryExecution, action: str) -> bool:
    try:
        check_reader(access, execution, action)
    except AccessDenied:
        return False
    return True


def listed_owner(access: Authorizer, workgroup: str) -> str | None:
    """Whose executions a list shows: None for everyone's, else the caller's own.

    A list names no owner, so only a permission without an owner condition opens it.
    """
    access.authorize("athena:ListQueryExecutions", workgroup_arn(workgroup))
    return (
        None if access.allowed(OTHERS_ACTION, workgroup_arn(workgroup)) else current_principal.get()
    )
