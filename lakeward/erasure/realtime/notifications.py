"""S3 event notifications as they reach lakeward, read into ``ObjectEvent``s.

Three shapes arrive at ``POST /events/s3`` and from the lake's own storage:

* AWS S3's (event structure 2.x): ``{"Records": [{"eventName":
  "ObjectCreated:Put", "s3": {"bucket": {"name"}, "object": {"key", "size",
  "eTag", "versionId", "sequencer"}}}]}``, keys form-encoded;
* MinIO's webhook: the same records with ``s3:``-prefixed event names, plus
  ``EventName`` and ``Key`` (``bucket/key``) at the top level;
* an SNS HTTP(S) subscription (how AWS S3 reaches a webhook): an envelope
  ``{"Type": "Notification", "Message": "<the S3 JSON as a string>"}``.

A record that cannot be read is returned as a ``Malformed`` entry with its
reason, never raised: one bad record must not lose the good ones beside it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from lakeward.storage import decode_key

Kind = Literal["created", "removed"]

# Event names are matched after dropping MinIO's "s3:" prefix.
_CREATED = "ObjectCreated:"
_REMOVED = ("ObjectRemoved:", "LifecycleExpiration:Delete")
_EXCERPT = 200


@dataclass(frozen=True)
class ObjectEvent:
    """One object created or removed, in the terms of the lake or of a bucket."""

    kind: Kind
    bucket: str
    key: str
    etag: str | None = None
    """Without quotes; None when the event does not say (removals, the watcher)."""
    size: int | None = None
    version_id: str | None = None
    sequencer: str | None = None
    source: str = "storage"
    received: float = field(default_factory=time.time)
    """When lakeward learned of it (epoch seconds): the start of its lag."""


@dataclass(frozen=True)
class Malformed:
    """A notification or record that could not be read, for the dead-letter table."""

    reason: str
    excerpt: str
    source: str


@dataclass
class Parsed:
    events: list[ObjectEvent] = field(default_factory=list)
    malformed: list[Malformed] = field(default_factory=list)
    ignored: int = 0
    """Records of other kinds (reads, restores, replication, test events)."""
    confirmations: list[str] = field(default_factory=list)
    """SubscribeURLs of SNS subscription confirmations, for an operator to open."""


def _excerpt(value: Any) -> str:
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _EXCERPT else text[: _EXCERPT - 1] + "…"


def parse_body(body: bytes, source: str) -> Parsed:
    """A webhook's raw body: JSON, in any of the shapes of the module docstring."""
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        text = body[:_EXCERPT].decode("utf-8", "replace")
        return Parsed(malformed=[Malformed(f"the body is not JSON: {exc}", text, source)])
    return parse_notification(document, source)


def parse_notification(document: Any, source: str) -> Parsed:
    """A decoded notification: S3 or MinIO records, or an SNS envelope around them."""
    parsed = Parsed()
    if not isinstance(document, dict):
        parsed.malformed.append(
            Malformed("a notification is a JSON object", _excerpt(document), source)
        )
        return parsed
    if document.get("Type") == "Notification" and isinstance(document.get("Message"), str):
        try:
            inner = json.loads(document["Message"])
        except json.JSONDecodeError as exc:
            reason = f"the SNS Message is not JSON: {exc}"
            parsed.malformed.append(Malformed(reason, _excerpt(document), source))
            return parsed
        return parse_notification(inner, source)
    if document.get("Type") in ("SubscriptionConfirmation", "UnsubscribeConfirmation"):
        # Confirming means fetching a URL named in the body: left to an operator
        # (docs/erasure.md), never done by the server on an outsider's say-so.
        parsed.ignored += 1
        url = document.get("SubscribeURL")
        if isinstance(url, str):
            parsed.confirmations.append(url[:2048])
        return parsed
    if document.get("Event") == "s3:TestEvent":
        parsed.ignored += 1  # what S3 sends when a notification is configured
        return parsed
    records = document.get("Records")
    if not isinstance(records, list):
        parsed.malformed.append(
            Malformed("no Records list in the notification", _excerpt(document), source)
        )
        return parsed
    for record in records:
        try:
            event = _read_record(record, source)
        except _BadRecord as exc:
            parsed.malformed.append(Malformed(str(exc), _excerpt(record), source))
            continue
        if event is None:
            parsed.ignored += 1
        else:
            parsed.events.append(event)
    return parsed


class _BadRecord(ValueError):
    pass


def _field(node: Any, *path: str) -> Any:
    for name in path:
        if not isinstance(node, dict) or name not in node:
            raise _BadRecord(f"the record has no {'.'.join(path)}")
        node = node[name]
    return node


def _read_record(record: Any, source: str) -> ObjectEvent | None:
    name = _field(record, "eventName")
    if not isinstance(name, str):
        raise _BadRecord("eventName is not a string")
    name = name.removeprefix("s3:")
    if name.startswith(_CREATED):
        kind: Kind = "created"
    elif name.startswith(_REMOVED):
        kind = "removed"
    else:
        return None
    bucket = _field(record, "s3", "bucket", "name")
    encoded = _field(record, "s3", "object", "key")
    if not isinstance(bucket, str) or not bucket:
        raise _BadRecord("s3.bucket.name is not a bucket name")
    if not isinstance(encoded, str) or not encoded:
        raise _BadRecord("s3.object.key is not an object key")
    obj = record["s3"]["object"]
    etag = obj.get("eTag") or obj.get("etag")
    size = obj.get("size")
    version_id = obj.get("versionId")
    sequencer = obj.get("sequencer")
    if etag is not None and not isinstance(etag, str):
        raise _BadRecord("s3.object.eTag is not a string")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
        raise _BadRecord("s3.object.size is not a size")
    if sequencer is not None and not (
        isinstance(sequencer, str) and all(c in "0123456789abcdefABCDEF" for c in sequencer)
    ):
        raise _BadRecord("s3.object.sequencer is not hexadecimal")
    return ObjectEvent(
        kind=kind,
        bucket=bucket,
        key=decode_key(encoded),
        etag=etag.strip('"') if etag else None,
        size=size,
        version_id=str(version_id) if version_id not in (None, "", "null") else None,
        sequencer=sequencer or None,
        source=source,
    )


def storage_event(notification: dict[str, Any]) -> Parsed:
    """A notification of lakeward's own storage (``Storage.subscribe``)."""
    return parse_notification(notification, "storage")
