"""The webhook's credential: one bearer token per stack, kept in the secrets store.

MinIO sends its target's ``auth_token`` as ``Authorization: Bearer <token>``;
an SNS HTTPS subscription sends the user and password of its endpoint URL as
HTTP Basic authentication, where the password is the token. The token is
created on first use and rotated on request; the secret is encrypted at rest
like every other one.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets

from lakeward.access import Authorizer
from lakeward.access.arns import ERASURE_WEBHOOK
from lakeward.access.secrets import SecretStore
from lakeward.errors import ResourceNotFound

SECRET_NAME = "lakeward/erasure/webhook"
GET_TOKEN_ACTION = "erasure:GetWebhookToken"
ROTATE_TOKEN_ACTION = "erasure:RotateWebhookToken"
WEBHOOK_ARN = ERASURE_WEBHOOK
MAX_BODY_BYTES = 1024 * 1024
"""Larger posts are refused: S3 and MinIO send one record (a few KiB) per post."""


def webhook_token(store: SecretStore, rotate: bool = False) -> str:
    """The stack's webhook token, created (or replaced, with ``rotate``) as needed."""
    if not rotate:
        try:
            token = store.get(SECRET_NAME).value.get("token")
        except ResourceNotFound:
            token = None
        if isinstance(token, str) and token:
            return token
    token = secrets.token_urlsafe(32)
    store.put(
        SECRET_NAME,
        {"token": token},
        description="Bearer token of POST /events/s3 (S3 and MinIO event notifications)",
    )
    return token


def token_for_caller(access: Authorizer, store: SecretStore, rotate: bool = False) -> str:
    """The token, for a caller allowed to see it (and, with ``rotate``, to replace it).

    Rotating asks ``erasure:RotateWebhookToken`` and then ``erasure:GetWebhookToken``:
    the new token is shown, so replacing it must not be a way around reading it.
    """
    if rotate:
        access.authorize(ROTATE_TOKEN_ACTION, WEBHOOK_ARN)
    access.authorize(GET_TOKEN_ACTION, WEBHOOK_ARN)
    return webhook_token(store, rotate=rotate)


def presented_token(authorization: str | None) -> str | None:
    """The token in an ``Authorization`` header (Bearer, or Basic's password)."""
    if not authorization:
        return None
    scheme, _, credentials = authorization.strip().partition(" ")
    credentials = credentials.strip()
    if scheme.lower() == "bearer":
        return credentials or None
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(credentials, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2] or None
    return None


def token_matches(expected: str, authorization: str | None) -> bool:
    presented = presented_token(authorization)
    # compare_digest: the time taken must not tell how much of a guess was right.
    return presented is not None and hmac.compare_digest(
        presented.encode("utf-8"), expected.encode("utf-8")
    )
