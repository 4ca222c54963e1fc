"""Reading S3 event notifications: AWS's shape, MinIO's webhook, SNS envelopes, bad input."""

from __future__ import annotations

import json

from lakeward.erasure.index import pad_sequencer
from lakeward.erasure.realtime.notifications import parse_body
from lakeward.storage import created_event, removed_event
from lakeward.storage.model import ObjectInfo


def aws_record(name: str, bucket: str, key: str, **obj: object) -> dict[str, object]:
    return {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "eventName": name,
        "s3": {"bucket": {"name": bucket}, "object": {"key": key, **obj}},
    }


def test_aws_records_are_read_with_keys_decoded() -> None:
    body = {
        "Records": [
            aws_record(
                "ObjectCreated:Put",
                "lake",
                "reviews/year%3D2024/my+file%C3%A9.json",
                size=12,
                eTag='"0123abcd"',
                versionId="v1",
                sequencer="0055AED6DCD90281E5",
            ),
            aws_record("ObjectRemoved:Delete", "lake", "a/b.csv", sequencer="0055AED6DCD90281E6"),
            aws_record("ObjectRemoved:DeleteMarkerCreated", "lake", "c.csv"),
            aws_record("ObjectAccessed:Get", "lake", "a/b.csv"),
        ]
    }
    parsed = parse_body(json.dumps(body).encode(), "webhook")
    created, removed, marker = parsed.events
    assert (created.kind, created.bucket, created.key) == (
        "created",
        "lake",
        "reviews/year=2024/my fileé.json",
    )
    assert (created.etag, created.size, created.version_id) == ("0123abcd", 12, "v1")
    assert created.sequencer == "0055AED6DCD90281E5"
    assert (removed.kind, removed.key, removed.etag) == ("removed", "a/b.csv", None)
    assert marker.kind == "removed"
    assert parsed.ignored == 1  # the read
    assert parsed.malformed == []


def test_minio_webhook_shape() -> None:
    record = aws_record("s3:ObjectCreated:Put", "bucket", "dir/x%2By.json", eTag="e1", size=3)
    body = {"EventName": "s3:ObjectCreated:Put", "Key": "bucket/dir/x+y.json", "Records": [record]}
    (event,) = parse_body(json.dumps(body).encode(), "webhook").events
    assert (event.kind, event.bucket, event.key, event.etag) == (
        "created",
        "bucket",
        "dir/x+y.json",
        "e1",
    )


def test_sns_envelope_and_s3_test_event() -> None:
    inner = {"Records": [aws_record("ObjectRemoved:Delete", "b", "k%20l")]}
    envelope = {"Type": "Notification", "MessageId": "1", "Message": json.dumps(inner)}
    (event,) = parse_body(json.dumps(envelope).encode(), "webhook").events
    assert (event.kind, event.key) == ("removed", "k l")
    test_event = {"Service": "Amazon S3", "Event": "s3:TestEvent", "Bucket": "b"}
    parsed = parse_body(json.dumps(test_event).encode(), "webhook")
    assert (parsed.events, parsed.malformed, parsed.ignored) == ([], [], 1)


def test_lakeward_storage_events_round_trip() -> None:
    from datetime import UTC, datetime

    info = ObjectInfo("lakeward-data", "a b/c=d.json", 5, "abc", datetime.now(UTC), "file:///x")
    created = parse_body(json.dumps(created_event(info, "us-east-1")).encode(), "storage")
    removed = parse_body(
        json.dumps(removed_event("lakeward-data", "a b/c=d.json", "us-east-1")).encode(), "storage"
    )
    (c,), (r,) = created.events, removed.events
    assert (c.key, c.etag, c.size) == ("a b/c=d.json", "abc", 5)
    assert r.key == "a b/c=d.json"
    assert pad_sequencer(c.sequencer) < pad_sequencer(r.sequencer)  # type: ignore[operator]


def test_malformed_records_are_reported_not_raised() -> None:
    good = aws_record("ObjectCreated:Put", "b", "ok.json")
    body = {
        "Records": [
            good,
            {"eventName": "ObjectCreated:Put"},
            aws_record("ObjectCreated:Put", "b", "k", size="big"),
            aws_record("ObjectCreated:Put", "b", "k", sequencer="zz"),
            aws_record("ObjectCreated:Put", "", "k"),
            "not a record",
        ]
    }
    parsed = parse_body(json.dumps(body).encode(), "webhook")
    assert [e.key for e in parsed.events] == ["ok.json"]
    reasons = [m.reason for m in parsed.malformed]
    assert reasons == [
        "the record has no s3.bucket.name",
        "s3.object.size is not a size",
        "s3.object.sequencer is not hexadecimal",
        "s3.bucket.name is not a bucket name",
        "the record has no eventName",
    ]
    assert all(m.excerpt for m in parsed.malformed)
    assert (
        parse_body(b"{not json", "webhook").malformed[0].reason.startswith("the body is not JSON")
    )
    assert parse_body(b"[1, 2]", "webhook").malformed[0].reason == "a notification is a JSON object"
    assert (
        parse_body(b'{"x": 1}', "webhook").malformed[0].reason
        == "no Records list in the notification"
    )


def test_sns_subscription_confirmations_are_kept_for_an_operator() -> None:
    body = {"Type": "SubscriptionConfirmation", "SubscribeURL": "https://sns.example/confirm?x=1"}
    parsed = parse_body(json.dumps(body).encode(), "webhook")
    assert (parsed.events, parsed.ignored) == ([], 1)
    assert parsed.confirmations == ["https://sns.example/confirm?x=1"]
