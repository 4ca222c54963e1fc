"""Multipart uploads: an object sent in parts, visible only once it is completed.

Parts wait in the server's own state folder (``<data dir>/s3/uploads/<upload id>/``),
never in the lake, so that nothing of an upload that is never completed can be seen
or indexed. Completing one writes the parts, in the order the client names them, as
one object through ``Storage.put``: atomic, like any other write. Aborting (or
completing) removes the folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, cast

from lakeward.errors import LakewardError
from lakeward.storage.base import CHUNK_SIZE, Storage
from lakeward.storage.model import ObjectInfo

MIN_PART_SIZE = 5 * 1024 * 1024  # S3's: every part but the last
MAX_PART_NUMBER = 10_000


class UploadError(LakewardError):
    """A multipart request S3 would refuse; ``code`` is S3's name for it."""

    http_status = 400

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.http_status = status


@dataclass(frozen=True)
class Upload:
    upload_id: str
    bucket: str
    key: str
    initiated: datetime
    metadata: dict[str, str] = field(default_factory=dict)  # the object's, when completed


@dataclass(frozen=True)
class Part:
    number: int
    etag: str
    size: int
    last_modified: datetime


class MultipartUploads:
    def __init__(self, storage: Storage, folder: Path) -> None:
        self.storage = storage
        self.folder = folder

    def create(self, bucket: str, key: str, metadata: dict[str, str] | None = None) -> Upload:
        upload = Upload(
            secrets.token_urlsafe(24), bucket, key, datetime.now(UTC), dict(metadata or {})
        )
        place = self.folder / upload.upload_id
        place.mkdir(parents=True)
        record = {
            "bucket": bucket,
            "key": key,
            "initiated": upload.initiated.isoformat(),
            "metadata": upload.metadata,
        }
        (place / "upload.json").write_text(json.dumps(record))
        return upload

    def get(self, upload_id: str, bucket: str, key: str) -> Upload:
        """The upload, which must be of this bucket and key."""
        record = None
        if upload_id and "/" not in upload_id and not upload_id.startswith("."):
            try:
                record = json.loads((self.folder / upload_id / "upload.json").read_text())
            except (OSError, ValueError):
                record = None
        if record is None or (record["bucket"], record["key"]) != (bucket, key):
            raise UploadError(
                "NoSuchUpload",
                "The specified upload does not exist. The upload ID may be invalid, or the "
                "upload may have been aborted or completed.",
                404,
            )
        initiated = datetime.fromisoformat(record["initiated"])
        return Upload(upload_id, bucket, key, initiated, dict(record.get("metadata", {})))

    def put_part(self, upload: Upload, number: int, data: BinaryIO) -> Part:
        if not 1 <= number <= MAX_PART_NUMBER:
            raise UploadError(
                "InvalidArgument",
                f"Part number must be an integer between 1 and {MAX_PART_NUMBER}, inclusive",
            )
        place = self.folder / upload.upload_id
        md5 = hashlib.md5(usedforsecurity=False)
        size = 0
        fd, temp = tempfile.mkstemp(dir=place, prefix=".part-")
        try:
            with os.fdopen(fd, "wb") as out:
                while chunk := data.read(CHUNK_SIZE):
                    md5.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, place / f"{number:05d}.{md5.hexdigest()}")
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        # An earlier upload of the same part number is replaced, as in S3.
        for older in place.glob(f"{number:05d}.*"):
            if older.name != f"{number:05d}.{md5.hexdigest()}":
                older.unlink(missing_ok=True)
        return Part(number, md5.hexdigest(), size, datetime.now(UTC))

    def parts(self, upload: Upload) -> list[Part]:
        found = []
        for path in sorted((self.folder / upload.upload_id).glob("[0-9]*.*")):
            number, _, etag = path.name.partition(".")
            status = path.stat()
            modified = datetime.fromtimestamp(status.st_mtime, UTC)
            found.append(Part(int(number), etag, status.st_size, modified))
        return found

    def complete(self, upload: Upload, chosen: Sequence[tuple[int, str]]) -> ObjectInfo:
        """Write the chosen parts, (number, ETag) in ascending order, as the object."""
        if not chosen:
            raise UploadError(
                "MalformedXML", "You must specify at least one part to complete an upload."
            )
        numbers = [n for n, _ in chosen]
        if numbers != sorted(set(numbers)):
            raise UploadError(
                "InvalidPartOrder",
                "The list of parts was not in ascending order. Parts must be ordered by part "
                "number.",
            )
        have = {p.number: p for p in self.parts(upload)}
        paths = []
        for position, (number, etag) in enumerate(chosen):
            part = have.get(number)
            if part is None or part.etag != etag.strip('"'):
                raise UploadError(
                    "InvalidPart",
                    f"One or more of the specified parts could not be found: part {number} "
                    "was not uploaded, or its ETag is not the one given.",
                )
            if part.size < MIN_PART_SIZE and position < len(chosen) - 1:
                raise UploadError(
                    "EntityTooSmall",
                    f"Your proposed upload is smaller than the minimum allowed size: part "
                    f"{number} has {part.size} bytes; every part but the last needs "
                    f"{MIN_PART_SIZE}.",
                )
            paths.append(self.folder / upload.upload_id / f"{number:05d}.{part.etag}")
        with _Joined(paths) as joined:
            info = self.storage.put(
                upload.bucket, upload.key, cast(BinaryIO, joined), upload.metadata
            )
        self.abort(upload)
        return info

    def abort(self, upload: Upload) -> None:
        shutil.rmtree(self.folder / upload.upload_id, ignore_errors=True)


class _Joined:
    """The parts' files read one after another as one stream."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self._paths = list(paths)
        self._current: BinaryIO | None = None

    def __enter__(self) -> _Joined:
        return self

    def __exit__(self, *_: object) -> None:
        if self._current is not None:
            self._current.close()

    def read(self, size: int = -1) -> bytes:
        while True:
            if self._current is None:
                if not self._paths:
                    return b""
                self._current = open(self._paths.pop(0), "rb")  # noqa: SIM115
            data = self._current.read(size if size and size > 0 else CHUNK_SIZE)
            if data:
                return data
            self._current.close()
            self._current = None
