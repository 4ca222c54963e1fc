"""Where things live in the lake (``<lake root>/<bucket>/<key>``), and how a place's URI
is read whatever its spelling: the one module outside the backends that looks at a
URI's scheme, so that no other layer decides by it.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

from lakeward.config import Settings
from lakeward.errors import InvalidKey


def bucket_uri(settings: Settings, bucket: str) -> str:
    return f"{settings.lake_root}/{bucket}"


def data_uri(settings: Settings, key: str) -> str:
    """URI of a key in the stack's data bucket."""
    return f"{bucket_uri(settings, settings.lake.data_bucket)}/{key.lstrip('/')}"


def warehouse_uri(settings: Settings) -> str:
    """Where managed (non-external) tables go."""
    return data_uri(settings, "warehouse")


def public_uri(settings: Settings, bucket: str, key: str = "") -> str:
    """The name users and their tools see for a place in the lake.

    The embedded (``file://``) lake is served by the stack's S3 endpoint, so its places are
    ``s3://<bucket>/<key>``, a name every AWS tool reads; a lake on S3 is named by its own
    URI. ``lake_place`` and ``lake_uri`` read both names back.
    """
    if settings.lake_root.startswith("file:"):
        return f"s3://{bucket}/{key}" if key else f"s3://{bucket}"
    return f"{bucket_uri(settings, bucket)}/{key}" if key else bucket_uri(settings, bucket)


def lake_uri(settings: Settings, uri: str) -> str:
    """The storage's own URI of a place in the lake (``<lake root>/<bucket>/<key>``), however
    it was named; any other URI as it is."""
    place = lake_place(settings, uri)
    if place is None:
        return uri
    bucket, key = place
    return f"{bucket_uri(settings, bucket)}/{key}" if key else bucket_uri(settings, bucket)


def catalog_uri(settings: Settings, uri: str) -> str:
    """The name the metastore keeps for a place: its public name (``public_uri``) for a
    place in the lake, however it was spelt; any other URI as it is."""
    place = lake_place(settings, uri)
    if place is None:
        return uri
    return public_uri(settings, *place)


def same_place(settings: Settings, one: str, other: str) -> bool:
    """Whether two spellings of a location name the same place."""
    return catalog_uri(settings, one).rstrip("/") == catalog_uri(settings, other).rstrip("/")


def hadoop_uri(uri: str) -> str:
    """The URI as Hadoop-based engines (Spark, the metastore) spell it.

    Hadoop reads S3 through its ``s3a`` connector.
    """
    return "s3a://" + uri.removeprefix("s3://") if uri.startswith("s3://") else uri


def file_uri(uri: str) -> str:
    """A ``file:`` URI spelt ``file:///x`` however it was written (Hadoop and the
    metastore write ``file:/x``); any other URI as it is."""
    return "file:///" + uri[len("file:") :].lstrip("/") if uri.startswith("file:") else uri


def local_path(uri: str) -> Path | None:
    """The path on this machine that a ``file://`` URI (or a plain path) names; None for a
    place elsewhere (``s3://``)."""
    if uri.startswith("file://"):
        return Path(url2pathname(urlsplit(uri).path))
    if "://" in uri:
        return None
    return Path(uri)


def lake_place(settings: Settings, uri: str) -> tuple[str, str] | None:
    """The bucket and key of a place in the stack's lake, whichever way its scheme is spelt
    (``file:/x``, ``file:///x``, ``s3a://b``, ``s3://b``, and the embedded lake's S3 names
    ``s3://<bucket>/<key>``); None for a place outside it.

    A place with a '.' or '..' folder is refused: on a file:// lake it would name another
    bucket or a place outside the lake than the one its permissions are checked on.
    """
    return place_in(settings.lake_root, uri)


def place_in(lake_root: str, uri: str) -> tuple[str, str] | None:
    """``lake_place`` for the lake at ``lake_root``."""
    root, plain = _plain(lake_root), _plain(uri)
    if lake_root.startswith("file:") and uri.startswith(("s3://", "s3a://")):
        relative = plain  # the embedded lake's S3 name: s3://<bucket>/<key> (public_uri)
    elif plain.startswith(root + "/"):
        relative = plain[len(root) + 1 :]
    else:
        return None
    if any(part in (".", "..") for part in relative.split("/")):
        raise InvalidKey(f"{uri}: a place in the lake must not have a '.' or '..' folder")
    bucket, _, key = relative.partition("/")
    return bucket, key


def _plain(uri: str) -> str:
    """A lake URI without its scheme's spelling: file:/x, file:///x, s3a://b, s3://b."""
    for prefix in ("file://", "file:", "s3a://", "s3://"):
        if uri.startswith(prefix):
            return (
                uri[len(prefix) :].lstrip("/") if prefix.startswith("file") else uri[len(prefix) :]
            )
    return uri


def hadoop_conf(settings: Settings) -> dict[str, str]:
    """Hadoop's settings (unprefixed) for reaching the lake by its ``s3://`` names with the
    s3a connector: through the stack's own S3 endpoint, signed with the stack's key pair,
    for the embedded lake; through the configured endpoint (AWS S3, MinIO) for an S3 lake.

    ``s3://`` is read by s3a too (as on EMR), so the names the metastore keeps work as they
    are. No other credential source is tried: s3a's default chain would probe the network.
    """
    lake = settings.lake
    endpoint: str | None
    region: str | None
    if settings.lake_root.startswith("file:"):
        endpoint, region = settings.server_url, settings.api.region
        key_id, secret = settings.api.access_key_id, settings.api.secret_access_key
    else:
        endpoint, region = lake.s3_endpoint_url, lake.s3_region
        key_id, secret = lake.s3_access_key_id, lake.s3_secret_access_key
    conf = {
        "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",
        "fs.s3a.path.style.access": "true" if endpoint else "false",
    }
    if endpoint:
        conf["fs.s3a.endpoint"] = endpoint
        conf["fs.s3a.connection.ssl.enabled"] = str(endpoint.startswith("https:")).lower()
    if region:
        conf["fs.s3a.endpoint.region"] = region
    if key_id and secret:
        conf["fs.s3a.aws.credentials.provider"] = (
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        )
        conf["fs.s3a.access.key"] = key_id
        conf["fs.s3a.secret.key"] = secret
    return conf
