"""The S3 operations lakeward answers, each authorized with S3's action before it acts.

Buckets: ListBuckets, HeadBucket, GetBucketLocation. Listing: ListObjectsV2 and
ListObjects. Objects: HeadObject, GetObject (one range, conditional headers),
PutObject, CopyObject, DeleteObject, DeleteObjects, each keeping or answering the
object's metadata (``metadata.py``). Multipart: create, upload part, list parts,
complete, abort. Anything else is refused with ``NotImplemented`` naming it.
"""

from __future__ import annotations

import base64
import contextlib
import io
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from email.utils import format_datetime
from pathlib import Path
from typing import BinaryIO, cast
from urllib.parse import quote, unquote

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse

from lakeward.access.arns import s3_arn
from lakeward.access.control import AccessControl
from lakeward.config import Settings
from lakeward.errors import InvalidRequest, ObjectNotFound
from lakeward.http.s3 import metadata
from lakeward.http.s3.conditions import conditional, etag_header
from lakeward.http.s3.payload import decode
from lakeward.http.s3.xml import Field, S3Error, document, no_such_bucket, parse, s3_code
from lakeward.http.sigv4 import Signed
from lakeward.storage import ObjectInfo, Storage
from lakeward.storage.base import CHUNK_SIZE, check_key
from lakeward.storage.multipart import MultipartUploads

EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e"
MAX_PUT_BYTES = 5 * 1024**3  # S3's largest single PUT
MAX_XML_BYTES = 2 * 1024 * 1024
MAX_KEYS = 1000
_SPOOL_IN_MEMORY = 8 * 1024 * 1024
_SEND = 8 * 1024 * 1024  # bytes per write of a GET's body: fewer, larger writes go faster


@dataclass
class Call:
    request: Request
    method: str
    bucket: str
    key: str
    params: dict[str, str]
    headers: dict[str, str]  # lower-case names
    signed: Signed


def _http_date(when: datetime) -> str:
    return format_datetime(when, usegmt=True)


class Operations:
    def __init__(self, settings: Settings, access: AccessControl, storage: Storage) -> None:
        self.access = access
        self.storage = storage
        self.region = settings.api.region
        self.uploads = MultipartUploads(storage, Path(settings.data_dir) / "s3" / "uploads")
        self.spool = Path(settings.data_dir) / "s3" / "incoming"

    async def dispatch(self, call: Call) -> Response:
        if not call.bucket:
            if call.method == "GET":
                return await run_in_threadpool(self.list_buckets)
            raise _not_implemented(f"{call.method} on the service")
        await run_in_threadpool(self._check_bucket, call.bucket)
        if not call.key:
            return await self._bucket_call(call)
        return await self._object_call(call)

    # -- buckets and listing --------------------------------------------------------------

    def list_buckets(self) -> Response:
        self.access.authorize("s3:ListAllMyBuckets", s3_arn("*"))
        buckets: list[Field] = [
            ("Bucket", [("Name", name), ("CreationDate", self._created(name))])
            for name in self.storage.buckets()
        ]
        owner: list[Field] = [("ID", "lakeward"), ("DisplayName", "lakeward")]
        return _xml(document("ListAllMyBucketsResult", [("Owner", owner), ("Buckets", buckets)]))

    def _created(self, bucket: str) -> datetime | None:
        local = self.storage.local_dir
        if local is None:
            return datetime.fromtimestamp(0).astimezone()
        return datetime.fromtimestamp((local / bucket).stat().st_mtime).astimezone()

    async def _authorize(self, action: str, resource: str) -> None:
        """``access.authorize`` off the event loop: its audit record is a committed write."""
        await run_in_threadpool(self.access.authorize, action, resource)

    def _check_bucket(self, bucket: str) -> None:
        if bucket not in self.storage.buckets():
            raise no_such_bucket(bucket)

    async def _bucket_call(self, call: Call) -> Response:
        params, method = call.params, call.method
        if method == "HEAD":
            await self._authorize("s3:ListBucket", s3_arn(call.bucket))
            return Response(headers={"x-amz-bucket-region": self.region})
        if method == "GET" and "location" in params:
            await self._authorize("s3:GetBucketLocation", s3_arn(call.bucket))
            # us-east-1 is told by an empty constraint, as S3 answers for it.
            region = "" if self.region == "us-east-1" else self.region
            return _xml(document("LocationConstraint", [], text=region))
        if method == "GET" and not (set(params) - _LIST_PARAMETERS):
            return await run_in_threadpool(self.list_objects, call)
        if method == "POST" and "delete" in params:
            body = await _small_body(call)
            return await run_in_threadpool(self.delete_objects, call, body)
        sub = ", ".join(sorted(set(params) - _LIST_PARAMETERS)) or "the bucket"
        raise _not_implemented(f"{method} on {sub}")

    def list_objects(self, call: Call) -> Response:
        params = call.params
        v2 = params.get("list-type") == "2"
        prefix = params.get("prefix", "")
        delimiter = params.get("delimiter", "")
        url = params.get("encoding-type") == "url"
        try:
            max_keys = min(int(params.get("max-keys", MAX_KEYS)), MAX_KEYS)
        except ValueError:
            raise S3Error("InvalidArgument", "max-keys must be an integer") from None
        if max_keys < 0:
            raise S3Error("InvalidArgument", "max-keys must not be negative")
        context = {"s3:prefix": prefix, "s3:delimiter": delimiter, "s3:max-keys": max_keys}
        self.access.authorize("s3:ListBucket", s3_arn(call.bucket), context=context)
        if v2:
            token = params.get("continuation-token")
            after = _token_key(token) if token else params.get("start-after", "")
        else:
            after = params.get("marker", "")
        contents, prefixes, last = self._page(call.bucket, prefix, delimiter, after, max_keys)
        truncated = last is not None

        def name(text: str) -> str:
            return quote(text, safe="/~") if url else text

        fields: list[Field] = [
            ("Name", call.bucket),
            ("Prefix", name(prefix)),
            *([("Delimiter", name(delimiter))] if delimiter else []),
            ("MaxKeys", max_keys),
            *([("EncodingType", "url")] if url else []),
            ("IsTruncated", truncated),
        ]
        if v2:
            fields.append(("KeyCount", len(contents) + len(prefixes)))
            if "continuation-token" in params:
                fields.append(("ContinuationToken", params["continuation-token"]))
            if "start-after" in params:
                fields.append(("StartAfter", name(params["start-after"])))
            if last is not None:
                fields.append(("NextContinuationToken", _token(last)))
        else:
            fields.append(("Marker", name(after)))
            if last is not None:
                fields.append(("NextMarker", name(last)))
        for info in contents:
            fields.append(
                (
                    "Contents",
                    [
                        ("Key", name(info.key)),
                        ("LastModified", info.last_modified),
                        ("ETag", etag_header(info.etag)),
                        ("Size", info.size),
                        ("StorageClass", "STANDARD"),
                    ],
                )
            )
        fields += [("CommonPrefixes", [("Prefix", name(p))]) for p in prefixes]
        root = "ListBucketResult"
        return _xml(document(root, fields))

    def _page(
        self, bucket: str, prefix: str, delimiter: str, after: str, max_keys: int
    ) -> tuple[list[ObjectInfo], list[str], str | None]:
        """One page: objects, common prefixes, and the last name given if there is more."""
        contents: list[ObjectInfo] = []
        prefixes: list[str] = []
        last: str | None = None
        listed = prefix if "/" not in prefix else prefix[: prefix.rindex("/") + 1]
        for key in self.storage.keys(bucket, listed):
            if not key.startswith(prefix) or key <= after:
                continue
            if delimiter and after.endswith(delimiter) and key.startswith(after):
                continue  # inside a common prefix an earlier page gave
            common = None
            if delimiter:
                cut = key.find(delimiter, len(prefix))
                if cut >= 0:
                    common = key[: cut + len(delimiter)]
            if common is not None and prefixes and prefixes[-1] == common:
                continue
            if len(contents) + len(prefixes) == max_keys:
                return contents, prefixes, last
            if common is not None:
                prefixes.append(common)
                last = common
                continue
            try:
                contents.append(self.storage.stat(bucket, key))
            except ObjectNotFound:
                continue  # deleted since it was listed
            last = key
        return contents, prefixes, None

    def delete_objects(self, call: Call, body: bytes) -> Response:
        root = parse(body, "Delete")
        quiet = (root.findtext("Quiet") or "").strip().lower() == "true"
        keys = [(o.findtext("Key") or "") for o in root.findall("Object")]
        if len(keys) > MAX_KEYS:
            raise S3Error("MalformedXML", f"DeleteObjects takes at most {MAX_KEYS} keys")
        fields: list[Field] = []
        for key in keys:
            try:
                self.access.authorize("s3:DeleteObject", s3_arn(call.bucket, key))
                self._delete(call.bucket, key)
                if not quiet:
                    fields.append(("Deleted", [("Key", key)]))
            except Exception as exc:  # reported per key, as S3 does
                _, code, message = s3_code(exc)
                fields.append(("Error", [("Key", key), ("Code", code), ("Message", message)]))
        return _xml(document("DeleteResult", fields))

    def _delete(self, bucket: str, key: str) -> None:
        if key.endswith("/"):
            return  # a "folder" marker, which the lake never stores (put_object)
        with contextlib.suppress(ObjectNotFound):  # S3 deletes a missing key quietly
            self.storage.delete(bucket, key)

    # -- objects --------------------------------------------------------------------------

    async def _object_call(self, call: Call) -> Response:
        method, params = call.method, call.params
        if method == "GET" and "uploadId" in params:
            return await run_in_threadpool(self.list_parts, call)
        if method in ("GET", "HEAD"):
            extra = set(params) - _GET_PARAMETERS
            if extra:
                raise _not_implemented(f"{method} on {', '.join(sorted(extra))}")
            return await run_in_threadpool(self.get_object, call)
        if method == "PUT" and "uploadId" in params:
            if "x-amz-copy-source" in call.headers:
                raise _not_implemented("UploadPartCopy")
            return await self._with_body(call, self.upload_part)
        if method == "PUT" and not params:
            if "x-amz-copy-source" in call.headers:
                return await run_in_threadpool(self.copy_object, call)
            return await self._with_body(call, self.put_object)
        if method == "DELETE" and "uploadId" in params:
            return await run_in_threadpool(self.abort_upload, call)
        if method == "DELETE" and not params:
            await self._authorize("s3:DeleteObject", s3_arn(call.bucket, call.key))
            await run_in_threadpool(self._delete, call.bucket, call.key)
            return Response(status_code=204)
        if method == "POST" and "uploads" in params:
            return await run_in_threadpool(self.create_upload, call)
        if method == "POST" and "uploadId" in params:
            body = await _small_body(call)
            return await run_in_threadpool(self.complete_upload, call, body)
        raise _not_implemented(f"{method} on an object with {', '.join(sorted(params))}")

    def get_object(self, call: Call) -> Response:
        self.access.authorize("s3:GetObject", s3_arn(call.bucket, call.key))
        stream, info = self._open(call.bucket, call.key)
        try:
            status, start, length = conditional(call.headers, info)
        except BaseException:
            stream.close()
            raise
        try:
            stored = self.storage.metadata(call.bucket, call.key)
        except BaseException:
            stream.close()
            raise
        headers = {
            "ETag": etag_header(info.etag),
            "Last-Modified": _http_date(info.last_modified),
            "Accept-Ranges": "bytes",
            **metadata.response_headers(stored, call.params),
            "Content-Length": str(length),
        }
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{start + length - 1}/{info.size}"
        if call.method == "HEAD" or status == 304:
            stream.close()
            if status == 304:
                headers.pop("Content-Length")
            return Response(status_code=status, headers=headers)
        return StreamingResponse(_read(stream, start, length), status_code=status, headers=headers)

    def _open(self, bucket: str, key: str) -> tuple[BinaryIO, ObjectInfo]:
        """The object's stream and its description, of the same version of the object."""
        if key.endswith("/"):  # a "folder" marker: never stored (put_object)
            raise ObjectNotFound(f"no object at {key}")
        for _ in range(3):
            stream = self.storage.open(bucket, key)
            info = self.storage.stat(bucket, key)
            try:
                size = os.fstat(stream.fileno()).st_size
            except (OSError, AttributeError, ValueError):
                return stream, info  # not a file here: the backend's stream is one version
            if size == info.size:
                return stream, info
            stream.close()  # replaced between open and stat: try again
        raise S3Error("SlowDown", "The object keeps changing; try again", 503)

    async def _with_body(self, call: Call, then: Callable[[Call, BinaryIO], Response]) -> Response:
        await self._authorize("s3:PutObject", s3_arn(call.bucket, call.key))
        length = call.headers.get("content-length")
        if length is None and call.headers.get("transfer-encoding") != "chunked":
            raise S3Error(
                "MissingContentLength", "You must provide the Content-Length HTTP header.", 411
            )
        if length is not None and length.isdigit() and int(length) > MAX_PUT_BYTES + 1024**2:
            raise S3Error("EntityTooLarge", "Your proposed upload exceeds the maximum allowed size")
        self.spool.mkdir(parents=True, exist_ok=True)
        raw = tempfile.SpooledTemporaryFile(_SPOOL_IN_MEMORY, dir=str(self.spool))  # noqa: SIM115
        out = tempfile.SpooledTemporaryFile(_SPOOL_IN_MEMORY, dir=str(self.spool))  # noqa: SIM115
        try:
            received = 0
            try:
                async for chunk in call.request.stream():
                    received += len(chunk)
                    if received > MAX_PUT_BYTES + 1024**2:
                        raise S3Error(
                            "EntityTooLarge",
                            "Your proposed upload exceeds the maximum allowed size",
                        )
                    raw.write(chunk)
            except ClientDisconnect:
                raise S3Error(
                    "IncompleteBody", "The request body ended before Content-Length bytes"
                ) from None
            if length is not None and length.isdigit() and received != int(length):
                raise S3Error(
                    "IncompleteBody",
                    "You did not provide the number of bytes specified by the Content-Length "
                    "HTTP header",
                )
            raw.seek(0)
            decoded = await run_in_threadpool(
                decode, cast(BinaryIO, raw), cast(BinaryIO, out), call.headers, call.signed
            )
            response: Response = await run_in_threadpool(then, call, decoded.file)
            return response
        finally:
            raw.close()
            out.close()

    def put_object(self, call: Call, data: BinaryIO) -> Response:
        if call.key.endswith("/") and not data.read(1):
            # A "folder" marker (pyarrow, consoles): the lake's folders exist through their
            # objects, as on S3 without markers, so there is nothing to store.
            return Response(headers={"ETag": etag_header(EMPTY_MD5)})
        given = metadata.from_request(call.headers)
        info = self.storage.put(call.bucket, call.key, data, given)
        return Response(headers=_checksums(call.headers, {"ETag": etag_header(info.etag)}))

    def copy_object(self, call: Call) -> Response:
        source = unquote(call.headers["x-amz-copy-source"]).split("?", 1)[0].lstrip("/")
        bucket, _, key = source.partition("/")
        if not bucket or not key:
            raise S3Error("InvalidArgument", "x-amz-copy-source must be <bucket>/<key>")
        self._check_bucket(bucket)
        self.access.authorize("s3:GetObject", s3_arn(bucket, key))
        self.access.authorize("s3:PutObject", s3_arn(call.bucket, call.key))
        directive = call.headers.get("x-amz-metadata-directive", "COPY").upper()
        if directive not in ("COPY", "REPLACE"):
            raise S3Error("InvalidArgument", "x-amz-metadata-directive is COPY or REPLACE")
        if directive == "COPY" and (bucket, key) == (call.bucket, call.key):
            raise S3Error(
                "InvalidRequest",
                "This copy request is illegal because it is trying to copy an object to itself "
                "without changing the object's metadata, storage class, website redirect "
                "location or encryption attributes.",
            )
        stream, source_info = self._open(bucket, key)
        with stream:
            _, _, _ = conditional(
                {
                    k.removeprefix("x-amz-copy-source-"): v
                    for k, v in call.headers.items()
                    if k.startswith("x-amz-copy-source-if-")
                },
                source_info,
            )
            if directive == "COPY":
                given = self.storage.metadata(bucket, key)
            else:
                given = metadata.from_request(call.headers)
            info = self.storage.put(call.bucket, call.key, stream, given)
        result = document(
            "CopyObjectResult",
            [("LastModified", info.last_modified), ("ETag", etag_header(info.etag))],
        )
        return _xml(result)

    # -- multipart ------------------------------------------------------------------------

    def create_upload(self, call: Call) -> Response:
        self.access.authorize("s3:PutObject", s3_arn(call.bucket, call.key))
        check_key(call.key)  # a key the lake cannot hold is refused now, not at the end
        upload = self.uploads.create(call.bucket, call.key, metadata.from_request(call.headers))
        fields: list[Field] = [
            ("Bucket", call.bucket),
            ("Key", call.key),
            ("UploadId", upload.upload_id),
        ]
        return _xml(document("InitiateMultipartUploadResult", fields))

    def upload_part(self, call: Call, data: BinaryIO) -> Response:
        upload = self.uploads.get(call.params["uploadId"], call.bucket, call.key)
        try:
            number = int(call.params.get("partNumber", ""))
        except ValueError:
            raise S3Error("InvalidArgument", "partNumber must be an integer") from None
        part = self.uploads.put_part(upload, number, data)
        return Response(headers=_checksums(call.headers, {"ETag": etag_header(part.etag)}))

    def list_parts(self, call: Call) -> Response:
        self.access.authorize("s3:ListMultipartUploadParts", s3_arn(call.bucket, call.key))
        upload = self.uploads.get(call.params["uploadId"], call.bucket, call.key)
        fields: list[Field] = [
            ("Bucket", call.bucket),
            ("Key", call.key),
            ("UploadId", upload.upload_id),
            ("IsTruncated", False),
        ]
        for part in self.uploads.parts(upload):
            fields.append(
                (
                    "Part",
                    [
                        ("PartNumber", part.number),
                        ("LastModified", part.last_modified),
                        ("ETag", etag_header(part.etag)),
                        ("Size", part.size),
                    ],
                )
            )
        return _xml(document("ListPartsResult", fields))

    def complete_upload(self, call: Call, body: bytes) -> Response:
        self.access.authorize("s3:PutObject", s3_arn(call.bucket, call.key))
        upload = self.uploads.get(call.params["uploadId"], call.bucket, call.key)
        root = parse(body, "CompleteMultipartUpload")
        chosen = []
        for part in root.findall("Part"):
            try:
                chosen.append((int(part.findtext("PartNumber") or ""), part.findtext("ETag") or ""))
            except ValueError:
                raise S3Error("MalformedXML", "a Part's PartNumber is not an integer") from None
        info = self.uploads.complete(upload, chosen)
        fields: list[Field] = [
            ("Location", f"/{call.bucket}/{quote(call.key)}"),
            ("Bucket", call.bucket),
            ("Key", call.key),
            ("ETag", etag_header(info.etag)),
        ]
        return _xml(document("CompleteMultipartUploadResult", fields))

    def abort_upload(self, call: Call) -> Response:
        self.access.authorize("s3:AbortMultipartUpload", s3_arn(call.bucket, call.key))
        upload = self.uploads.get(call.params["uploadId"], call.bucket, call.key)
        self.uploads.abort(upload)
        return Response(status_code=204)


_LIST_PARAMETERS = {
    "list-type", "prefix", "delimiter", "max-keys", "marker", "continuation-token",
    "start-after", "encoding-type", "fetch-owner",
}  # fmt: skip
_GET_PARAMETERS = {
    "response-content-type", "response-content-disposition", "response-cache-control",
    "response-content-encoding", "response-content-language", "response-expires", "partNumber",
}  # fmt: skip


def _not_implemented(what: str) -> S3Error:
    return S3Error("NotImplemented", f"lakeward's S3 endpoint does not implement {what}", 501)


def _xml(body: bytes) -> Response:
    return Response(body, media_type="application/xml")


def _token(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode()


def _token_key(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except ValueError:
        raise S3Error("InvalidArgument", "The continuation token provided is incorrect") from None


def _checksums(headers: dict[str, str], response: dict[str, str]) -> dict[str, str]:
    """The response headers, with the checksums the request sent echoed back as S3 does."""
    for name, value in headers.items():
        if name.startswith("x-amz-checksum-") and name != "x-amz-checksum-type":
            response[name] = value
    return response


async def _small_body(call: Call) -> bytes:
    """A request's XML body, checked against its declared hash and checksums."""
    raw = io.BytesIO()
    async for chunk in call.request.stream():
        raw.write(chunk)
        if raw.tell() > MAX_XML_BYTES:
            raise S3Error("MaxMessageLengthExceeded", "Your request was too big.")
    raw.seek(0)
    decoded = decode(raw, io.BytesIO(), call.headers, call.signed)
    return decoded.file.read()


def _read(stream: BinaryIO, start: int, length: int) -> Iterator[bytes]:
    with stream:
        if start:
            if stream.seekable():
                stream.seek(start)
            else:
                skip = start
                while skip:
                    skip -= len(stream.read(min(skip, CHUNK_SIZE))) or skip
        left = length
        while left > 0:
            chunk = stream.read(min(left, _SEND))
            if not chunk:
                raise InvalidRequest("the object ended early while it was read")
            left -= len(chunk)
            yield chunk
