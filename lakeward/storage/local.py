"""The ``file://`` lake: one directory per bucket, one file per object.

Writes go to a hidden temporary file in the object's own directory, are
fsynced, and then renamed over the object, so a reader (or a crash) sees the
old content or the new, never part of it. Temporary files are never listed.

An object's eTag is the MD5 of its content. Hashing every file on every
``stat`` and ``list`` would read the whole lake each time, so the MD5 is kept
per path with the file's (device, inode, size, mtime_ns) and reused while
those are unchanged. Why that is safe:

* lakeward's own writes rename a new file over the object and record the MD5
  of what they wrote, so they always replace the cached value (and deletes
  drop it, so that a reused inode number cannot match);
* another program's write changes the mtime, unless it keeps the size and
  lands within the same timestamp tick as the write that the MD5 was taken
  after (file systems stamp with a coarse clock: a few ms on ext4, 2 s on
  FAT). So a hash computed by reading is only kept when the file's mtime was
  at least ``_SETTLED_NS`` old when the read began; a later write then gets a
  later mtime. A fresher file is hashed again on every look until it settles.
  The one case left: another program rewriting an object in place, keeping
  its size, within one tick of lakeward writing it -- two writers racing on
  one object, whose winner no reader could tell either.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, NoReturn
from urllib.parse import urlsplit
from urllib.request import url2pathname

from lakeward.errors import ConfigError, ObjectNotFound, StorageError
from lakeward.storage.base import (
    CHUNK_SIZE,
    TEMP_PREFIX,
    Digests,
    Storage,
    iter_chunks,
    reason_of,
)
from lakeward.storage.model import ObjectInfo

# A concurrent delete may prune the directory between our mkdir and our
# creating the temporary file in it; a retry or two recreates it.
_CREATE_ATTEMPTS = 3

_SETTLED_NS = 2_000_000_000
"""Age of a file's mtime beyond which a hash read from it is cached (see the module docstring)."""
_CACHED_ETAGS = 200_000
"""Paths whose MD5 is cached (about 200 bytes each); the oldest entries go first."""

_FileState = tuple[int, int, int, int]

_METADATA_ATTRIBUTE = "user.lakeward.metadata"
"""The extended attribute holding an object's metadata (JSON): it stays with the file's
inode, so a file another program writes over an object has none, as it should."""


def _set_metadata(fd: int, uri: str, metadata: dict[str, str]) -> None:
    try:
        os.setxattr(fd, _METADATA_ATTRIBUTE, json.dumps(metadata).encode())
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            raise StorageError(
                f"could not write {uri} with its metadata ({', '.join(sorted(metadata))}): the "
                "lake's file system keeps no extended attributes (user.*), where the file:// "
                "lake keeps an object's metadata"
            ) from None
        raise


def _state(status: os.stat_result) -> _FileState:
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


def path_of_uri(uri: str) -> Path:
    """The local directory of a ``file://`` lake root."""
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        raise ConfigError(f"lake.root: {uri!r} is not a local file:// URI")
    path = Path(url2pathname(parts.path))
    if not path.is_absolute():
        raise ConfigError(f"lake.root: {uri!r} must name an absolute path (file:///...)")
    return path


class LocalStorage(Storage):
    keeps_versions = False  # a write replaces the file, a delete removes it
    etag_is_md5 = True

    def __init__(self, root: str, region: str) -> None:
        super().__init__(root, region)
        self.base = path_of_uri(self.root)
        self._etags: dict[str, tuple[_FileState, str]] = {}
        self._etags_lock = threading.Lock()

    @property
    def local_dir(self) -> Path:
        return self.base

    def _cached_etag(self, path: Path, state: _FileState) -> str | None:
        with self._etags_lock:
            cached = self._etags.get(str(path))
        return cached[1] if cached is not None and cached[0] == state else None

    def _cache_etag(self, path: Path, state: _FileState, etag: str) -> None:
        with self._etags_lock:
            self._etags.pop(str(path), None)  # re-inserted last: the newest is dropped last
            self._etags[str(path)] = (state, etag)
            if len(self._etags) > _CACHED_ETAGS:
                del self._etags[next(iter(self._etags))]

    def _path(self, bucket: str, key: str) -> Path:
        return self.base / bucket / key

    def _put(
        self, bucket: str, key: str, data: bytes | BinaryIO, metadata: dict[str, str]
    ) -> ObjectInfo:
        uri = self.uri(bucket, key)
        target = self._path(bucket, key)
        fd, temp = self._create_temp(bucket, key, target)
        digests = Digests()
        try:
            with os.fdopen(fd, "wb") as out:
                if metadata:  # on the file itself, so the rename publishes both at once
                    _set_metadata(out.fileno(), uri, metadata)
                for chunk in iter_chunks(data, uri):
                    digests.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
                status = os.fstat(out.fileno())
            os.replace(temp, target)
            # The renamed file is this one (same inode): its MD5 is the one just computed.
            self._cache_etag(target, _state(status), digests.md5)
        except BaseException as exc:
            temp.unlink(missing_ok=True)
            self._prune(bucket, target.parent)
            if isinstance(exc, IsADirectoryError):
                raise StorageError(
                    f"could not write {uri}: there are objects under {key}/, "
                    "so it cannot also be an object"
                ) from None
            if isinstance(exc, OSError):
                raise StorageError(f"could not write {uri}: {reason_of(exc)}") from None
            raise
        _sync_directory(target.parent)
        return ObjectInfo(
            bucket=bucket,
            key=key,
            size=digests.size,
            etag=digests.md5,
            last_modified=datetime.fromtimestamp(status.st_mtime, UTC),
            uri=uri,
            sha256=digests.sha256,
        )

    def _create_temp(self, bucket: str, key: str, target: Path) -> tuple[int, Path]:
        """Create the temporary file of a write, with the directories it needs."""
        uri = self.uri(bucket, key)
        for attempt in range(_CREATE_ATTEMPTS):
            temp = target.parent / f"{TEMP_PREFIX}{secrets.token_hex(8)}"
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                # os.open rather than mkstemp: mkstemp's 0600 would hide objects
                # from other users of a shared lake; this honours the umask.
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
                return os.open(temp, flags, 0o666), temp
            except (FileExistsError, NotADirectoryError):
                if target.parent.is_dir():
                    continue  # a clash of random names: pick another
                blocker = self._object_in_path(bucket, key)
                raise StorageError(
                    f"could not write {uri}: {blocker} is an object, so it cannot also be a prefix"
                ) from None
            except FileNotFoundError:
                if attempt + 1 == _CREATE_ATTEMPTS:
                    raise StorageError(
                        f"could not write {uri}: its directory keeps vanishing"
                    ) from None
            except OSError as exc:
                raise StorageError(f"could not write {uri}: {reason_of(exc)}") from None
        raise StorageError(f"could not write {uri}: no free temporary file name")

    def _object_in_path(self, bucket: str, key: str) -> str:
        """The first leading part of a key that is an object (a file), for messages."""
        parts = key.split("/")
        for end in range(1, len(parts)):
            partial = "/".join(parts[:end])
            if self._path(bucket, partial).is_file():
                return partial
        return "a leading part of the key"

    def _open(self, bucket: str, key: str) -> BinaryIO:
        try:
            return open(self._path(bucket, key), "rb")  # noqa: SIM115 - the caller closes it
        except OSError as exc:
            self._raise_read_error(bucket, key, exc)

    def _metadata(self, bucket: str, key: str) -> dict[str, str]:
        try:
            raw = os.getxattr(self._path(bucket, key), _METADATA_ATTRIBUTE)
        except OSError as exc:
            if exc.errno in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
                return {}  # written without metadata, or by another program
            self._raise_read_error(bucket, key, exc)
        found = json.loads(raw)
        return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}

    def _raise_read_error(self, bucket: str, key: str, exc: OSError) -> NoReturn:
        uri = self.uri(bucket, key)
        # A directory is a prefix, and a file in the middle of the path means
        # the longer key cannot exist: both are "no such object" in S3 terms.
        if isinstance(exc, FileNotFoundError | IsADirectoryError | NotADirectoryError):
            raise ObjectNotFound(f"no object at {uri}") from None
        raise StorageError(f"could not read {uri}: {reason_of(exc)}") from None

    def _stat(self, bucket: str, key: str) -> ObjectInfo:
        try:
            return self._info(bucket, key)
        except OSError as exc:
            self._raise_read_error(bucket, key, exc)

    def _info(self, bucket: str, key: str) -> ObjectInfo:
        path = self._path(bucket, key)
        with open(path, "rb") as stream:
            # fstat of the open file, so size and content are of the same file
            # even if a put replaces it meanwhile.
            status = os.fstat(stream.fileno())
            state = _state(status)
            etag = self._cached_etag(path, state)
            if etag is None:
                settled = time.time_ns() - status.st_mtime_ns >= _SETTLED_NS
                md5 = hashlib.md5(usedforsecurity=False)
                while chunk := stream.read(CHUNK_SIZE):
                    md5.update(chunk)
                etag = md5.hexdigest()
                if settled:
                    self._cache_etag(path, state, etag)
        return ObjectInfo(
            bucket=bucket,
            key=key,
            size=status.st_size,
            etag=etag,
            last_modified=datetime.fromtimestamp(status.st_mtime, UTC),
            uri=self.uri(bucket, key),
        )

    def _exists(self, bucket: str, key: str) -> bool:
        return self._path(bucket, key).is_file()

    def _list(self, bucket: str, prefix: str) -> Iterator[ObjectInfo]:
        for key in self._keys(bucket, prefix):
            try:
                yield self._info(bucket, key)
            except FileNotFoundError:
                continue  # deleted since the walk, as it may vanish from an S3 listing
            except OSError as exc:
                self._raise_read_error(bucket, key, exc)

    def _keys(self, bucket: str, prefix: str) -> list[str]:
        bucket_dir = self.base / bucket
        # Walk only the deepest directory the prefix is sure to be inside.
        start = bucket_dir / prefix.rpartition("/")[0]

        def walk_error(exc: OSError) -> None:
            if not isinstance(exc, FileNotFoundError | NotADirectoryError):
                uri = self.uri(bucket, prefix)
                raise StorageError(f"could not list {uri}: {reason_of(exc)}") from None

        keys: list[str] = []
        for directory, subdirs, files in os.walk(start, onerror=walk_error):
            relative = Path(directory).relative_to(bucket_dir).as_posix()
            head = "" if relative == "." else relative + "/"
            subdirs[:] = [
                d
                for d in subdirs
                if (head + d + "/").startswith(prefix) or prefix.startswith(head + d + "/")
            ]
            keys.extend(
                head + name
                for name in files
                if not name.startswith(TEMP_PREFIX) and (head + name).startswith(prefix)
            )
        # Sorting the whole list, not per directory, gives S3's order:
        # "a-b" (0x2D) comes before "a/b" (0x2F).
        keys.sort()
        return keys

    def _delete(self, bucket: str, key: str) -> None:
        path = self._path(bucket, key)
        if not path.is_file():
            raise ObjectNotFound(f"no object at {self.uri(bucket, key)}")
        with self._etags_lock:
            self._etags.pop(str(path), None)
        try:
            path.unlink()
        except FileNotFoundError:
            raise ObjectNotFound(f"no object at {self.uri(bucket, key)}") from None
        except OSError as exc:
            raise StorageError(
                f"could not delete {self.uri(bucket, key)}: {reason_of(exc)}"
            ) from None
        self._prune(bucket, path.parent)

    def _delete_keys(self, bucket: str, keys: Sequence[str]) -> Iterator[str]:
        for key in keys:
            try:
                self._delete(bucket, key)
            except ObjectNotFound:
                continue  # someone else deleted it first: not ours to report
            yield key

    def _buckets(self) -> list[str]:
        try:
            return [entry.name for entry in os.scandir(self.base) if entry.is_dir()]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StorageError(
                f"could not list the buckets of {self.root}: {reason_of(exc)}"
            ) from None

    def _ensure_bucket(self, bucket: str) -> None:
        try:
            (self.base / bucket).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(
                f"could not create the bucket {self.uri(bucket)}: {reason_of(exc)}"
            ) from None

    def _prune(self, bucket: str, directory: Path) -> None:
        """Remove empty directories from ``directory`` up to, not including, the bucket."""
        bucket_dir = self.base / bucket
        while directory != bucket_dir and bucket_dir in directory.parents:
            try:
                directory.rmdir()
            except OSError:
                return  # not empty (or already gone): S3 has no directories to keep tidy
            directory = directory.parent


def _sync_directory(directory: Path) -> None:
    # The rename is only durable once the directory entry is on disk.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot fsync a directory; the write itself is done
    finally:
        os.close(fd)
