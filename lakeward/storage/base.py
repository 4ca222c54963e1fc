"""The storage interface of the lake, shared by the ``file://`` and ``s3://`` backends.

The lake is laid out like S3 whatever stores it: logical buckets holding
objects under ``/``-separated keys, at ``<lake root>/<bucket>/<key>``. The
public methods here validate names and publish events; backends implement the
underscore methods and never see an invalid key.
"""

from __future__ import annotations

import builtins
import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO, ClassVar

from lakeward.config import BUCKET_NAME
from lakeward.errors import InvalidKey, ObjectNotFound, PreconditionFailed, StorageError
from lakeward.storage.events import EventHub, Listener, created_event, removed_event
from lakeward.storage.model import ObjectInfo

CHUNK_SIZE = 1024 * 1024
DEFAULT_REGION = "us-east-1"  # what S3 clients assume when no region is set
MAX_KEY_BYTES = 1024  # S3's limit, enforced everywhere so a file:// lake can move to S3
TEMP_PREFIX = ".lakeward-tmp-"
"""Names starting with this are in-flight writes; no key segment may use it."""


def check_bucket(bucket: str) -> None:
    if not isinstance(bucket, str) or not BUCKET_NAME.match(bucket):
        raise InvalidKey(
            f"invalid bucket name {bucket!r}: use 3-63 lower-case letters, digits, '.' and '-'"
        )


def _path_problem(path: str) -> str | None:
    if path.startswith("/"):
        return "must not start with '/'"
    if len(path.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        return f"is longer than {MAX_KEY_BYTES} bytes"
    if any(ord(c) < 0x20 or c == "\x7f" for c in path):
        return "must not contain control characters"
    segments = path.split("/")
    # A prefix may end with '/', which leaves one empty last segment.
    if "" in segments[:-1]:
        return "must not contain an empty segment ('//')"
    if any(s in (".", "..") for s in segments):
        return "must not contain a '.' or '..' segment"
    if any(s.startswith(TEMP_PREFIX) for s in segments):
        return f"must not have a segment starting with {TEMP_PREFIX!r} (reserved for writes)"
    return None


def check_key(key: str) -> None:
    if not isinstance(key, str) or not key:
        raise InvalidKey("invalid object key: the key is empty")
    # Both backends refuse keys a file system cannot hold, so that objects
    # written to one lake can always be copied to the other.
    problem = _path_problem(key)
    if problem is None and key.endswith("/"):
        problem = "must not end with '/' (that names a prefix, not an object)"
    if problem:
        raise InvalidKey(f"invalid object key {key!r}: {problem}")


def check_prefix(prefix: str) -> None:
    if not isinstance(prefix, str):
        raise InvalidKey(f"invalid key prefix {prefix!r}: not a string")
    problem = _path_problem(prefix) if prefix else None
    if problem:
        raise InvalidKey(f"invalid key prefix {prefix!r}: {problem}")


class Digests:
    """MD5 (the S3 eTag) and SHA-256 of data, fed as it streams past."""

    def __init__(self) -> None:
        # Neither is used for security; the flag keeps MD5 usable on FIPS hosts.
        self._md5 = hashlib.md5(usedforsecurity=False)
        self._sha256 = hashlib.sha256()
        self.size = 0

    def update(self, chunk: bytes) -> None:
        self._md5.update(chunk)
        self._sha256.update(chunk)
        self.size += len(chunk)

    @property
    def md5(self) -> str:
        return self._md5.hexdigest()

    @property
    def md5_digest(self) -> bytes:
        return self._md5.digest()

    @property
    def sha256(self) -> str:
        return self._sha256.hexdigest()

    @property
    def sha256_digest(self) -> bytes:
        return self._sha256.digest()


def reason_of(exc: OSError) -> str:
    """The plain reason of an OS error, without errno numbers or paths."""
    return exc.strerror or str(exc) or type(exc).__name__


def iter_chunks(data: bytes | BinaryIO, uri: str) -> Iterator[bytes]:
    """The data to write, in chunks of at most ``CHUNK_SIZE`` bytes.

    A failure to read the caller's stream becomes a ``StorageError`` naming the
    object it was meant for.
    """
    if isinstance(data, str):
        raise TypeError(f"the data for {uri} must be bytes or a binary stream, not str")
    if isinstance(data, bytes | bytearray | memoryview):
        view = memoryview(data)
        for start in range(0, len(view), CHUNK_SIZE):
            yield bytes(view[start : start + CHUNK_SIZE])
        return
    while True:
        try:
            chunk = data.read(CHUNK_SIZE)
        except OSError as exc:
            raise StorageError(
                f"could not read the data to write to {uri}: {reason_of(exc)}"
            ) from None
        if not chunk:
            return
        if not isinstance(chunk, bytes | bytearray | memoryview):
            raise TypeError(f"the data for {uri} must be bytes or a binary stream, not text")
        yield bytes(chunk)


class Storage(ABC):
    """A lake root holding buckets of objects, with S3 semantics and S3 events.

    What differs between the backends, and matters to their users, is said by the
    attributes below, so that no other layer decides by the root's scheme.
    """

    keeps_versions: ClassVar[bool]
    """Whether older versions of an object may keep its data after it is overwritten or
    deleted (a versioned S3 bucket), out of this layer's reach."""
    etag_is_md5: ClassVar[bool]
    """Whether every object's eTag is the MD5 of its content (not on S3, where a multipart
    upload's is not)."""

    def __init__(self, root: str, region: str) -> None:
        self.root = root.rstrip("/")
        self.region = region
        self._events = EventHub()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"

    @property
    def local_dir(self) -> Path | None:
        """The directory that holds the lake on this machine, where Spark reads the files
        and a file watcher sees writes made around this layer; None for a lake elsewhere."""
        return None

    def uri(self, bucket: str, key: str = "") -> str:
        """The URI of an object, a prefix, or (with no key) a bucket."""
        check_bucket(bucket)
        check_prefix(key)
        return f"{self.root}/{bucket}/{key}" if key else f"{self.root}/{bucket}"

    def put(
        self,
        bucket: str,
        key: str,
        data: bytes | BinaryIO,
        metadata: Mapping[str, str] | None = None,
    ) -> ObjectInfo:
        """Write an object atomically: readers see the old content or the new, never a part.

        ``metadata``: what S3 keeps beside an object's bytes, by header name
        (``Content-Type``, ``Cache-Control``..., ``x-amz-meta-<name>``), written with them.
        """
        check_bucket(bucket)
        check_key(key)
        info = self._put(bucket, key, data, dict(metadata or {}))
        self._announce_created(info)
        return info

    def metadata(self, bucket: str, key: str) -> dict[str, str]:
        """The metadata the object was written with (``put``); {} for none."""
        check_bucket(bucket)
        check_key(key)
        return self._metadata(bucket, key)

    def put_if_match(self, bucket: str, key: str, data: bytes | BinaryIO, etag: str) -> ObjectInfo:
        """``put``, but only over an object whose eTag is still ``etag``.

        Raises ``PreconditionFailed`` otherwise, so that a rewrite never replaces
        data written since it was read. The check and the atomic write are two
        steps on backends without a native condition; the window is the write.
        """
        check_bucket(bucket)
        check_key(key)
        self._check_etag(bucket, key, etag)
        # A rewrite (an erasure's) keeps what the object was written with.
        info = self._put(bucket, key, data, self._metadata(bucket, key))
        self._announce_created(info)
        return info

    def delete_if_match(self, bucket: str, key: str, etag: str) -> None:
        """``delete``, but only an object whose eTag is still ``etag`` (``PreconditionFailed``)."""
        check_bucket(bucket)
        check_key(key)
        self._check_etag(bucket, key, etag)
        self._delete(bucket, key)
        self._announce_removed(bucket, key)

    def _check_etag(self, bucket: str, key: str, etag: str) -> None:
        try:
            current = self._stat(bucket, key).etag
        except ObjectNotFound:
            raise PreconditionFailed(f"{self.uri(bucket, key)} is gone since it was read") from None
        if current != etag:
            raise PreconditionFailed(
                f"{self.uri(bucket, key)} changed since it was read "
                f"(eTag {current}, expected {etag})"
            )

    def get(self, bucket: str, key: str) -> bytes:
        with self.open(bucket, key) as stream:
            return stream.read()

    def open(self, bucket: str, key: str) -> BinaryIO:
        """A read stream of an object; close it (or use ``with``)."""
        check_bucket(bucket)
        check_key(key)
        return self._open(bucket, key)

    def stat(self, bucket: str, key: str) -> ObjectInfo:
        check_bucket(bucket)
        check_key(key)
        return self._stat(bucket, key)

    def exists(self, bucket: str, key: str) -> bool:
        check_bucket(bucket)
        check_key(key)
        return self._exists(bucket, key)

    def list(self, bucket: str, prefix: str = "") -> Iterator[ObjectInfo]:
        """Every object under a prefix, at any depth, in key order (as S3 lists them).

        ``prefix`` is a plain string prefix, as in S3: ``"raw/x"`` also matches
        ``"raw/xy/1"``; end it with ``/`` to mean a directory.
        """
        check_bucket(bucket)
        check_prefix(prefix)
        return self._list(bucket, prefix)

    def delete(self, bucket: str, key: str) -> None:
        """Delete one object; raises ``ObjectNotFound`` if there is none.

        Unlike S3, deleting a missing object is an error: callers erasing data
        need to know whether anything was there.
        """
        check_bucket(bucket)
        check_key(key)
        self._delete(bucket, key)
        self._announce_removed(bucket, key)

    def delete_prefix(self, bucket: str, prefix: str) -> int:
        """Delete every object under a prefix (``""`` empties the bucket); returns how many."""
        check_bucket(bucket)
        check_prefix(prefix)
        # Listing first, then deleting, keeps the listing stable on both backends.
        keys = self._keys(bucket, prefix)
        count = 0
        for key in self._delete_keys(bucket, keys):
            self._announce_removed(bucket, key)
            count += 1
        return count

    def keys(self, bucket: str, prefix: str = "") -> builtins.list[str]:
        """The keys under a prefix, in key order: ``list`` without sizes and eTags.

        Cheap on every backend (``list`` on file:// reads each file for its eTag).
        """
        check_bucket(bucket)
        check_prefix(prefix)
        return self._keys(bucket, prefix)

    def children(self, bucket: str, prefix: str) -> builtins.list[str]:
        """The names directly under a prefix ending in ``/`` (S3's CommonPrefixes)."""
        return sorted({key[len(prefix) :].split("/", 1)[0] for key in self.keys(bucket, prefix)})

    def buckets(self) -> builtins.list[str]:
        """The lake's buckets, by name."""
        return sorted(b for b in self._buckets() if BUCKET_NAME.match(b))

    def ensure_bucket(self, bucket: str) -> None:
        """Make sure objects can be written to a bucket."""
        check_bucket(bucket)
        self._ensure_bucket(bucket)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` with an S3 notification after each put and delete.

        Listeners run in the writer's thread, after the change is done; their
        exceptions are logged, never raised to the writer. Returns the function
        that unsubscribes.
        """
        return self._events.subscribe(listener)

    def announce(self, bucket: str, prefix: str) -> int:
        """Emit ``ObjectCreated:Put`` for every object under a prefix; returns how many.

        For files written by something other than this layer (Spark writing a
        table), so that subscribers learn about them as if they had been put.
        """
        count = 0
        for info in self.list(bucket, prefix):
            self._announce_created(info)
            count += 1
        return count

    def _announce_created(self, info: ObjectInfo) -> None:
        if self._events.has_listeners:
            self._events.emit(created_event(info, self.region))

    def _announce_removed(self, bucket: str, key: str) -> None:
        if self._events.has_listeners:
            self._events.emit(removed_event(bucket, key, self.region))

    @abstractmethod
    def _put(
        self, bucket: str, key: str, data: bytes | BinaryIO, metadata: dict[str, str]
    ) -> ObjectInfo: ...

    @abstractmethod
    def _metadata(self, bucket: str, key: str) -> dict[str, str]: ...

    @abstractmethod
    def _open(self, bucket: str, key: str) -> BinaryIO: ...

    @abstractmethod
    def _stat(self, bucket: str, key: str) -> ObjectInfo: ...

    @abstractmethod
    def _exists(self, bucket: str, key: str) -> bool: ...

    @abstractmethod
    def _list(self, bucket: str, prefix: str) -> Iterator[ObjectInfo]: ...

    def _keys(self, bucket: str, prefix: str) -> builtins.list[str]:
        return [info.key for info in self._list(bucket, prefix)]

    @abstractmethod
    def _delete(self, bucket: str, key: str) -> None: ...

    @abstractmethod
    def _delete_keys(self, bucket: str, keys: Sequence[str]) -> Iterator[str]:
        """Delete listed keys, yielding each as it is deleted (so its event is not lost
        if a later one fails); keys already gone are skipped."""

    @abstractmethod
    def _ensure_bucket(self, bucket: str) -> None: ...

    @abstractmethod
    def _buckets(self) -> builtins.list[str]: ...
