"""The S3 endpoint against reading the lake's files directly and against moto's S3 server.

    .venv/bin/python bench/s3.py --data-dir DIR [--size-mb 256] [--runs 3] [--clients 8]

On a stack that is up, in one run:

1. **Large-object GET**: an object of ``--size-mb`` random bytes, put through the endpoint
   with boto3's transfer manager, read whole ``--runs`` times (a) from its file in the lake,
   (b) with boto3's ``get_object`` through the endpoint and (c) from moto's server (started
   here on a free port) holding the same bytes; the fastest of each, as MB/s and ratios.
2. **Small operations**: ``--clients`` processes, each putting and getting 1 KiB objects for
   ``--seconds``; operations per second through the endpoint and through moto's server.
"""

from __future__ import annotations

import argparse
import io
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import free_port, say

MB = 1024 * 1024
BUCKET = "lakeward-data"


def client(endpoint: str, key: str, secret: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        region_name="us-east-1",
        config=Config(max_pool_connections=4),
    )


def read_all(s3: Any, bucket: str, key: str) -> int:
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    total = 0
    while chunk := body.read(8 * MB):
        total += len(chunk)
    return total


def fastest(runs: int, work: Any) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def small_ops(endpoint: str, key: str, secret: str, bucket: str, seconds: float, n: int) -> int:
    s3 = client(endpoint, key, secret)
    body = os.urandom(1024)
    done = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        name = f"bench/s3-small/{n}/{done % 50}"
        s3.put_object(Bucket=bucket, Key=name, Body=body)
        s3.get_object(Bucket=bucket, Key=name)["Body"].read()
        done += 2
    return done


def ops_per_second(
    endpoint: str, key: str, secret: str, bucket: str, clients: int, seconds: float
) -> float:
    with multiprocessing.get_context("spawn").Pool(clients) as pool:
        start = time.perf_counter()
        counts = pool.starmap(
            small_ops, [(endpoint, key, secret, bucket, seconds, n) for n in range(clients)]
        )
        elapsed = time.perf_counter() - start
    return sum(counts) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="a stack that is up")
    parser.add_argument("--size-mb", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()

    from boto3.s3.transfer import TransferConfig

    from lakeward.config import load_settings

    settings = load_settings(data_dir=args.data_dir)
    if settings.server.port is None:
        sys.exit(f"{args.data_dir} holds no stack that is up; start it with lakeward up")
    endpoint = f"http://{settings.server.host}:{settings.server.port}"
    key, secret = settings.api.access_key_id or "", settings.api.secret_access_key or ""
    lake = client(endpoint, key, secret)
    data = os.urandom(args.size_mb * MB)
    name = "bench/s3-large/object.bin"
    parts = TransferConfig(multipart_threshold=64 * MB, multipart_chunksize=64 * MB)
    lake.upload_fileobj(io.BytesIO(data), BUCKET, name, Config=parts)
    path = Path(settings.data_dir) / "lake" / BUCKET / name

    port = free_port()
    moto = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        moto_url = f"http://127.0.0.1:{port}"
        other = client(moto_url, "testing", "testing")
        for _ in range(100):
            try:
                other.create_bucket(Bucket="bench")
                break
            except Exception:
                time.sleep(0.1)
        other.upload_fileobj(io.BytesIO(data), "bench", name, Config=parts)
        del data

        def direct() -> None:
            with open(path, "rb") as stream:
                while stream.read(8 * MB):
                    pass

        size = args.size_mb
        t_direct = fastest(args.runs, direct)
        t_ours = fastest(args.runs, lambda: read_all(lake, BUCKET, name))
        t_moto = fastest(args.runs, lambda: read_all(other, "bench", name))
        say(f"large GET, {size} MB, fastest of {args.runs}:")
        say(f"  file in the lake   {size / t_direct:8.0f} MB/s")
        say(f"  lakeward endpoint  {size / t_ours:8.0f} MB/s  ({t_direct / t_ours:.2f}x the file)")
        say(
            f"  moto server        {size / t_moto:8.0f} MB/s  "
            f"(lakeward {t_moto / t_ours:.1f}x moto)"
        )

        ours = ops_per_second(endpoint, key, secret, BUCKET, args.clients, args.seconds)
        theirs = ops_per_second(moto_url, "testing", "testing", "bench", args.clients, args.seconds)
        say(f"small PUT+GET of 1 KiB, {args.clients} client processes, {args.seconds:g} s each:")
        say(f"  lakeward endpoint  {ours:8.1f} ops/s")
        say(f"  moto server        {theirs:8.1f} ops/s  (lakeward {ours / theirs:.2f}x moto)")
    finally:
        moto.terminate()
        moto.wait(10)
        lake.delete_object(Bucket=BUCKET, Key=name)
        for page in lake.get_paginator("list_objects_v2").paginate(
            Bucket=BUCKET, Prefix="bench/s3-small/"
        ):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                lake.delete_objects(Bucket=BUCKET, Delete={"Objects": keys})


if __name__ == "__main__":
    main()
