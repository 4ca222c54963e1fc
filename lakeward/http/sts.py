"""STS at the server's one address: ``GetCallerIdentity``, which dbt-athena and
awswrangler call to learn the account whose Glue catalog they use, and ``AssumeRole``,
which hands out temporary credentials acting as a role (access/sts.py).

STS speaks AWS's query protocol: a form-encoded ``Action=...`` posted to ``/`` and an XML
answer. The identity is lakeward's: the caller's ARN, and lakeward's one account.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape

from lakeward.access.arns import ACCOUNT_ID
from lakeward.access.control import AccessControl, Identity
from lakeward.access.sts import ValidationError, assume_role, role_id
from lakeward.errors import AccessDenied, ExpiredToken, InvalidRequest, LakewardError
from lakeward.http.sigv4 import INVALID_TOKEN, SIGNATURE_MISMATCH, Credentials

_NAMESPACE = "https://sts.amazonaws.com/doc/2011-06-15/"
_TIME = "%Y-%m-%dT%H:%M:%SZ"
# AssumeRole's parameters lakeward does not honour: refused by name, since ignoring one
# would hand out credentials broader (a session policy) or other than asked for.
_UNSUPPORTED = {
    "Policy": "session policies",
    "PolicyArns": "session policies",
    "Tags": "session tags",
    "TransitiveTagKeys": "session tags",
    "SerialNumber": "MFA",
    "TokenCode": "MFA",
    "SourceIdentity": "source identity",
    "ProvidedContexts": "provided contexts",
}


class UnknownAction(InvalidRequest):
    """An STS action lakeward does not offer."""


def sts_action(body: bytes) -> str:
    return dict(parse_qsl(body.decode("utf-8", "replace"))).get("Action", "")


def handle_sts(access: Credentials, principal: str, body: bytes, request_id: str) -> bytes:
    params = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    action = params.get("Action", "")
    if not isinstance(access, AccessControl):
        raise InvalidRequest("STS needs lakeward's IAM to say who the caller is")
    handler = _ACTIONS.get(action)
    if handler is None:
        raise UnknownAction(
            f"STS action {action or '(none)'} is not supported by lakeward "
            f"(supported: {', '.join(sorted(_ACTIONS))})"
        )
    result = handler(access, principal, params)
    return (
        f'<{action}Response xmlns="{_NAMESPACE}"><{action}Result>{result}</{action}Result>'
        f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>"
        f"</{action}Response>"
    ).encode()


def _caller_identity(access: AccessControl, principal: str, _params: dict[str, str]) -> str:
    identity = access.identify(principal)
    return (
        f"<Arn>{escape(identity.arn)}</Arn><UserId>{escape(_user_id(identity))}</UserId>"
        f"<Account>{ACCOUNT_ID}</Account>"
    )


def _user_id(identity: Identity) -> str:
    if identity.is_root:
        return ACCOUNT_ID
    if identity.role is not None:
        return role_id(identity.role) + (f":{identity.session}" if identity.session else "")
    return identity.name


def _assume_role(access: AccessControl, principal: str, params: dict[str, str]) -> str:
    for name, what in _UNSUPPORTED.items():
        if any(key == name or key.startswith(f"{name}.") for key in params):
            raise InvalidRequest(f"AssumeRole: {name} ({what}) is not supported by lakeward")
    for required in ("RoleArn", "RoleSessionName"):
        if not params.get(required):
            raise ValidationError(
                f"1 validation error detected: Value null at '{required[0].lower()}"
                f"{required[1:]}' failed to satisfy constraint: Member must not be null"
            )
    duration = params.get("DurationSeconds")
    if duration is not None and not duration.isdigit():
        raise ValidationError(f"DurationSeconds: {duration!r} is not a whole number of seconds")
    assumed = assume_role(
        access,
        principal,
        params["RoleArn"],
        params["RoleSessionName"],
        None if duration is None else int(duration),
        params.get("ExternalId"),
    )
    issued = assumed.credentials
    return (
        "<Credentials>"
        f"<AccessKeyId>{issued.key_id}</AccessKeyId>"
        f"<SecretAccessKey>{escape(issued.secret)}</SecretAccessKey>"
        f"<SessionToken>{escape(issued.token)}</SessionToken>"
        f"<Expiration>{issued.expires.strftime(_TIME)}</Expiration>"
        "</Credentials>"
        f"<AssumedRoleUser><AssumedRoleId>{escape(assumed.assumed_role_id)}</AssumedRoleId>"
        f"<Arn>{escape(assumed.arn)}</Arn></AssumedRoleUser>"
    )


_ACTIONS: dict[str, Callable[[AccessControl, str, dict[str, str]], str]] = {
    "GetCallerIdentity": _caller_identity,
    "AssumeRole": _assume_role,
}


# Failed signatures, by the names STS gives them.
_SIGNING_ERRORS = {
    INVALID_TOKEN: "InvalidClientTokenId",
    SIGNATURE_MISMATCH: "SignatureDoesNotMatch",
}


def sts_error(exc: Exception, request_id: str) -> tuple[int, bytes]:
    if isinstance(exc, ExpiredToken):
        status, kind, code = 400, "Sender", "ExpiredTokenException"
    elif isinstance(exc, AccessDenied):
        status, kind = 403, "Sender"
        code = _SIGNING_ERRORS.get(exc.message, "AccessDenied")
    elif isinstance(exc, ValidationError):
        status, kind, code = 400, "Sender", "ValidationError"
    elif isinstance(exc, UnknownAction):
        status, kind, code = 400, "Sender", "InvalidAction"
    elif isinstance(exc, InvalidRequest):
        status, kind, code = 400, "Sender", "InvalidParameterValue"
    else:
        status, kind, code = 500, "Receiver", "InternalFailure"
    message = exc.message if isinstance(exc, LakewardError) else "Internal server error"
    body = (
        f'<ErrorResponse xmlns="{_NAMESPACE}"><Error><Type>{kind}</Type><Code>{code}</Code>'
        f"<Message>{escape(message)}</Message></Error><RequestId>{request_id}</RequestId>"
        "</ErrorResponse>"
    )
    return status, body.encode()
