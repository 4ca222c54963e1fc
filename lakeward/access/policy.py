"""lakeward's policy language: IAM's JSON identity policies, parsed, checked and evaluated.

``parse_policy`` reads a document (``Version``, ``Id``, ``Statement`` with ``Sid``,
``Effect``, ``Action``/``NotAction``, ``Resource``/``NotResource``, ``Condition``) and
refuses a bad one with ``InvalidRequest`` naming the path of the offending field. It also
compiles every wildcard once and files each statement under the service prefixes its
actions name; each document then remembers, per action, the statements naming it, so
that ``evaluate`` matches no action pattern twice and looks only at statements that
could apply.

``evaluate`` follows IAM: nothing is allowed unless an applicable statement allows it, and
an applicable Deny wins over every Allow, whatever the order of statements and policies.
Actions match case-insensitively, resources case-sensitively; in both ``*`` matches any
run of characters (``/`` and ``:`` included) and ``?`` one character. Conditions live in
``conditions.py``, policy variables and wildcards in ``templates.py``. A Resource entry
whose variable has no value in the request matches nothing; with NotResource the
statement does not apply at all.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from lakeward.access.arns import ARN_PREFIX
from lakeward.access.conditions import Condition, Context, parse_conditions
from lakeward.access.templates import (
    Chunk,
    Template,
    describe,
    fail,
    has_wildcards,
    joined,
    parse_template,
    wildcard_regex,
)
from lakeward.errors import InvalidRequest

__all__ = [
    "KNOWN_ACTIONS",
    "Decision",
    "PolicyDocument",
    "Request",
    "Statement",
    "evaluate",
    "parse_policy",
    "policy_warnings",
]


def _actions(service: str, names: str) -> set[str]:
    return {f"{service}:{name}" for name in names.split()}


KNOWN_ACTIONS: frozenset[str] = frozenset(
    _actions(
        "athena",
        "StartQueryExecution GetQueryExecution GetQueryResults StopQueryExecution"
        " ListQueryExecutions BatchGetQueryExecution ListDataCatalogs GetDataCatalog"
        " CreateDataCatalog DeleteDataCatalog ListDatabases GetDatabase ListTableMetadata"
        " GetTableMetadata ListWorkGroups GetWorkGroup CreateNamedQuery GetNamedQuery"
        " ListNamedQueries UpdateNamedQuery DeleteNamedQuery BatchGetNamedQuery",
    )
    | _actions("lakeward", "UseCatalog")
    | _actions(
        "glue",
        "CreateDatabase DeleteDatabase GetDatabase GetDatabases UpdateDatabase CreateTable"
        " UpdateTable DeleteTable GetTable GetTables CreatePartition BatchCreatePartition"
        " UpdatePartition DeletePartition BatchDeletePartition GetPartition GetPartitions"
        " BatchGetPartition",
    )
    | _actions("s3", "GetObject PutObject DeleteObject ListBucket")
    | _actions("sts", "AssumeRole GetCallerIdentity")
    | _actions(
        "secretsmanager", "GetSecretValue PutSecretValue ListSecrets DeleteSecret CreateSecret"
    )
    | _actions(
        "iam",
        "CreateUser DeleteUser GetUser ListUsers CreateGroup DeleteGroup ListGroups"
        " AddUserToGroup RemoveUserFromGroup CreateRole DeleteRole ListRoles GetRole"
        " UpdateAssumeRolePolicy CreatePolicy"
        " DeletePolicy GetPolicy ListPolicies AttachUserPolicy DetachUserPolicy"
        " AttachGroupPolicy DetachGroupPolicy AttachRolePolicy DetachRolePolicy PutUserPolicy"
        " PutGroupPolicy PutRolePolicy CreateAccessKey DeleteAccessKey UpdateAccessKey"
        " ListAccessKeys SimulatePrincipalPolicy",
    )
    | _actions(
        "quicksight",
        "DescribeDashboard ListDashboards CreateDashboard UpdateDashboard DeleteDashboard"
        " QueryDashboard UpdateDashboardPermissions"
        " DescribeDataSet CreateDataSet PassDataSet QueryDataSet UpdateDataSet DeleteDataSet"
        " CreateIngestion UpdateDataSetPermissions"
        " CreateDataSource DescribeDataSource PassDataSource UpdateDataSource DeleteDataSource"
        " UpdateDataSourcePermissions"
        " CreateAnalysis DescribeAnalysis QueryAnalysis UpdateAnalysis DeleteAnalysis"
        " UpdateAnalysisPermissions",
    )
    | _actions(
        "erasure",
        "Find CreateRequest GetRequest ListRequests Approve UseApprovalLink"
        " BuildIndex GetWebhookToken RotateWebhookToken",
    )
    | _actions("audit", "Query Seal")
)
_KNOWN_LOWER = frozenset(action.lower() for action in KNOWN_ACTIONS)

VERSIONS = ("2012-10-17", "2008-10-17")
_TOP_ELEMENTS = ("Version", "Id", "Statement")
_STATEMENT_ELEMENTS = (
    "Sid",
    "Effect",
    "Action",
    "NotAction",
    "Resource",
    "NotResource",
    "Condition",
)
_ACTION = re.compile(r"[A-Za-z0-9*?-]+:[A-Za-z0-9*?]+")
_SID = re.compile(r"[A-Za-z0-9]*")
_ARN_PREFIX = f"{ARN_PREFIX}:"
_ACCEPTED = "(accepted; AWS accepts it too)"
_ACTION_CACHE_SIZE = 1024


class _Patterns:
    """A set of wildcard patterns, compiled: exact strings in a set, the rest in one regex."""

    __slots__ = ("_any", "_exact", "_regex")

    def __init__(self, patterns: Sequence[Sequence[Chunk]]) -> None:
        self._any = any(joined(p) == "*" and has_wildcards(p) for p in patterns)
        self._exact = frozenset(joined(p) for p in patterns if not has_wildcards(p))
        wild = [wildcard_regex(p) for p in patterns if has_wildcards(p)]
        self._regex = re.compile("|".join(f"(?:{w})" for w in wild), re.DOTALL) if wild else None

    def matches(self, text: str) -> bool:
        if self._any or text in self._exact:
            return True
        return self._regex is not None and self._regex.fullmatch(text) is not None


@dataclass(frozen=True)
class Statement:
    """One statement, as written, with its compiled matchers."""

    index: int
    sid: str | None
    label: str  # the Sid, or Statement[i]
    effect: Literal["Allow", "Deny"]
    actions: tuple[str, ...]
    not_action: bool
    resources: tuple[str, ...]
    not_resource: bool
    conditions: tuple[Condition, ...]
    _action_patterns: _Patterns = field(repr=False, compare=False)
    _static_resources: _Patterns = field(repr=False, compare=False)
    _resource_templates: tuple[Template, ...] = field(repr=False, compare=False)
    _needs_context: bool = field(repr=False, compare=False)

    def applies(self, action: str, resource: str, context: Context) -> bool:
        """Whether this statement speaks to the request; ``action`` is lower-cased."""
        return self.names_action(action) and self._applies_to(resource, context)

    def names_action(self, action: str) -> bool:
        return self._action_patterns.matches(action) != self.not_action

    def _applies_to(self, resource: str, context: Context) -> bool:
        hit = self._static_resources.matches(resource)
        if not hit:
            for template in self._resource_templates:
                pattern = context.wildcards(template)
                if pattern is None:
                    if self.not_resource:
                        return False  # a variable without a value: the statement does not apply
                    continue
                if pattern.fullmatch(resource):
                    hit = True
                    break
        if hit == self.not_resource:
            return False
        return all(condition.holds(context) for condition in self.conditions)


@dataclass(frozen=True)
class PolicyDocument:
    """A parsed, checked policy; ``source`` is its JSON object."""

    source: dict[str, Any]
    statements: tuple[Statement, ...]
    version: str | None
    id: str | None
    # Statements that may apply to an action, by lower-cased service prefix, in document
    # order; ``_other_services`` serves a prefix no action of the policy names.
    _by_service: Mapping[str, tuple[Statement, ...]] = field(repr=False, compare=False)
    _other_services: tuple[Statement, ...] = field(repr=False, compare=False)
    # The statements naming an action, filled in as requests come: callers use a few
    # dozen actions, so after the first request of each no action pattern is matched.
    _by_action: dict[str, tuple[Statement, ...]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def _naming(self, action: str) -> tuple[Statement, ...]:
        found = self._by_action.get(action)
        if found is None:
            service = action.partition(":")[0]
            candidates = self._by_service.get(service, self._other_services)
            found = tuple(s for s in candidates if s.names_action(action))
            if len(self._by_action) < _ACTION_CACHE_SIZE:  # bounded: actions come from callers
                self._by_action[action] = found
        return found


@dataclass(frozen=True)
class Request:
    principal: str
    action: str
    resource: str
    context: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    decision: Literal["allowed", "explicitDeny", "implicitDeny"]
    statement: str | None  # "<policy name>/<Sid or Statement[i]>" that decided, if any

    @property
    def allowed(self) -> bool:
        return self.decision == "allowed"


_IMPLICIT_DENY = Decision("implicitDeny", None)
_NO_CONTEXT = Context({})


def evaluate(policies: Sequence[tuple[str, PolicyDocument]], request: Request) -> Decision:
    """Decide ``request`` under the named policies, as IAM does."""
    action = request.action.lower()
    resource = request.resource
    context: Context | None = None
    allowed_by: str | None = None
    for name, document in policies:
        for statement in document._naming(action):
            is_deny = statement.effect == "Deny"
            if allowed_by is not None and not is_deny:
                continue  # the first Allow is already known; only a Deny can change the answer
            if statement._needs_context:
                if context is None:
                    context = Context(request.context)
                applies = statement._applies_to(resource, context)
            else:
                applies = statement._applies_to(resource, _NO_CONTEXT)
            if not applies:
                continue
            if is_deny:
                return Decision("explicitDeny", f"{name}/{statement.label}")
            allowed_by = f"{name}/{statement.label}"
    return _IMPLICIT_DENY if allowed_by is None else Decision("allowed", allowed_by)


# ----------------------------------------------------------------------------- parsing


class _Duplicated(dict[str, Any]):
    """A JSON object that named a key twice; json.loads would silently keep the last."""

    duplicate: str = ""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            marked = _Duplicated(pairs)
            marked.duplicate = key
            return marked
        result[key] = value
    return result


def _load(text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_object)
    except json.JSONDecodeError as error:
        raise InvalidRequest(
            f"policy document: not valid JSON: line {error.lineno}, column {error.colno}: "
            f"{error.msg}"
        ) from None
    except RecursionError:
        raise InvalidRequest("policy document: nested too deeply") from None


def _check_duplicates(source: dict[str, Any]) -> None:
    # A repeated key would hide one of its values, an Effect or a Condition say. The walk
    # keeps its own stack: a document nested deeply enough would exhaust Python's.
    stack: list[tuple[Any, str]] = [(source, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, _Duplicated):
            fail(path or "policy document", f"has the key {describe(node.duplicate)} twice")
        if isinstance(node, dict):
            stack.extend((value, f"{path}.{key}" if path else key) for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(node))


def parse_policy(document: str | Mapping[str, Any], *, max_bytes: int = 6144) -> PolicyDocument:
    """Parse and check a policy document, given as JSON text or as its object."""
    if isinstance(document, str):
        source = _load(document)
    elif isinstance(document, Mapping):
        try:
            source = _load(json.dumps(document, default=_plain))
        except (TypeError, ValueError) as error:
            raise InvalidRequest(f"policy document: not JSON: {error}") from None
    else:
        raise InvalidRequest(
            f"policy document: must be JSON text or an object, not {type(document).__name__}"
        )
    if not isinstance(source, dict):
        fail("policy document", f"must be a JSON object, not {describe(source)}")
    size = len(json.dumps(source, separators=(",", ":"), ensure_ascii=False).encode())
    if size > max_bytes:
        # IAM counts the document without whitespace; so does this limit.
        fail("policy document", f"is {size} bytes without whitespace, over the {max_bytes} limit")
    _check_duplicates(source)
    _no_strangers(source, _TOP_ELEMENTS, "")
    version = source.get("Version")
    if version is not None and version not in VERSIONS:
        fail("Version", f'must be "2012-10-17" or "2008-10-17", not {describe(version)}')
    policy_id = source.get("Id")
    if policy_id is not None and not isinstance(policy_id, str):
        fail("Id", f"must be a string, not {describe(policy_id)}")
    variables = version == "2012-10-17"  # earlier versions take ${...} literally
    statements = tuple(
        _parse_statement(raw, i, path, variables) for i, path, raw in _statements(source)
    )
    sids: dict[str, str] = {}
    for statement, (_, path, _raw) in zip(statements, _statements(source), strict=True):
        if not statement.sid:
            continue
        if statement.sid in sids:
            fail(
                f"{path}.Sid",
                f"{describe(statement.sid)} is already the Sid of {sids[statement.sid]}",
            )
        sids[statement.sid] = path
    by_service, others = _index(statements)
    return PolicyDocument(source, statements, version, policy_id, by_service, others)


def _plain(value: object) -> object:
    """Let json.dumps take any Mapping or sequence a caller built a policy from."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence | set | frozenset) and not isinstance(value, str | bytes):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def _statements(source: dict[str, Any]) -> Iterator[tuple[int, str, Any]]:
    if "Statement" not in source:
        fail("policy document", "has no Statement")
    raw = source["Statement"]
    if isinstance(raw, dict):  # IAM accepts a lone statement without the list
        yield 0, "Statement", raw
        return
    if not isinstance(raw, list):
        fail("Statement", f"must be a list of statements or one statement, not {describe(raw)}")
    if not raw:
        fail("Statement", "has no statements")
    for i, item in enumerate(raw):
        yield i, f"Statement[{i}]", item


def _no_strangers(node: dict[str, Any], allowed: tuple[str, ...], path: str) -> None:
    for key in node:
        if key in allowed:
            continue
        where = f"{path}.{key}" if path else key
        if key in ("Principal", "NotPrincipal"):
            fail(
                where, "not allowed in an identity policy: it applies to whoever it is attached to"
            )
        guess = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        hint = f" (did you mean {guess[0]}?)" if guess else f" (expected {', '.join(allowed)})"
        fail(where, f"unknown element{hint}")


def _strings(statement: dict[str, Any], key: str, path: str) -> list[tuple[str, str]]:
    """The entries of a string-or-list element, each with its path."""
    raw = statement[key]
    where = f"{path}.{key}"
    if isinstance(raw, str):
        return [(raw, where)]
    if not isinstance(raw, list):
        fail(where, f"must be a string or a list of strings, not {describe(raw)}")
    if not raw:
        fail(where, "is an empty list")
    for i, item in enumerate(raw):
        if not isinstance(item, str):
            fail(f"{where}[{i}]", f"must be a string, not {describe(item)}")
    return [(item, f"{where}[{i}]") for i, item in enumerate(raw)]


def _one_of(statement: dict[str, Any], key: str, path: str) -> str:
    if key in statement and f"Not{key}" in statement:
        fail(path, f"has both {key} and Not{key}")
    if key not in statement and f"Not{key}" not in statement:
        fail(path, f"needs {key} or Not{key}")
    return key if key in statement else f"Not{key}"


def _parse_statement(raw: Any, index: int, path: str, variables: bool) -> Statement:
    if not isinstance(raw, dict):
        fail(path, f"must be an object, not {describe(raw)}")
    _no_strangers(raw, _STATEMENT_ELEMENTS, path)
    sid = raw.get("Sid")
    if sid is not None and not (isinstance(sid, str) and _SID.fullmatch(sid)):
        fail(f"{path}.Sid", f"must contain only letters and digits, not {describe(sid)}")
    effect = raw.get("Effect")
    if effect not in ("Allow", "Deny"):
        got = "missing" if effect is None else f"not {describe(effect)}"
        fail(f"{path}.Effect", f'must be "Allow" or "Deny", {got}')
    action_key = _one_of(raw, "Action", path)
    resource_key = _one_of(raw, "Resource", path)
    actions = _strings(raw, action_key, path)
    for action, where in actions:
        if action != "*" and not _ACTION.fullmatch(action):
            fail(where, f'{describe(action)} is not an action: expected "service:Action" or "*"')
    resources = _strings(raw, resource_key, path)
    templates = [parse_template(r, where, variables=variables) for r, where in resources]
    for template, (resource, where) in zip(templates, resources, strict=True):
        _check_resource(template, resource, where)
    conditions: tuple[Condition, ...] = ()
    if raw.get("Condition") is not None:
        conditions = parse_conditions(raw["Condition"], f"{path}.Condition", variables=variables)
    dynamic = tuple(t for t in templates if not t.is_static)
    return Statement(
        index=index,
        sid=sid,
        label=sid or f"Statement[{index}]",
        effect=effect,
        actions=tuple(a for a, _ in actions),
        not_action=action_key == "NotAction",
        resources=tuple(r for r, _ in resources),
        not_resource=resource_key == "NotResource",
        conditions=conditions,
        _action_patterns=_Patterns([[(a.lower(), True)] for a, _ in actions]),
        _static_resources=_Patterns([t.render(None) or () for t in templates if t.is_static]),
        _resource_templates=dynamic,
        _needs_context=bool(conditions or dynamic),
    )


def _check_resource(template: Template, resource: str, where: str) -> None:
    shape = template.shape()
    if shape == "*":
        return
    segments = shape.split(":", 5)
    if not shape.startswith(_ARN_PREFIX) or len(segments) < 6 or not segments[2] or not segments[5]:
        fail(
            where,
            f"{describe(resource)} is not a lakeward ARN: expected "
            '"arn:lakeward:<service>:<region>:<account>:<resource>" or "*"',
        )


def _index(
    statements: tuple[Statement, ...],
) -> tuple[dict[str, tuple[Statement, ...]], tuple[Statement, ...]]:
    """File statements by the service prefixes their actions name.

    NotAction statements, and actions whose prefix has a wildcard, may match any service,
    so they join every list.
    """
    everywhere: set[int] = set()
    named: dict[str, set[int]] = {}
    for statement in statements:
        prefixes = {action.partition(":")[0].lower() for action in statement.actions}
        if statement.not_action or any("*" in p or "?" in p for p in prefixes):
            everywhere.add(statement.index)
            continue
        for prefix in prefixes:
            named.setdefault(prefix, set()).add(statement.index)
    by_service = {
        prefix: tuple(s for s in statements if s.index in indexes or s.index in everywhere)
        for prefix, indexes in named.items()
    }
    return by_service, tuple(s for s in statements if s.index in everywhere)


# ---------------------------------------------------------------------------- warnings


def policy_warnings(doc: PolicyDocument) -> list[str]:
    """What is accepted but probably wrong: actions lakeward does not know, and so on."""
    warnings: list[str] = []
    for _, path, raw in _statements(doc.source):
        key = "Action" if "Action" in raw else "NotAction"
        for action, where in _strings(raw, key, path):
            lower = action.lower()
            if action == "*":
                continue
            if not has_wildcards([(lower, True)]):
                if lower not in _KNOWN_LOWER:
                    warnings.append(f"{where}: unknown action {action} {_ACCEPTED}")
                continue
            pattern = re.compile(wildcard_regex([(lower, True)]), re.DOTALL)
            if not any(pattern.fullmatch(known) for known in _KNOWN_LOWER):
                warnings.append(f"{where}: {action} matches no action lakeward knows {_ACCEPTED}")
    for statement, (_, path, _raw) in zip(doc.statements, _statements(doc.source), strict=True):
        required = {c.key.lower() for c in statement.conditions if c.requires_key}
        for condition in statement.conditions:
            if (
                statement.effect == "Allow"
                and condition.operator.startswith("ForAllValues:")
                and "IfExists" not in condition.operator
                and condition.key.lower() not in required
            ):
                warnings.append(
                    f"{path}.Condition.{condition.operator}.{condition.key}: ForAllValues is "
                    f"also true when the request lacks the key; add "
                    f'"Null": {{"{condition.key}": "false"}} to require it {_ACCEPTED}'
                )
    if doc.version != "2012-10-17" and "${" in json.dumps(doc.source):
        warnings.append(
            f"Version: policy variables such as ${{aws:username}} are taken literally under "
            f"{doc.version or 'a missing Version (2008-10-17)'}; write "
            '"Version": "2012-10-17" to have them substituted'
        )
    return warnings


# Keys whose value differs on every request: a decision that reads them is not cached.
VOLATILE_KEYS = frozenset({"aws:currenttime", "aws:epochtime"})


def context_keys(documents: Sequence[PolicyDocument]) -> frozenset[str] | None:
    """The request context keys (lower-cased) the documents' decisions can depend on.

    Condition keys and the policy variables of resources and condition values; None
    when one is a key that changes on every request (the time), so that a decision
    made from these documents holds for one request only.
    """
    keys: set[str] = set()
    for document in documents:
        for statement in document.statements:
            templates = list(statement._resource_templates)
            for condition in statement.conditions:
                keys.add(condition.key.lower())
                templates.extend(condition.templates)
            for template in templates:
                keys.update(template.variables())
    if keys & VOLATILE_KEYS:
        return None
    return frozenset(keys)
