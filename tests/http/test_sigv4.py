"""SigV4 verification against requests signed by botocore itself."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials

from lakeward.errors import AccessDenied, TooManyRequests
from lakeward.http.sigv4 import ReplayGuard, verify

KEY, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
SIGNED_AT = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
HOST = "athena.lakeward.test:8443"
BODY = b'{"QueryExecutionId":"q-1"}'
REST = ", SignedHeaders=host;x-amz-date, Signature=" + "0" * 64


class KeyPairs:
    def secret_for(self, access_key_id: str, session_token: str | None = None) -> str | None:
        return {KEY: SECRET}.get(access_key_id) if session_token is None else None


def sign(
    *,
    body: bytes = BODY,
    url: str = f"http://{HOST}/",
    secret: str = SECRET,
    service: str = "athena",
    target: str = "AmazonAthena.GetQueryExecution",
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """The headers botocore sends for this request, signed at SIGNED_AT."""
    headers = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": target}
    request = AWSRequest(method="POST", url=url, data=body, headers=headers | (extra or {}))
    naive_utc = SIGNED_AT.replace(tzinfo=None)  # what botocore's clock returns
    with mock.patch("botocore.auth.get_current_datetime", return_value=naive_utc):
        SigV4Auth(BotoCredentials(KEY, secret), service, "eu-west-1").add_auth(request)
    # botocore leaves Host to the HTTP client; it signs the URL's host.
    return {"Host": HOST, **dict(request.headers.items())}


def check(
    headers: dict[str, str],
    *,
    body: bytes = BODY,
    path: str = "/",
    query: str = "",
    now: datetime = SIGNED_AT,
    guard: ReplayGuard | None = None,
    mutating: bool = False,
) -> str:
    return verify(
        "POST", path, query, headers, body, KeyPairs(),
        now=now, replay_guard=guard, mutating=mutating,
    )  # fmt: skip


def denied(headers: dict[str, str], **kwargs: Any) -> str:
    with pytest.raises(AccessDenied) as error:
        check(headers, **kwargs)
    return error.value.message


def test_botocore_signed_request_is_accepted() -> None:
    assert check(sign()) == KEY


def test_header_names_are_case_insensitive() -> None:
    assert check({name.lower(): value for name, value in sign().items()}) == KEY


def test_raw_path_and_query_are_signed_as_sent() -> None:
    headers = sign(url=f"http://{HOST}/athena/a%20b/?b=2&a=1")
    assert check(headers, path="/athena/a%20b/", query="b=2&a=1") == KEY
    assert "does not match" in denied(headers, path="/athena/a%20b/", query="b=3&a=1")


def test_a_query_is_checked_as_sigv4_canonicalizes_it() -> None:
    """The AWS SDK for Java (Hadoop's s3a) signs a space in a query value as %20 and sends
    it as '+': the same request, as AWS S3 accepts it. A literal '+' is sent as %2B."""
    headers = sign(url=f"http://{HOST}/?prefix=x%20y%2F&list-type=2")
    assert check(headers, query="list-type=2&prefix=x+y%2F") == KEY
    assert check(headers, query="prefix=x%20y%2F&list-type=2") == KEY
    plus = sign(url=f"http://{HOST}/?prefix=a%2Bb")
    assert check(plus, query="prefix=a%2Bb") == KEY
    assert "does not match" in denied(plus, query="prefix=a+b")


def test_tampered_body_or_header_is_a_signature_mismatch() -> None:
    headers = sign()
    assert denied(headers, body=b'{"QueryExecutionId":"q-2"}').startswith(
        "The request signature we calculated does not match the signature you provided."
    )
    swapped = headers | {"X-Amz-Target": "AmazonAthena.StopQueryExecution"}
    assert "does not match" in denied(swapped)


def test_wrong_secret_and_unknown_key() -> None:
    assert "does not match" in denied(sign(secret="not-the-secret"))
    other = sign()
    other["Authorization"] = other["Authorization"].replace(KEY, "AKIDUNKNOWN")
    assert denied(other) == "The security token included in the request is invalid."


def test_clock_skew_over_five_minutes_either_way() -> None:
    headers = sign()
    assert check(headers, now=SIGNED_AT + timedelta(minutes=4, seconds=59)) == KEY
    assert check(headers, now=SIGNED_AT - timedelta(minutes=4, seconds=59)) == KEY
    late = denied(headers, now=SIGNED_AT + timedelta(minutes=6))
    assert late == (
        "Signature expired: 20240501T120000Z is now earlier than 20240501T120100Z "
        "(20240501T120600Z - 5 min.)"
    )
    early = denied(headers, now=SIGNED_AT - timedelta(minutes=6))
    assert early.startswith("Signature not yet current: 20240501T120000Z is still later than")


@pytest.mark.parametrize(
    ("authorization", "message"),
    [
        (None, "Missing Authentication Token"),
        ("", "Missing Authentication Token"),
        ("Bearer abc", "Missing Authentication Token"),
        ("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240501/eu-west-1/athena/aws4_request",
         "requires 'SignedHeaders' parameter"),
        ("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240501/athena/aws4_request" + REST,
         "Credential should be of the form"),
        ("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240501/eu-west-1/athena/aws4" + REST,
         "valid terminator"),
        ("AWS4-HMAC-SHA256 garbage", "malformed"),
    ],
)  # fmt: skip
def test_missing_or_malformed_authorization(authorization: str | None, message: str) -> None:
    headers = sign()
    del headers["Authorization"]
    if authorization is not None:
        headers["Authorization"] = authorization
    assert message in denied(headers)


def test_scope_must_name_athena_and_the_request_date() -> None:
    assert "correct service: 'athena'" in denied(sign(service="s3"))
    headers = sign()
    headers["X-Amz-Date"] = "20240502T120000Z"
    assert "Date in Credential scope does not match" in denied(
        headers, now=datetime(2024, 5, 2, 12, 0, tzinfo=UTC)
    )
    headers["X-Amz-Date"] = "yesterday"
    assert "ISO-8601" in denied(headers)
    del headers["X-Amz-Date"]
    assert "requires existence of either a 'X-Amz-Date' or a 'Date' header" in denied(headers)


def test_http_date_header_may_stand_in_for_x_amz_date() -> None:
    # botocore signs with Date rather than X-Amz-Date when the request already has one.
    headers = sign(extra={"Date": "Wed, 01 May 2024 00:00:00 GMT"})
    assert "X-Amz-Date" not in headers
    assert check(headers) == KEY


def test_target_and_host_must_be_signed() -> None:
    headers = sign()
    unsigned = headers | {"Authorization": headers["Authorization"].replace("x-amz-target", "")}
    assert "lower-case, sorted and unique" in denied(unsigned)
    without = headers | {"Authorization": headers["Authorization"].replace(";x-amz-target", "")}
    assert "'X-Amz-Target' must be a 'SignedHeader'" in denied(without)
    no_host = headers | {"Authorization": headers["Authorization"].replace("host;", "")}
    assert "'Host' must be a 'SignedHeader'" in denied(no_host)
    del headers["X-Amz-Target"]
    assert "not present in the request: x-amz-target" in denied(headers)


def test_declared_payload_hash_must_be_the_body_hash() -> None:
    # Signing UNSIGNED-PAYLOAD would let a captured signature carry any body.
    headers = sign(extra={"X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"})
    assert "does not match" in denied(headers)


def test_replayed_mutating_request_is_refused_but_reads_are_not() -> None:
    guard = ReplayGuard()
    start = sign(target="AmazonAthena.StartQueryExecution")
    assert check(start, guard=guard, mutating=True) == KEY
    message = denied(start, guard=guard, mutating=True, now=SIGNED_AT + timedelta(seconds=30))
    assert "already been received" in message

    poll = sign()  # GetQueryExecution: identical polls within one second are normal
    for _ in range(3):
        assert check(poll, guard=guard) == KEY


def test_replay_guard_forgets_after_the_window_and_stays_bounded() -> None:
    guard = ReplayGuard(window=timedelta(minutes=5), max_entries=2)
    guard.check("a", SIGNED_AT, SIGNED_AT)
    guard.check("b", SIGNED_AT, SIGNED_AT)
    with pytest.raises(AccessDenied):
        guard.check("a", SIGNED_AT, SIGNED_AT + timedelta(minutes=5))
    with pytest.raises(TooManyRequests):  # full: refuse rather than forget early
        guard.check("c", SIGNED_AT, SIGNED_AT)
    later = SIGNED_AT + timedelta(minutes=5, seconds=1)
    guard.check("c", later, later)  # "a" and "b" have expired and are forgotten
    guard.check("a", later, later)
    with pytest.raises(TooManyRequests):
        guard.check("d", later, later)
