"""Keeping the erasure index current as objects come and go (the real-time flow).

indexer = RealtimeIndexer.for_settings(settings)
indexer.start()          # storage events, the file:// watcher, and accept() for webhooks
indexer.accept(parse_body(body, "webhook"))
indexer.wait_idle()
"""

from lakeward.erasure.realtime.indexer import RealtimeIndexer, lake_location
from lakeward.erasure.realtime.notifications import (
    Malformed,
    ObjectEvent,
    Parsed,
    parse_body,
    parse_notification,
)
from lakeward.erasure.realtime.status import RealtimeStatus, read_status

__all__ = [
    "Malformed",
    "ObjectEvent",
    "Parsed",
    "RealtimeIndexer",
    "RealtimeStatus",
    "lake_location",
    "parse_body",
    "parse_notification",
    "read_status",
]
