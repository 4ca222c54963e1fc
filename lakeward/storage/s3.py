"""The ``s3://`` lake, on AWS S3 or anything that speaks its API (MinIO).

A lake root ``s3://<root bucket>/<prefix>`` holds the lake's logical buckets
as prefixes: object ``<key>`` of bucket ``<bucket>`` is stored at
``<prefix>/<bucket>/<key>`` in the root bucket, so one real bucket (and one
bucket policy) serves the whole lake.
"""

from __future__ import annotations

import base64
import io
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import TYPE_CHECKING, Any, BinaryIO, cast
from urllib.parse import urlsplit

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
)

from lakeward.errors import ConfigError, ObjectNotFound, StorageError
from lakeward.storage.base import (
    CHUNK_SIZE,
    DEFAULT_REGION,
    Digests,
    Storage,
    iter_chunks,
    reason_of,
)
from lakeward.storage.model import ObjectInfo

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

    from lakeward.config import Settings

# Streams are spooled (to compute the checksums S3 verifies) in memory up to
# this size, then on disk.
SPOOL_MAX_MEMORY = 16 * 1024 * 1024
DELETE_BATCH = 1000  # the most DeleteObjects takes per call

_NOT_FOUND = {"NoSuchKey", "404", "NotFound"}
_DENIED = {"AccessDenied", "403", "AllAccessDisabled"}
_BAD_CREDENTIALS = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken"}
_CORRUPTED = {"BadDigest", "InvalidDigest", "XAmzContentChecksumMismatch"}


def _client_config(path_style: bool) -> Config:
    options: dict[str, Any] = {
        "signature_version": "s3v4",
        "retries": {"max_attempts": 5, "mode": "standard"},
    }
    if path_style:
        # MinIO and test servers are addressed as host:port/bucket, not bucket.host.
        options["s3"] = {"addressing_style": "path"}
    if "request_checksum_calculation" in Config.OPTION_DEFAULTS:
        # Newer botocore adds CRC32 checksums to every upload by default, which
        # some S3-compatible servers reject; only send the checksums we choose.
        options["request_checksum_calculation"] = "when_required"
        options["response_checksum_validation"] = "when_required"
    return Config(**options)


class _BodyReader(io.RawIOBase):
    """A response body as a raw stream whose read failures are ``StorageError``s."""

    def __init__(self, body: Any, uri: str) -> None:
        super().__init__()
        self._body = body
        self._uri = uri

    def readable(self) -> bool:
        return True

    def _read(self, size: int | None) -> bytes:
        try:
            return bytes(self._body.read(size))
        except (BotoCoreError, OSError) as exc:
            raise StorageError(
                f"could not read {self._uri}: the connection failed ({exc})"
            ) from None

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        data = self._read(len(view))
        view[: len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        # One read of the rest rather than RawIOBase's loop of 8 KiB reads.
        return self._read(None)

    def close(self) -> None:
        if not self.closed:
            self._body.close()
        super().close()


class S3Storage(Storage):
    keeps_versions = True  # if the bucket is versioned, which this layer does not control
    etag_is_md5 = False  # multipart uploads' eTags are not

    def __init__(
        self,
        root: str,
        region: str | None = None,
        *,
        endpoint_url: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
    ) -> None:
        parts = urlsplit(root.rstrip("/"))
        if parts.scheme != "s3" or not parts.netloc:
            raise ConfigError(f"lake.root: {root!r} must be s3://<bucket>[/<prefix>]")
        if (access_key_id is None) != (secret_access_key is None):
            raise ConfigError(
                "lake.s3_access_key_id and lake.s3_secret_access_key go together: "
                "set both or neither"
            )
        # None leaves credentials and region to the usual AWS chain (environment,
        # profile, instance role).
        self._client: Any = boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint_url,
            region_name=region,
            aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key,
            config=_client_config(path_style=endpoint_url is not None),
        )
        super().__init__(root, region or self._client.meta.region_name or DEFAULT_REGION)
        self.root_bucket = parts.netloc
        prefix = parts.path.strip("/")
        self.base_prefix = f"{prefix}/" if prefix else ""
        self.endpoint = endpoint_url or "AWS S3"

    @classmethod
    def from_settings(cls, settings: Settings) -> S3Storage:
        lake = settings.lake
        return cls(
            settings.lake_root,
            lake.s3_region,
            endpoint_url=lake.s3_endpoint_url,
            access_key_id=lake.s3_access_key_id,
            secret_access_key=lake.s3_secret_access_key,
        )

    def _key(self, bucket: str, key: str) -> str:
        return f"{self.base_prefix}{bucket}/{key}"

    @contextmanager
    def _errors(self, action: str, uri: str) -> Iterator[None]:
        try:
            yield
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, action, uri) from None

    def _translate(self, exc: Exception, action: str, uri: str) -> StorageError:
        """One plain sentence about ``uri`` for a botocore exception."""
        if isinstance(exc, NoCredentialsError):
            return StorageError(
                f"could not {action} {uri}: no S3 credentials; set lake.s3_access_key_id and "
                "lake.s3_secret_access_key, or configure the AWS credential chain"
            )
        if isinstance(exc, EndpointConnectionError | ConnectTimeoutError):
            return StorageError(
                f"could not {action} {uri}: cannot reach the S3 endpoint {self.endpoint}"
            )
        if not isinstance(exc, ClientError):
            return StorageError(f"could not {action} {uri}: {exc}")
        code = _code(exc)
        message = exc.response.get("Error", {}).get("Message")
        if code in _NOT_FOUND:
            return ObjectNotFound(f"no object at {uri}")
        if code == "NoSuchBucket":
            reason = f"the bucket {self.root_bucket} does not exist"
        elif code in _DENIED:
            reason = "access denied (check the S3 credentials and the bucket policy)"
        elif code in _BAD_CREDENTIALS:
            reason = f"the S3 credentials were refused ({code})"
        elif code in _CORRUPTED:
            reason = f"the data was damaged on the way ({message or code})"
        else:
            reason = f"{message or 'the request failed'} ({code or 'no error code'})"
        return StorageError(f"could not {action} {uri}: {reason}")

    def _put(
        self, bucket: str, key: str, data: bytes | BinaryIO, metadata: dict[str, str]
    ) -> ObjectInfo:
        uri = self.uri(bucket, key)
        digests = Digests()
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_MAX_MEMORY) as spool:
            # The whole content is read before sending: S3 checks the MD5 and
            # SHA-256 against what arrives, so they must be known up front.
            body: BinaryIO
            if isinstance(data, bytes | bytearray | memoryview):
                for chunk in iter_chunks(data, uri):
                    digests.update(chunk)
                body = io.BytesIO(data)
            else:
                try:
                    for chunk in iter_chunks(data, uri):
                        digests.update(chunk)
                        spool.write(chunk)
                    spool.seek(0)
                except OSError as exc:
                    raise StorageError(
                        f"could not buffer the data for {uri}: {reason_of(exc)}"
                    ) from None
                body = cast(BinaryIO, spool)
            with self._errors("write", uri):
                response = self._client.put_object(
                    Bucket=self.root_bucket,
                    Key=self._key(bucket, key),
                    Body=body,
                    ContentLength=digests.size,
                    ContentMD5=base64.b64encode(digests.md5_digest).decode("ascii"),
                    ChecksumSHA256=base64.b64encode(digests.sha256_digest).decode("ascii"),
                    **_put_arguments(metadata, uri),
                    Metadata={**_user_metadata(metadata, uri), _SHA256: digests.sha256},
                )
        return ObjectInfo(
            bucket=bucket,
            key=key,
            size=digests.size,
            etag=str(response["ETag"]).strip('"'),
            last_modified=_response_time(response),
            uri=uri,
            sha256=digests.sha256,
        )

    def _open(self, bucket: str, key: str) -> BinaryIO:
        uri = self.uri(bucket, key)
        with self._errors("read", uri):
            response = self._client.get_object(Bucket=self.root_bucket, Key=self._key(bucket, key))
        return io.BufferedReader(_BodyReader(response["Body"], uri), CHUNK_SIZE)

    def _stat(self, bucket: str, key: str) -> ObjectInfo:
        uri = self.uri(bucket, key)
        with self._errors("read", uri):
            head = self._client.head_object(Bucket=self.root_bucket, Key=self._key(bucket, key))
        return ObjectInfo(
            bucket=bucket,
            key=key,
            size=int(head["ContentLength"]),
            etag=str(head["ETag"]).strip('"'),
            last_modified=head["LastModified"].astimezone(UTC),
            uri=uri,
            sha256=head.get("Metadata", {}).get("sha256"),
        )

    def _metadata(self, bucket: str, key: str) -> dict[str, str]:
        uri = self.uri(bucket, key)
        with self._errors("read", uri):
            head = self._client.head_object(Bucket=self.root_bucket, Key=self._key(bucket, key))
        found = {
            header: _header(head[field]) for header, field in _STANDARD.items() if field in head
        }
        if found.get("Content-Type") == "binary/octet-stream":  # S3's own default
            del found["Content-Type"]
        for name, value in head.get("Metadata", {}).items():
            if name != _SHA256:
                found[f"x-amz-meta-{name}"] = value
        return found

    def _exists(self, bucket: str, key: str) -> bool:
        try:
            self._stat(bucket, key)
        except ObjectNotFound:
            return False
        return True

    def _list(self, bucket: str, prefix: str) -> Iterator[ObjectInfo]:
        uri = self.uri(bucket, prefix)
        strip = len(self._key(bucket, ""))
        paginator = self._client.get_paginator("list_objects_v2")
        pages = iter(paginator.paginate(Bucket=self.root_bucket, Prefix=self._key(bucket, prefix)))
        while True:
            # Only fetching a page is guarded: errors of whoever consumes this
            # generator are theirs, not the lake's.
            with self._errors("list", uri):
                page = next(pages, None)
            if page is None:
                return
            # S3 returns keys in UTF-8 byte order, which is the order promised.
            for item in page.get("Contents", ()):
                key = str(item["Key"])[strip:]
                if key.endswith("/"):
                    continue  # a "folder" placeholder made by a console, not an object
                yield ObjectInfo(
                    bucket=bucket,
                    key=key,
                    size=int(item["Size"]),
                    etag=str(item["ETag"]).strip('"'),
                    last_modified=item["LastModified"].astimezone(UTC),
                    uri=self.uri(bucket, key),
                )

    def _delete(self, bucket: str, key: str) -> None:
        # S3 deletes a missing key without complaint; the lake reports it.
        self._stat(bucket, key)
        with self._errors("delete", self.uri(bucket, key)):
            self._client.delete_object(Bucket=self.root_bucket, Key=self._key(bucket, key))

    def _delete_keys(self, bucket: str, keys: Sequence[str]) -> Iterator[str]:
        for start in range(0, len(keys), DELETE_BATCH):
            batch = keys[start : start + DELETE_BATCH]
            with self._errors("delete", self.uri(bucket, batch[0])):
                response = self._client.delete_objects(
                    Bucket=self.root_bucket,
                    Delete={
                        "Objects": [{"Key": self._key(bucket, key)} for key in batch],
                        "Quiet": True,
                    },
                )
            # Quiet mode reports only the failures.
            errors = response.get("Errors", [])
            strip = len(self._key(bucket, ""))
            failed = {str(e["Key"])[strip:] for e in errors}
            yield from (key for key in batch if key not in failed)
            if errors:
                first = errors[0]
                raise StorageError(
                    f"could not delete {len(errors)} objects, the first "
                    f"{self.uri(bucket, str(first['Key'])[strip:])}: "
                    f"{first.get('Message') or first.get('Code')}"
                )

    def _buckets(self) -> list[str]:
        # Logical buckets are the first level of prefixes under the lake's own prefix.
        root = self.base_prefix
        found: list[str] = []
        paginator = self._client.get_paginator("list_objects_v2")
        with self._errors("list the buckets of", self.root):
            for page in paginator.paginate(Bucket=self.root_bucket, Prefix=root, Delimiter="/"):
                found += [
                    str(p["Prefix"])[len(root) :].rstrip("/")
                    for p in page.get("CommonPrefixes", ())
                ]
        return found

    def _ensure_bucket(self, bucket: str) -> None:
        # Logical buckets are prefixes and need nothing; the root bucket must exist.
        uri = self.uri(bucket)
        try:
            self._client.head_bucket(Bucket=self.root_bucket)
            return
        except (ClientError, BotoCoreError) as exc:
            if _code(exc) not in _NOT_FOUND | {"NoSuchBucket"}:
                raise self._translate(exc, "check the root bucket of", uri) from None
        options: dict[str, Any] = {"Bucket": self.root_bucket}
        if self.region != "us-east-1":  # the one region that refuses a LocationConstraint
            options["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
        try:
            self._client.create_bucket(**options)
        except (ClientError, BotoCoreError) as exc:
            # Another process creating it at the same moment is success too.
            if _code(exc) != "BucketAlreadyOwnedByYou":
                raise self._translate(exc, "create the root bucket of", uri) from None


def _code(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def _response_time(response: dict[str, Any]) -> datetime:
    """The server's time of a write, from the Date header of its response."""
    date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    if date:
        try:
            return parsedate_to_datetime(date).astimezone(UTC)
        except (TypeError, ValueError):
            pass
    return datetime.now(UTC)


_SHA256 = "sha256"
"""The user metadata key under which this backend keeps an object's SHA-256."""
_STANDARD = {
    "Content-Type": "ContentType",
    "Content-Encoding": "ContentEncoding",
    "Content-Language": "ContentLanguage",
    "Content-Disposition": "ContentDisposition",
    "Cache-Control": "CacheControl",
    "Expires": "Expires",
}
"""The headers S3 keeps beside an object, and boto3's names of them."""


def _header(value: object) -> str:
    """A header's value as S3 sent it (boto3 parses Expires into a datetime)."""
    if isinstance(value, datetime):
        return format_datetime(value.astimezone(UTC), usegmt=True)
    return str(value)


def _put_arguments(metadata: dict[str, str], uri: str) -> dict[str, str]:
    arguments = {}
    for header, value in metadata.items():
        if header in _STANDARD:
            arguments[_STANDARD[header]] = value
        elif not header.startswith("x-amz-meta-"):
            raise StorageError(f"could not write {uri}: {header} is not object metadata")
    return arguments


def _user_metadata(metadata: dict[str, str], uri: str) -> dict[str, str]:
    found = {
        k.removeprefix("x-amz-meta-"): v for k, v in metadata.items() if k.startswith("x-amz-meta-")
    }
    if _SHA256 in found:
        raise StorageError(
            f"could not write {uri}: x-amz-meta-{_SHA256} is kept by lakeward itself on the "
            "AWS S3 backend (the object's SHA-256)"
        )
    return found
