"""STS at the server's one address: ``GetCallerIdentity``, which dbt-athena and
awswrangler call to learn the account whose Glue catalog they use.

STS speaks AWS's query protocol: a form-encoded ``Action=...`` posted to ``/`` and an XML
answer. The identity is lakeward's: the caller's IAM ARN, and lakeward's one account.
"""

from __future__ import annotations

from urllib.parse import parse_qsl
from xml.sax.saxutils import escape

from lakeward.access.control import AccessControl
from lakeward.errors import AccessDenied, InvalidRequest, LakewardError
from lakeward.http.sigv4 import Credentials
from lakeward.query.catalogs import ACCOUNT_ID

_NAMESPACE = "https://sts.amazonaws.com/doc/2011-06-15/"


def sts_action(body: bytes) -> str:
    return dict(parse_qsl(body.decode("utf-8", "replace"))).get("Action", "")


def handle_sts(access: Credentials, principal: str, body: bytes, request_id: str) -> bytes:
    action = sts_action(body)
    if not isinstance(access, AccessControl):
        raise InvalidRequest("STS needs lakeward's IAM to say who the caller is")
    if action != "GetCallerIdentity":
        raise InvalidRequest(
            f"STS action {action or '(none)'} is not supported by lakeward "
            "(supported: GetCallerIdentity)"
        )
    identity = access.identify(principal)
    user_id = ACCOUNT_ID if identity.is_root else identity.name
    return (
        f'<GetCallerIdentityResponse xmlns="{_NAMESPACE}"><GetCallerIdentityResult>'
        f"<Arn>{escape(identity.arn)}</Arn><UserId>{escape(user_id)}</UserId>"
        f"<Account>{ACCOUNT_ID}</Account></GetCallerIdentityResult>"
        f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>"
        "</GetCallerIdentityResponse>"
    ).encode()


def sts_error(exc: Exception, request_id: str) -> tuple[int, bytes]:
    if isinstance(exc, AccessDenied):
        status, kind, code = 403, "Sender", "AccessDenied"
    elif isinstance(exc, InvalidRequest):
        status, kind, code = 400, "Sender", "InvalidAction"
    else:
        status, kind, code = 500, "Receiver", "InternalFailure"
    message = exc.message if isinstance(exc, LakewardError) else "Internal server error"
    body = (
        f'<ErrorResponse xmlns="{_NAMESPACE}"><Error><Type>{kind}</Type><Code>{code}</Code>'
        f"<Message>{escape(message)}</Message></Error><RequestId>{request_id}</RequestId>"
        "</ErrorResponse>"
    )
    return status, body.encode()
