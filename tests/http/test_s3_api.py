"""The S3 endpoint with the clients users have: boto3 (client and transfer manager), the
aws CLI and pyarrow's S3FileSystem, over a file:// lake, with IAM users and their policies.

The endpoint is served by uvicorn behind ``S3Dispatch``, as in the server: requests signed
for s3 reach it, the rest the application it wraps (here one that answers 404).
"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pandas as pd
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from starlette.responses import PlainTextResponse

from lakeward.access.arns import s3_arn
from lakeward.access.control import AccessControl
from lakeward.config import Settings, load_settings
from lakeward.http.s3 import S3Dispatch, S3Endpoint
from lakeward.storage import load_storage
from tests.helpers import s3_client, serving

BUCKET = "lakeward-data"
ENGINEER_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Action": "s3:ListAllMyBuckets", "Resource": s3_arn("*")},
        {
            "Effect": "Allow",
            "Action": ["s3:ListBucket", "s3:GetBucketLocation"],
            "Resource": s3_arn(BUCKET),
        },
        {
            "Effect": "Allow",
            "Action": [
                "s3:GetObject",
                "s3:PutObject",
                "s3:DeleteObject",
                "s3:AbortMultipartUpload",
                "s3:ListMultipartUploadParts",
            ],
            "Resource": s3_arn(BUCKET, "*"),
        },
    ],
}
MB = 1024 * 1024


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return load_settings(data_dir=tmp_path_factory.mktemp("s3") / "data", env={})


@pytest.fixture(scope="module")
def access(settings: Settings) -> AccessControl:
    access = AccessControl(settings)
    for user in ("engineer", "sales"):
        access.principals.create_user(user)
    access.principals.create_policy("LakeReadWrite", json.dumps(ENGINEER_POLICY))
    access.principals.attach_user_policy("engineer", "LakeReadWrite")
    return access


@pytest.fixture(scope="module")
def keys(access: AccessControl) -> dict[str, tuple[str, str]]:
    return {user: access.principals.create_access_key(user) for user in ("engineer", "sales")}


@pytest.fixture(scope="module")
def url(settings: Settings, access: AccessControl) -> Iterator[str]:
    storage = load_storage(settings)
    storage.ensure_bucket(BUCKET)
    storage.put(BUCKET, "covid/deaths.csv", b"country,deaths\nItaly,35724\n")

    async def elsewhere(scope: Any, receive: Any, send: Any) -> None:
        await PlainTextResponse("not S3", status_code=404)(scope, receive, send)

    with serving(S3Dispatch(elsewhere, S3Endpoint(settings, access, storage))) as served:
        yield served


def client(url: str, key: tuple[str, str], **config: Any) -> Any:
    return s3_client(url, key[0], key[1], **config)


@pytest.fixture(scope="module")
def s3(url: str, keys: dict[str, tuple[str, str]]) -> Any:
    return client(url, keys["engineer"])


def error_code(call: Any, *args: Any, **kwargs: Any) -> tuple[str, int]:
    with pytest.raises(ClientError) as caught:
        call(*args, **kwargs)
    response = caught.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


@pytest.mark.parametrize(
    "key", ["plain.txt", "with space.csv", "ünïcode/ŝ.txt", "per%cent+plus.bin", "a=b&c?d"]
)
def test_objects_round_trip_whatever_their_names(s3: Any, key: str) -> None:
    body = f"content of {key}".encode()
    put = s3.put_object(Bucket=BUCKET, Key=f"names/{key}", Body=body)
    got = s3.get_object(Bucket=BUCKET, Key=f"names/{key}")
    assert got["Body"].read() == body
    assert got["ETag"] == put["ETag"] == f'"{__import__("hashlib").md5(body).hexdigest()}"'
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix="names/")["Contents"]
    assert f"names/{key}" in [o["Key"] for o in listed]
    s3.delete_object(Bucket=BUCKET, Key=f"names/{key}")
    assert error_code(s3.head_object, Bucket=BUCKET, Key=f"names/{key}") == ("404", 404)


def test_ranges_conditions_and_copies_answer_as_s3(s3: Any) -> None:
    s3.put_object(Bucket=BUCKET, Key="r/digits", Body=b"0123456789")
    assert s3.get_object(Bucket=BUCKET, Key="r/digits", Range="bytes=2-4")["Body"].read() == b"234"
    tail = s3.get_object(Bucket=BUCKET, Key="r/digits", Range="bytes=-3")
    assert (tail["Body"].read(), tail["ContentRange"]) == (b"789", "bytes 7-9/10")
    assert error_code(s3.get_object, Bucket=BUCKET, Key="r/digits", Range="bytes=10-") == (
        "InvalidRange",
        416,
    )
    etag = s3.head_object(Bucket=BUCKET, Key="r/digits")["ETag"]
    assert error_code(s3.get_object, Bucket=BUCKET, Key="r/digits", IfNoneMatch=etag) == (
        "304",
        304,
    )
    assert error_code(s3.get_object, Bucket=BUCKET, Key="r/digits", IfMatch='"other"') == (
        "PreconditionFailed",
        412,
    )
    copied = s3.copy_object(
        Bucket=BUCKET, Key="r/copy", CopySource={"Bucket": BUCKET, "Key": "r/digits"}
    )
    assert copied["CopyObjectResult"]["ETag"] == etag
    assert s3.get_object(Bucket=BUCKET, Key="r/copy")["Body"].read() == b"0123456789"
    assert error_code(s3.get_object, Bucket=BUCKET, Key="r/none") == ("NoSuchKey", 404)
    assert error_code(s3.get_object, Bucket="no-such-bucket", Key="x") == ("NoSuchBucket", 404)


def test_listings_paginate_and_group_by_delimiter(s3: Any) -> None:
    keys = [f"list/{d}/part-{i:02d}" for d in ("a", "b") for i in range(12)] + ["list/top"]
    for key in keys:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"x")
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix="list/", PaginationConfig={"PageSize": 5}
    )
    found = [o["Key"] for page in pages for o in page.get("Contents", [])]
    assert found == sorted(keys)
    grouped = s3.list_objects_v2(Bucket=BUCKET, Prefix="list/", Delimiter="/")
    assert [p["Prefix"] for p in grouped["CommonPrefixes"]] == ["list/a/", "list/b/"]
    assert [o["Key"] for o in grouped["Contents"]] == ["list/top"]
    # Version 1, with markers, one common prefix per page.
    pages = s3.get_paginator("list_objects").paginate(
        Bucket=BUCKET, Prefix="list/", Delimiter="/", PaginationConfig={"PageSize": 1}
    )
    seen = [p["Prefix"] for page in pages for p in page.get("CommonPrefixes", [])]
    assert seen == ["list/a/", "list/b/"]
    deleted = s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in keys]})
    assert sorted(d["Key"] for d in deleted["Deleted"]) == sorted(keys)
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix="list/")


def test_objects_keep_the_metadata_they_were_written_with(s3: Any, url: str) -> None:
    s3.put_object(
        Bucket=BUCKET,
        Key="meta/report.csv.gz",
        Body=b"gzipped",
        ContentType="text/csv",
        ContentEncoding="gzip",
        CacheControl="max-age=60",
        ContentDisposition='attachment; filename="report.csv.gz"',
        Metadata={"Source": "jhu", "rows": "2"},
    )
    head = s3.head_object(Bucket=BUCKET, Key="meta/report.csv.gz")
    assert (head["ContentType"], head["ContentEncoding"], head["CacheControl"]) == (
        "text/csv",
        "gzip",
        "max-age=60",
    )
    assert head["ContentDisposition"] == 'attachment; filename="report.csv.gz"'
    assert head["Metadata"] == {"source": "jhu", "rows": "2"}  # names lower-cased, as S3 does
    got = s3.get_object(
        Bucket=BUCKET, Key="meta/report.csv.gz", ResponseContentType="application/gzip"
    )
    assert got["ContentType"] == "application/gzip" and got["Metadata"]["source"] == "jhu"
    # Written without: S3's default type, no user metadata.
    s3.put_object(Bucket=BUCKET, Key="meta/plain", Body=b"x")
    plain = s3.head_object(Bucket=BUCKET, Key="meta/plain")
    assert (plain["ContentType"], plain["Metadata"]) == ("binary/octet-stream", {})

    # A copy keeps the source's metadata, or takes the request's with REPLACE.
    s3.copy_object(
        Bucket=BUCKET, Key="meta/copy", CopySource={"Bucket": BUCKET, "Key": "meta/report.csv.gz"}
    )
    assert s3.head_object(Bucket=BUCKET, Key="meta/copy")["Metadata"] == head["Metadata"]
    s3.copy_object(
        Bucket=BUCKET,
        Key="meta/copy",
        CopySource={"Bucket": BUCKET, "Key": "meta/copy"},
        MetadataDirective="REPLACE",
        ContentType="application/gzip",
        Metadata={"reviewed": "yes"},
    )
    replaced = s3.head_object(Bucket=BUCKET, Key="meta/copy")
    assert (replaced["ContentType"], replaced["Metadata"]) == (
        "application/gzip",
        {"reviewed": "yes"},
    )
    # A copy onto itself that changes nothing is refused, as S3 refuses it.
    same = {"Bucket": BUCKET, "Key": "meta/copy"}
    assert error_code(s3.copy_object, Bucket=BUCKET, Key="meta/copy", CopySource=same) == (
        "InvalidRequest",
        400,
    )
    # Multipart uploads take their metadata when created.
    config = TransferConfig(multipart_threshold=5 * MB, multipart_chunksize=5 * MB)
    s3.upload_fileobj(
        io.BytesIO(os.urandom(6 * MB)), BUCKET, "meta/big.bin", Config=config,
        ExtraArgs={"ContentType": "application/x-parquet", "Metadata": {"part": "many"}},
    )  # fmt: skip
    big = s3.head_object(Bucket=BUCKET, Key="meta/big.bin")
    assert (big["ContentType"], big["Metadata"]) == ("application/x-parquet", {"part": "many"})
    # More than S3's 2 KB of user metadata is refused, and nothing is written.
    too_much = {"note": "x" * 2100}
    refused = error_code(s3.put_object, Bucket=BUCKET, Key="meta/big-note", Body=b"x",
                         Metadata=too_much)  # fmt: skip
    assert refused == ("MetadataTooLarge", 400)
    assert error_code(s3.head_object, Bucket=BUCKET, Key="meta/big-note") == ("404", 404)


def test_the_transfer_manager_uploads_and_downloads_in_parts(s3: Any, settings: Settings) -> None:
    data = os.urandom(11 * MB + 123)
    config = TransferConfig(multipart_threshold=5 * MB, multipart_chunksize=5 * MB)
    s3.upload_fileobj(io.BytesIO(data), BUCKET, "big/random.bin", Config=config)
    back = io.BytesIO()
    s3.download_fileobj(BUCKET, "big/random.bin", back, Config=config)
    assert back.getvalue() == data
    # Nothing of the parts is left once the upload completed.
    assert list((Path(settings.data_dir) / "s3" / "uploads").iterdir()) == []


def test_an_upload_never_completed_leaves_nothing_visible(s3: Any, settings: Settings) -> None:
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key="big/unfinished")["UploadId"]
    s3.upload_part(Bucket=BUCKET, Key="big/unfinished", UploadId=upload, PartNumber=1, Body=b"a")
    s3.upload_part(Bucket=BUCKET, Key="big/unfinished", UploadId=upload, PartNumber=2, Body=b"b")
    parts = s3.list_parts(Bucket=BUCKET, Key="big/unfinished", UploadId=upload)["Parts"]
    assert [p["PartNumber"] for p in parts] == [1, 2]
    assert error_code(s3.head_object, Bucket=BUCKET, Key="big/unfinished") == ("404", 404)
    # Every part but the last must have 5 MiB, as on S3.
    chosen = {"Parts": [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]} for p in parts]}
    refused = error_code(
        s3.complete_multipart_upload,
        Bucket=BUCKET,
        Key="big/unfinished",
        UploadId=upload,
        MultipartUpload=chosen,
    )
    assert refused == ("EntityTooSmall", 400)
    s3.abort_multipart_upload(Bucket=BUCKET, Key="big/unfinished", UploadId=upload)
    assert list((Path(settings.data_dir) / "s3" / "uploads").iterdir()) == []
    assert error_code(s3.list_parts, Bucket=BUCKET, Key="big/unfinished", UploadId=upload) == (
        "NoSuchUpload",
        404,
    )


def aws_cli_env(url: str, key: tuple[str, str], tmp_path: Path) -> dict[str, str]:
    """The aws CLI's environment: the endpoint and a key pair, no config files of the machine."""
    return {
        **os.environ,
        "AWS_ACCESS_KEY_ID": key[0],
        "AWS_SECRET_ACCESS_KEY": key[1],
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": url,
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
    }


def test_the_aws_cli_copies_lists_syncs_and_removes(
    url: str, keys: dict[str, tuple[str, str]], tmp_path: Path
) -> None:
    env = aws_cli_env(url, keys["engineer"], tmp_path)
    aws = [str(Path(sys.executable).parent / "aws"), "s3"]

    def run(*args: str, status: int = 0) -> str:
        done = subprocess.run([*aws, *args], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == status, done.stderr
        return done.stdout

    local = tmp_path / "reviews"
    (local / "2024").mkdir(parents=True)
    for name in ("a.json", "b.json"):
        (local / "2024" / name).write_text(json.dumps({"review": name}))
    run("cp", str(local / "2024" / "a.json"), f"s3://{BUCKET}/cli/one file.json")
    assert "one file.json" in run("ls", f"s3://{BUCKET}/cli/")
    # The CLI guesses a file's type from its name; the object keeps it.
    s3 = client(url, keys["engineer"])
    assert s3.head_object(Bucket=BUCKET, Key="cli/one file.json")["ContentType"] == (
        "application/json"
    )
    run("sync", str(local), f"s3://{BUCKET}/cli/reviews/")
    listed = run("ls", "--recursive", f"s3://{BUCKET}/cli/")
    assert "cli/reviews/2024/a.json" in listed and "cli/reviews/2024/b.json" in listed
    assert "PRE covid/" in run("ls", f"s3://{BUCKET}/")
    run("cp", f"s3://{BUCKET}/cli/reviews/2024/b.json", str(tmp_path / "b.json"))
    assert json.loads((tmp_path / "b.json").read_text()) == {"review": "b.json"}
    run("rm", "--recursive", f"s3://{BUCKET}/cli/")
    # The CLI lists nothing with status 1.
    assert run("ls", "--recursive", f"s3://{BUCKET}/cli/", status=1) == ""


def fetch(
    address: str, method: str = "GET", body: bytes | None = None, content_type: str = ""
) -> tuple[int, bytes]:
    """A plain HTTP request, as a browser or pandas makes it: no SDK, no signing."""
    request = urllib.request.Request(address, data=body, method=method)
    if content_type:
        request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as failed:
        return failed.code, failed.read()


@pytest.mark.parametrize("version", ["s3", "s3v4"])  # boto3's default for S3, and SigV4
def test_presigned_urls_read_and_write_as_their_signer(
    s3: Any, url: str, keys: dict[str, tuple[str, str]], version: str
) -> None:
    signer = client(url, keys["engineer"], signature_version=version)
    get = signer.generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": "covid/deaths.csv"}, ExpiresIn=300
    )
    assert ("X-Amz-Signature=" in get) == (version == "s3v4")
    assert fetch(get) == (200, b"country,deaths\nItaly,35724\n")
    # pandas reads it as any URL.
    assert pd.read_csv(get).to_dict("records") == [{"country": "Italy", "deaths": 35724}]
    key = f"presigned/{version}/up load.csv"
    put = signer.generate_presigned_url(
        "put_object", Params={"Bucket": BUCKET, "Key": key, "ContentType": "text/csv"}
    )
    assert fetch(put, "PUT", b"a,b\n1,2\n", "text/csv")[0] == 200
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"a,b\n1,2\n"

    # A URL is its signer's call: one signed by a user without S3 permissions is refused.
    sales = client(url, keys["sales"], signature_version=version)
    status, body = fetch(
        sales.generate_presigned_url(
            "get_object", Params={"Bucket": BUCKET, "Key": "covid/deaths.csv"}
        )
    )
    assert status == 403 and b"<Code>AccessDenied</Code>" in body
    # Another key in the same URL, or a longer life, breaks the signature.
    status, body = fetch(get.replace("covid/deaths.csv", key.replace(" ", "%20")))
    assert status == 403 and b"<Code>SignatureDoesNotMatch</Code>" in body
    stretched = re.sub(r"(X-Amz-Expires=|Expires=)(\d+)", lambda m: m[1] + str(int(m[2]) + 60), get)
    assert stretched != get
    status, body = fetch(stretched)
    assert status == 403 and b"<Code>SignatureDoesNotMatch</Code>" in body
    # A URL past its time is refused as S3 refuses it.
    short = signer.generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": "covid/deaths.csv"}, ExpiresIn=1
    )
    time.sleep(2.1)
    status, body = fetch(short)
    assert status == 403 and b"Request has expired" in body
    # A presigned PUT that is refused stores nothing.
    refused = sales.generate_presigned_url(
        "put_object", Params={"Bucket": BUCKET, "Key": f"presigned/{version}/refused.csv"}
    )
    assert fetch(refused, "PUT", b"x")[0] == 403
    missing = f"presigned/{version}/refused.csv"
    assert error_code(s3.head_object, Bucket=BUCKET, Key=missing) == ("404", 404)
    s3.delete_object(Bucket=BUCKET, Key=key)


def test_the_aws_cli_presigns_a_url_that_reads_the_object(
    url: str, keys: dict[str, tuple[str, str]], tmp_path: Path
) -> None:
    env = aws_cli_env(url, keys["engineer"], tmp_path)
    aws = str(Path(sys.executable).parent / "aws")
    presigned = subprocess.run(
        [aws, "s3", "presign", f"s3://{BUCKET}/covid/deaths.csv", "--expires-in", "60"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert presigned.returncode == 0, presigned.stderr
    assert fetch(presigned.stdout.strip()) == (200, b"country,deaths\nItaly,35724\n")


def test_pyarrow_writes_and_reads_parquet_through_the_endpoint(
    url: str, keys: dict[str, tuple[str, str]]
) -> None:
    import pyarrow as pa
    import pyarrow.fs as fs
    import pyarrow.parquet as pq

    filesystem = fs.S3FileSystem(
        access_key=keys["engineer"][0],
        secret_key=keys["engineer"][1],
        endpoint_override=url,
        scheme="http",
        region="us-east-1",
    )
    table = pa.table({"country": ["Italy", "Spain"] * 200_000, "deaths": list(range(400_000))})
    pq.write_table(table, f"{BUCKET}/arrow/deaths.parquet", filesystem=filesystem)
    assert pq.read_table(f"{BUCKET}/arrow/deaths.parquet", filesystem=filesystem) == table
    info = filesystem.get_file_info(fs.FileSelector(f"{BUCKET}/arrow"))
    assert [i.base_name for i in info] == ["deaths.parquet"]
    filesystem.delete_file(f"{BUCKET}/arrow/deaths.parquet")
    assert filesystem.get_file_info(f"{BUCKET}/arrow/deaths.parquet").type == fs.FileType.NotFound


def test_a_user_without_s3_permissions_is_refused_and_it_is_audited(
    url: str, keys: dict[str, tuple[str, str]], access: AccessControl
) -> None:
    sales = client(url, keys["sales"])
    before = len(access.audit.query(action="s3:GetObject", decision="implicitDeny"))
    assert error_code(sales.get_object, Bucket=BUCKET, Key="covid/deaths.csv") == (
        "AccessDenied",
        403,
    )
    assert error_code(sales.list_objects_v2, Bucket=BUCKET) == ("AccessDenied", 403)
    assert error_code(sales.put_object, Bucket=BUCKET, Key="covid/x", Body=b"x") == (
        "AccessDenied",
        403,
    )
    assert error_code(sales.head_object, Bucket=BUCKET, Key="covid/x") == ("403", 403)
    denied = access.audit.query(action="s3:GetObject", decision="implicitDeny")
    assert [(r.principal.rpartition("/")[2], r.resource) for r in denied[before:]] == [
        ("sales", s3_arn(BUCKET, "covid/deaths.csv"))
    ]


def test_wrong_credentials_and_stale_signatures_are_refused(
    url: str, keys: dict[str, tuple[str, str]]
) -> None:
    key_id, secret = keys["engineer"]
    wrong = client(url, (key_id, secret[:-1] + ("x" if secret[-1] != "x" else "y")))
    assert error_code(wrong.get_object, Bucket=BUCKET, Key="covid/deaths.csv") == (
        "SignatureDoesNotMatch",
        403,
    )
    unknown = client(url, ("LKWNOSUCHKEY00000000", secret))
    assert error_code(unknown.list_buckets) == ("InvalidAccessKeyId", 403)
    stale = signed_request(url, key_id, secret, "GET", f"/{BUCKET}/covid/deaths.csv", b"", -1)
    assert (stale.status_code, code_of(stale)) == (403, "RequestTimeTooSkewed")


def signed_request(
    url: str,
    key_id: str,
    secret: str,
    method: str,
    path: str,
    body: bytes,
    hours: int = 0,
    headers: dict[str, str] | None = None,
    payload_hash: str | None = None,
) -> Any:
    """A request signed by botocore's own S3 signer, sent with httpx as it stands."""
    import hashlib

    import httpx

    request = AWSRequest(method=method, url=url + path, data=body, headers=headers or {})
    request.headers["X-Amz-Content-SHA256"] = payload_hash or hashlib.sha256(body).hexdigest()
    signer = S3SigV4Auth(Credentials(key_id, secret), "s3", "us-east-1")
    when = datetime.now(UTC) + timedelta(hours=hours)
    request.context["timestamp"] = when.strftime("%Y%m%dT%H%M%SZ")
    request.headers["X-Amz-Date"] = request.context["timestamp"]
    signer._inject_signature_to_request(  # noqa: SLF001 - sign at a chosen time
        request,
        signer.signature(
            signer.string_to_sign(request, signer.canonical_request(request)), request
        ),
    )
    return httpx.request(method, url + path, content=body, headers=dict(request.headers.items()))


def code_of(response: Any) -> str:
    import xml.etree.ElementTree as ElementTree

    return str(ElementTree.fromstring(response.content).findtext("Code"))


def test_bad_bodies_get_s3_errors_and_store_nothing(
    url: str, keys: dict[str, tuple[str, str]], s3: Any
) -> None:
    key_id, secret = keys["engineer"]
    malformed = signed_request(url, key_id, secret, "POST", f"/{BUCKET}?delete", b"<Delete><Ob")
    assert (malformed.status_code, code_of(malformed)) == (400, "MalformedXML")
    # A body that is not the one its signed hash describes.
    other = signed_request(
        url, key_id, secret, "PUT", f"/{BUCKET}/bad/hash", b"tampered", payload_hash="0" * 64
    )
    assert (other.status_code, code_of(other)) == (400, "XAmzContentSHA256Mismatch")
    assert error_code(
        s3.put_object,
        Bucket=BUCKET,
        Key="bad/md5",
        Body=b"x",
        ContentMD5="AAAAAAAAAAAAAAAAAAAAAA==",
    ) == ("BadDigest", 400)
    # Keys the lake cannot hold: '..' would leave the bucket on a file:// lake.
    assert error_code(s3.put_object, Bucket=BUCKET, Key="bad/../../escape", Body=b"x") == (
        "InvalidArgument",
        400,
    )
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix="bad/")


def test_a_put_cut_off_mid_body_leaves_no_object(
    url: str, keys: dict[str, tuple[str, str]], s3: Any, settings: Settings
) -> None:
    import hashlib

    key_id, secret = keys["engineer"]
    body = b"y" * (2 * MB)
    request = AWSRequest(method="PUT", url=f"{url}/{BUCKET}/cut/off", data=body)
    request.headers["X-Amz-Content-SHA256"] = hashlib.sha256(body).hexdigest()
    request.headers["Content-Length"] = str(len(body))
    S3SigV4Auth(Credentials(key_id, secret), "s3", "us-east-1").add_auth(request)
    host, port = urlsplit(url).hostname, urlsplit(url).port
    head = f"PUT /{BUCKET}/cut/off HTTP/1.1\r\nHost: {host}:{port}\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in request.headers.items() if name.lower() != "host"
    )
    with socket.create_connection((host, port)) as sock:
        sock.sendall(head.encode() + b"\r\n" + body[: MB // 2])
    # Whatever the server was doing with the half it got, no object appears.
    for _ in range(50):
        assert error_code(s3.head_object, Bucket=BUCKET, Key="cut/off") == ("404", 404)
        threading.Event().wait(0.02)
    spool = Path(settings.data_dir) / "s3" / "incoming"
    assert not spool.exists() or list(spool.iterdir()) == []


def test_concurrent_puts_to_one_key_never_show_a_torn_object(s3: Any) -> None:
    versions = [bytes([65 + i]) * (3 * MB) for i in range(2)]
    torn: list[int] = []
    stop = threading.Event()

    def write(body: bytes) -> None:
        while not stop.is_set():
            s3.put_object(Bucket=BUCKET, Key="race/one", Body=body)

    s3.put_object(Bucket=BUCKET, Key="race/one", Body=versions[0])
    writers = [threading.Thread(target=write, args=(v,)) for v in versions]
    for thread in writers:
        thread.start()
    try:
        for _ in range(15):
            read = s3.get_object(Bucket=BUCKET, Key="race/one")["Body"].read()
            if read not in versions:
                torn.append(len(read))
    finally:
        stop.set()
        for thread in writers:
            thread.join()
    assert torn == []
    last = s3.get_object(Bucket=BUCKET, Key="race/one")["Body"].read()
    assert last in versions


def test_requests_not_signed_for_s3_reach_the_application(url: str) -> None:
    import httpx

    assert httpx.get(f"{url}/{BUCKET}/covid/deaths.csv").text == "not S3"
