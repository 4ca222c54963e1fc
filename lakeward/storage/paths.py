"""Where things live in the lake: ``<lake root>/<bucket>/<key>``."""

from __future__ import annotations

from lakeward.config import Settings


def bucket_uri(settings: Settings, bucket: str) -> str:
    return f"{settings.lake_root}/{bucket}"


def data_uri(settings: Settings, key: str) -> str:
    """URI of a key in the stack's data bucket."""
    return f"{bucket_uri(settings, settings.lake.data_bucket)}/{key.lstrip('/')}"


def warehouse_uri(settings: Settings) -> str:
    """Where managed (non-external) tables go."""
    return data_uri(settings, "warehouse")


def hadoop_uri(uri: str) -> str:
    """The URI as Hadoop-based engines (Spark, the metastore) spell it.

    Hadoop reads S3 through its ``s3a`` connector.
    """
    return "s3a://" + uri.removeprefix("s3://") if uri.startswith("s3://") else uri
