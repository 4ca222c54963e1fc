"""What the storage layer says about an object, shared by the backends and the events.

A module of its own so that storage/base.py (which publishes events) and
storage/events.py (which describes objects in them) need not import each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class ObjectInfo:
    bucket: str
    key: str
    size: int
    etag: str
    """MD5 hex of the content for single-part writes, as S3 gives it, without quotes."""
    last_modified: datetime
    """Timezone-aware, in UTC."""
    uri: str
    sha256: str | None = None
    """Hex SHA-256 of the content, where known without reading it again."""
