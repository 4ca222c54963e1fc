"""The lake's places as pyarrow filesystems, for readers that scan files themselves.

The SQL service's engines and its bytes-scanned accounting list and read a table's
files with pyarrow. Which filesystem a location needs, and with which endpoint and
credentials for S3, is decided here once: ``file:`` locations are local paths,
``s3:``/``s3a:``/``s3n:`` ones go to the lake's S3 endpoint (AWS S3, MinIO, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from lakeward.storage.base import DEFAULT_REGION
from lakeward.storage.paths import lake_uri

if TYPE_CHECKING:
    from lakeward.config import Settings

S3_SCHEMES = ("s3", "s3a", "s3n")


@dataclass(frozen=True)
class S3Options:
    """Where ``s3://`` locations are read from: the lake's endpoint and credentials."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> S3Options:
        lake = settings.lake
        return cls(
            lake.s3_endpoint_url, lake.s3_region, lake.s3_access_key_id, lake.s3_secret_access_key
        )

    def filesystem(self) -> pafs.S3FileSystem:
        options: dict[str, Any] = {"region": self.region or DEFAULT_REGION}
        if self.endpoint_url:
            parts = urlsplit(self.endpoint_url)
            options.update(endpoint_override=parts.netloc, scheme=parts.scheme or "https")
        if self.access_key_id:
            options.update(access_key=self.access_key_id, secret_key=self.secret_access_key)
        return pafs.S3FileSystem(**options)


def arrow_filesystem(
    location: str, s3: S3Options | None = None, settings: Settings | None = None
) -> tuple[pafs.FileSystem, str]:
    """The filesystem that holds ``location`` and the path of it there; with the stack's
    ``settings``, the embedded lake's s3:// names are its files (no HTTP hop).

    Raises ``ValueError`` for a scheme that is neither ``file`` nor S3's.
    """
    if settings is not None:
        location = lake_uri(settings, location)
    # A metastore's location is a Hadoop path, not a URL: its characters are the names'
    # own (a Hive partition of "Cote d'Ivoire" is the directory "country=Cote d%27Ivoire").
    parts = urlsplit(location)
    if parts.scheme in ("", "file"):
        return pafs.LocalFileSystem(), parts.path
    if parts.scheme in S3_SCHEMES:
        path = f"{parts.netloc}/{parts.path.strip('/')}".rstrip("/")
        return (s3 or S3Options()).filesystem(), path
    raise ValueError(f"{location}: only file: and s3: locations are readable")
