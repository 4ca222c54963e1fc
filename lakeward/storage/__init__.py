"""The lake's storage: S3-style buckets and objects on ``file://`` or ``s3://``.

storage = load_storage(settings)
storage.put("lakeward-data", "raw/covid/confirmed.csv", data)
unsubscribe = storage.subscribe(print)  # S3 event notifications
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakeward.errors import ConfigError, InvalidKey, PreconditionFailed
from lakeward.storage.base import DEFAULT_REGION, Storage
from lakeward.storage.events import (
    OBJECT_CREATED,
    OBJECT_REMOVED,
    Listener,
    created_event,
    decode_key,
    encode_key,
    next_sequencer,
    removed_event,
)
from lakeward.storage.model import ObjectInfo

if TYPE_CHECKING:
    from lakeward.config import Settings

__all__ = [
    "OBJECT_CREATED",
    "OBJECT_REMOVED",
    "InvalidKey",
    "Listener",
    "ObjectInfo",
    "PreconditionFailed",
    "Storage",
    "created_event",
    "decode_key",
    "encode_key",
    "load_storage",
    "next_sequencer",
    "removed_event",
]


def load_storage(settings: Settings) -> Storage:
    """The storage of the lake root in ``settings``, chosen by its scheme."""
    root = settings.lake_root
    region = settings.lake.s3_region or DEFAULT_REGION
    # Backends are imported on demand: boto3 takes a while to import and a
    # file:// lake never needs it.
    if root.startswith("file://"):
        from lakeward.storage.local import LocalStorage

        return LocalStorage(root, region)
    if root.startswith("s3://"):
        from lakeward.storage.s3 import S3Storage

        return S3Storage.from_settings(settings)
    raise ConfigError(f"lake.root: {root!r} is neither a file:// nor an s3:// URI")
