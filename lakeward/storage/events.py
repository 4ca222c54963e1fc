"""S3 event notifications for writes to the lake.

The records have exactly the shape AWS S3 and MinIO deliver (event structure
version 2.1), so that a consumer written against S3 notifications (a Lambda
handler, a crawler, an indexer) can subscribe to lakeward unchanged. The bucket
and key in a record are the lake's *logical* bucket and key, whichever backend
stores them.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote_plus, unquote_plus

from lakeward.storage.model import ObjectInfo

log = logging.getLogger(__name__)

Listener = Callable[[dict[str, Any]], None]
"""Receives one notification, ``{"Records": [record]}``, per event."""

OBJECT_CREATED = "ObjectCreated:Put"
OBJECT_REMOVED = "ObjectRemoved:Delete"

EVENT_VERSION = "2.1"
EVENT_SOURCE = "aws:s3"  # what consumers written for S3 and MinIO filter on
CONFIGURATION_ID = "lakeward"
PRINCIPAL_ID = "lakeward"
SOURCE_IP = "127.0.0.1"

# 18 hex digits hold nanoseconds since the epoch until the year 9000-odd, so the
# width never changes and string order stays numeric order.
_SEQUENCER_WIDTH = 18
_sequencer_lock = threading.Lock()
_last_sequencer = 0


def next_sequencer() -> str:
    """A fixed-width upper-case hex sequencer, strictly increasing within the process.

    Seeded from the clock so that sequencers of successive processes also tend
    to increase; the lock makes them unique across threads.
    """
    global _last_sequencer
    with _sequencer_lock:
        _last_sequencer = max(_last_sequencer + 1, time.time_ns())
        value = _last_sequencer
    return f"{value:0{_SEQUENCER_WIDTH}X}"


def encode_key(key: str) -> str:
    """Encode a key as S3 does in notifications: form encoding, ``/`` kept.

    Spaces become ``+`` and ``=`` becomes ``%3D`` (which is how Hive partition
    directories such as ``dt=2020-01-01`` show up in real S3 events).
    """
    return quote_plus(key, safe="/")


def decode_key(encoded: str) -> str:
    """The object key of a notification record, decoded."""
    return unquote_plus(encoded)


def _event_time() -> str:
    moment = datetime.now(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _record(
    event_name: str,
    bucket: str,
    obj: dict[str, Any],
    region: str,
) -> dict[str, Any]:
    request_id = uuid.uuid4().hex[:16].upper()
    return {
        "eventVersion": EVENT_VERSION,
        "eventSource": EVENT_SOURCE,
        "awsRegion": region,
        "eventTime": _event_time(),
        "eventName": event_name,
        "userIdentity": {"principalId": PRINCIPAL_ID},
        "requestParameters": {"sourceIPAddress": SOURCE_IP},
        "responseElements": {
            "x-amz-request-id": request_id,
            "x-amz-id-2": uuid.uuid4().hex,
        },
        "s3": {
            "s3SchemaVersion": "1.0",
            "configurationId": CONFIGURATION_ID,
            "bucket": {
                "name": bucket,
                "ownerIdentity": {"principalId": PRINCIPAL_ID},
                "arn": f"arn:aws:s3:::{bucket}",
            },
            "object": obj,
        },
    }


def created_event(info: ObjectInfo, region: str) -> dict[str, Any]:
    """The ``ObjectCreated:Put`` notification for an object just written."""
    obj = {
        "key": encode_key(info.key),
        "size": info.size,
        "eTag": info.etag,
        "sequencer": next_sequencer(),
    }
    return {"Records": [_record(OBJECT_CREATED, info.bucket, obj, region)]}


def removed_event(bucket: str, key: str, region: str) -> dict[str, Any]:
    """The ``ObjectRemoved:Delete`` notification; like S3's, it has no size or eTag."""
    obj = {"key": encode_key(key), "sequencer": next_sequencer()}
    return {"Records": [_record(OBJECT_REMOVED, bucket, obj, region)]}


class EventHub:
    """The listeners of one storage, called synchronously after each change.

    A failing listener is logged and skipped: the write it reports has already
    happened, so raising to the writer would only misreport it as failed.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                # Idempotent, and removes only this subscription if the same
                # callable was subscribed twice.
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    @property
    def has_listeners(self) -> bool:
        # Lets writers skip building events nobody receives; a racing
        # subscribe may miss one event, as it would with S3.
        return bool(self._listeners)

    def emit(self, notification: dict[str, Any]) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(notification)
            except Exception:
                record = notification["Records"][0]
                log.exception(
                    "event listener %r failed on %s of %s/%s",
                    listener,
                    record["eventName"],
                    record["s3"]["bucket"]["name"],
                    decode_key(record["s3"]["object"]["key"]),
                )
