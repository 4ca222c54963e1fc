"""S3 event notifications: their shape, their order, and listeners that fail."""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from typing import Any

import pytest
from storage_helpers import BUCKET, Recorder

from lakeward.storage import (
    Storage,
    decode_key,
    encode_key,
    next_sequencer,
)

EVENT_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
SEQUENCER = re.compile(r"^[0-9A-F]{18}$")


def check_common_shape(record: dict[str, Any], event_name: str) -> dict[str, Any]:
    """Check what every S3 record has; returns its ``s3.object``."""
    assert record["eventVersion"] == "2.1"
    assert record["eventSource"] == "aws:s3"
    assert record["awsRegion"] == "us-east-1"
    assert EVENT_TIME.match(record["eventTime"])
    assert record["eventName"] == event_name
    assert set(record) >= {"userIdentity", "requestParameters", "responseElements"}
    assert "principalId" in record["userIdentity"]
    assert "sourceIPAddress" in record["requestParameters"]
    assert {"x-amz-request-id", "x-amz-id-2"} <= set(record["responseElements"])
    s3 = record["s3"]
    assert s3["s3SchemaVersion"] == "1.0"
    assert s3["configurationId"]
    assert s3["bucket"]["name"] == BUCKET
    assert s3["bucket"]["arn"] == f"arn:aws:s3:::{BUCKET}"
    assert "principalId" in s3["bucket"]["ownerIdentity"]
    obj: dict[str, Any] = s3["object"]
    assert SEQUENCER.match(obj["sequencer"])
    return obj


def test_put_and_delete_events_have_the_s3_shape(storage: Storage, recorder: Recorder) -> None:
    data = b"a,b\n1,2\n"
    storage.put(BUCKET, "raw/covid/dt=2020-03-01/some file.csv", data)
    storage.delete(BUCKET, "raw/covid/dt=2020-03-01/some file.csv")

    assert len(recorder.notifications) == 2
    assert all(len(n["Records"]) == 1 for n in recorder.notifications)
    created, removed = recorder.records

    obj = check_common_shape(created, "ObjectCreated:Put")
    # Keys are form-encoded as S3 sends them: spaces as '+', '=' as %3D.
    assert obj["key"] == "raw/covid/dt%3D2020-03-01/some+file.csv"
    assert decode_key(obj["key"]) == "raw/covid/dt=2020-03-01/some file.csv"
    assert obj["size"] == len(data)
    assert obj["eTag"] == hashlib.md5(data).hexdigest()

    gone = check_common_shape(removed, "ObjectRemoved:Delete")
    assert gone["key"] == obj["key"]
    assert "size" not in gone and "eTag" not in gone
    assert obj["sequencer"] < gone["sequencer"]


def test_sequencers_increase_in_event_order(storage: Storage, recorder: Recorder) -> None:
    for n in range(5):
        storage.put(BUCKET, "same/key", str(n).encode())
    storage.put(BUCKET, "other", b"x")
    storage.delete_prefix(BUCKET, "")
    sequencers = [r["s3"]["object"]["sequencer"] for r in recorder.records]
    assert len(sequencers) == 8
    assert sequencers == sorted(sequencers)
    assert len(set(sequencers)) == len(sequencers)
    assert [r["eventName"] for r in recorder.records[-2:]] == ["ObjectRemoved:Delete"] * 2


def test_a_failing_listener_does_not_break_the_write(
    storage: Storage, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(notification: dict[str, Any]) -> None:
        raise RuntimeError("listener bug")

    unsubscribe = storage.subscribe(broken)
    after = Recorder()
    storage.subscribe(after)
    with caplog.at_level(logging.ERROR, logger="lakeward.storage.events"):
        info = storage.put(BUCKET, "k", b"data")
        storage.delete(BUCKET, "k")

    assert info.size == 4
    assert not storage.exists(BUCKET, "k")
    # Listeners before and after the broken one still hear of both changes.
    assert len(recorder.records) == len(after.records) == 2
    failures = [r for r in caplog.records if "listener" in r.getMessage()]
    assert len(failures) == 2
    assert "ObjectCreated:Put of lakeward-data/k" in failures[0].getMessage()
    assert failures[0].exc_info is not None
    unsubscribe()


def test_unsubscribe_stops_notifications(storage: Storage) -> None:
    heard = Recorder()
    unsubscribe = storage.subscribe(heard)
    storage.put(BUCKET, "a", b"1")
    unsubscribe()
    unsubscribe()  # harmless twice
    storage.put(BUCKET, "b", b"2")
    assert [decode_key(r["s3"]["object"]["key"]) for r in heard.records] == ["a"]


def test_sequencers_are_unique_and_fixed_width_across_threads() -> None:
    results: list[list[str]] = [[] for _ in range(8)]

    def draw(into: list[str]) -> None:
        into.extend(next_sequencer() for _ in range(2000))

    threads = [threading.Thread(target=draw, args=(r,)) for r in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    everything = [s for r in results for s in r]
    assert len(set(everything)) == len(everything)
    assert all(SEQUENCER.match(s) for s in everything)
    for drawn in results:  # each thread sees them strictly increasing
        assert drawn == sorted(drawn) and len(set(drawn)) == len(drawn)


@pytest.mark.parametrize(
    ("key", "encoded"),
    [
        ("plain/key.csv", "plain/key.csv"),
        ("with space", "with+space"),
        ("p=1/x", "p%3D1/x"),
        ("plus+sign", "plus%2Bsign"),
        ("ünïcode", "%C3%BCn%C3%AFcode"),
    ],
)
def test_keys_are_encoded_as_s3_does(key: str, encoded: str) -> None:
    assert encode_key(key) == encoded
    assert decode_key(encoded) == key
