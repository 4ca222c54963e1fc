"""Helpers of the storage tests (a module of its own: conftest is not importable)."""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import boto3

from lakeward.config import LakeSettings, Settings

BUCKET = "lakeward-data"
CREDENTIALS = {"s3_access_key_id": "testing", "s3_secret_access_key": "testing"}

RawPut = Callable[[str, str, bytes], None]


def s3_client(endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def s3_settings(tmp_path: Path, endpoint: str, root: str) -> Settings:
    lake = LakeSettings(root=root, s3_endpoint_url=endpoint, s3_region="us-east-1", **CREDENTIALS)
    return Settings(data_dir=tmp_path, lake=lake)


def new_root_bucket(endpoint: str) -> str:
    """A fresh root bucket, so that tests sharing the server do not see each other."""
    name = f"lake-{uuid.uuid4().hex[:16]}"
    s3_client(endpoint).create_bucket(Bucket=name)
    return name


class Recorder:
    """A listener keeping the notifications it receives."""

    def __init__(self) -> None:
        self.notifications: list[dict[str, Any]] = []

    def __call__(self, notification: dict[str, Any]) -> None:
        self.notifications.append(notification)

    @property
    def records(self) -> list[dict[str, Any]]:
        return [r for n in self.notifications for r in n["Records"]]


class _Failing(io.RawIOBase):
    def __init__(self, good: int, error: BaseException) -> None:
        self._left = good
        self._error = error

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._left <= 0:
            raise self._error
        size = min(len(buffer), self._left)
        buffer[:size] = b"x" * size
        self._left -= size
        return size


def failing_stream(good: int, error: BaseException) -> BinaryIO:
    """A source that yields ``good`` bytes and then raises ``error``, like a dropped upload."""
    return io.BufferedReader(_Failing(good, error))
