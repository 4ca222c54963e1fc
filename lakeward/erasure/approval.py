"""Approval links and the emails that carry them, and outcome notices.

A link is ``<public url>/erasure/approval/<request id>?token=<token>``. The
token is ``<payload>.<signature>``: the payload (base64url JSON) names the
request, the decision (approve or reject), the report's digest, the expiry and
a random nonce; the signature is HMAC-SHA256 under a key derived from the
master key for this purpose alone. A token is refused when the signature is
wrong (forged), when it is past its expiry, when its request is not the one in
the URL (cross-request), when the report changed since it was sent (digest),
and when its nonce was used before (replayed).

Who may approve: the link proves its holder reads an approver's mailbox. When
the POST also carries a console session, that signed-in user must in addition
be allowed ``erasure:Approve`` on the request.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import smtplib
import ssl
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from typing import Any

from lakeward.access.keys import derive_key, load_master_key
from lakeward.config import ErasureSettings, Settings
from lakeward.errors import LinkRefused, MailError

APPROVE = "approve"
REJECT = "reject"
LINK_PURPOSE = "erasure-approval-links"
SMTP_TIMEOUT = 10.0


@dataclass(frozen=True)
class LinkClaims:
    request_id: str
    decision: str
    digest: str
    expires: datetime
    nonce: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class LinkSigner:
    def __init__(self, key: bytes) -> None:
        self._key = key

    @classmethod
    def for_settings(cls, settings: Settings) -> LinkSigner:
        return cls(derive_key(load_master_key(settings.data_dir), LINK_PURPOSE))

    def sign(self, request_id: str, decision: str, digest: str, expires: datetime) -> str:
        payload = {"r": request_id, "a": decision, "d": digest,
                   "e": int(expires.timestamp()), "n": secrets.token_hex(16)}  # fmt: skip
        body = _b64(json.dumps(payload, separators=(",", ":")).encode())
        return f"{body}.{self._mac(body)}"

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode("ascii"), hashlib.sha256).digest())

    def verify(self, token: str, request_id: str, digest: str | None,
               moment: datetime | None = None) -> LinkClaims:  # fmt: skip
        """The link's claims, or ``LinkRefused`` saying why (the reason is logged, not secret)."""
        body, dot, mac = token.partition(".")
        if not dot or not hmac.compare_digest(mac, self._mac(body)):
            raise LinkRefused("this approval link is not valid (its signature does not match)")
        try:
            payload = json.loads(_unb64(body))
            claims = LinkClaims(
                str(payload["r"]), str(payload["a"]), str(payload["d"]),
                datetime.fromtimestamp(int(payload["e"]), UTC), str(payload["n"]),
            )  # fmt: skip
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise LinkRefused("this approval link is not valid (unreadable)") from None
        if claims.request_id != request_id:
            raise LinkRefused("this approval link belongs to another erasure request")
        if claims.decision not in (APPROVE, REJECT):
            raise LinkRefused("this approval link names no decision")
        if (moment or datetime.now(UTC)) >= claims.expires:
            raise LinkRefused("this approval link has expired")
        if digest is None or not hmac.compare_digest(claims.digest, digest):
            raise LinkRefused("the report changed since this link was sent; use the newest email")
        return claims


def base_url(settings: Settings) -> str:
    if settings.erasure.public_url:
        return settings.erasure.public_url.rstrip("/")
    port = settings.server.port or 8950
    return f"http://{settings.server.host}:{port}"


def approval_links(settings: Settings, signer: LinkSigner, request_id: str, digest: str,
                   expires: datetime) -> dict[str, str]:  # fmt: skip
    page = f"{base_url(settings)}/erasure/approval/{request_id}?token="
    return {d: page + signer.sign(request_id, d, digest, expires) for d in (APPROVE, REJECT)}


def expiry(settings: Settings, start: datetime) -> datetime:
    return start + timedelta(hours=settings.erasure.link_expiry_hours)


def send_mail(config: ErasureSettings, to: list[str], subject: str, body: str,
              attachment: tuple[str, bytes] | None = None) -> None:  # fmt: skip
    """Send one message through the configured SMTP server; ``MailError`` on any failure."""
    if not config.smtp_host:
        raise MailError("erasure.smtp_host is not set: approval emails cannot be sent")
    if not to:
        raise MailError("no recipients: set erasure.approvers")
    message = EmailMessage()
    message["From"] = config.mail_from
    message["To"] = ", ".join(to)
    message["Subject"] = subject
    message.set_content(body)
    if attachment is not None:
        name, data = attachment
        message.add_attachment(data, maintype="application", subtype="json", filename=name)
    try:
        smtp: smtplib.SMTP
        if config.smtp_tls == "ssl":
            context = ssl.create_default_context()
            smtp = smtplib.SMTP_SSL(config.smtp_host, config.smtp_port, timeout=SMTP_TIMEOUT,
                                    context=context)  # fmt: skip
        else:
            smtp = smtplib.SMTP(config.smtp_host, config.smtp_port, timeout=SMTP_TIMEOUT)
        with smtp:
            if config.smtp_tls == "starttls":
                smtp.starttls(context=ssl.create_default_context())
            if config.smtp_username:
                smtp.login(config.smtp_username, config.smtp_password or "")
            smtp.send_message(message)
    except (OSError, smtplib.SMTPException) as exc:
        where = f"{config.smtp_host}:{config.smtp_port}"
        raise MailError(f"could not send mail through {where}: {exc}") from None


def approval_body(report_text: str, links: dict[str, str], expires: datetime) -> str:
    return (
        "An erasure request waits for your decision.\n\n"
        f"Approve: {links[APPROVE]}\n\nReject:  {links[REJECT]}\n\n"
        f"The links work once and expire at {expires.isoformat()}; each opens a page that "
        "asks you to confirm.\n\n" + report_text
    )


def post_webhook(url: str, payload: dict[str, Any]) -> None:
    data = json.dumps(payload).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=SMTP_TIMEOUT) as response:  # noqa: S310 - the operator's URL
            response.read()
    except OSError as exc:
        raise MailError(f"the outcome webhook {url} failed: {exc}") from None
