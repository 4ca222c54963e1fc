"""How a place in the lake is named to users (``public_uri``) and read back whatever its
spelling (``lake_place``, ``lake_uri``): the embedded lake's places are ``s3://`` names."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeward.config import Settings
from lakeward.errors import InvalidKey
from lakeward.storage.paths import lake_place, lake_uri, public_uri


@pytest.fixture
def embedded(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path)


def test_the_embedded_lake_is_named_as_s3_and_read_back_from_every_spelling(
    embedded: Settings,
) -> None:
    root = embedded.lake_root
    assert root.startswith("file:///")
    assert public_uri(embedded, "lakeward-data", "raw/x.csv") == "s3://lakeward-data/raw/x.csv"
    for name in (
        "s3://lakeward-data/raw/x.csv",
        "s3a://lakeward-data/raw/x.csv",
        f"{root}/lakeward-data/raw/x.csv",
        "file:" + root.removeprefix("file://") + "/lakeward-data/raw/x.csv",
    ):
        assert lake_place(embedded, name) == ("lakeward-data", "raw/x.csv"), name
        assert lake_uri(embedded, name) == f"{root}/lakeward-data/raw/x.csv", name
    assert lake_place(embedded, "file:///etc/passwd") is None
    assert lake_uri(embedded, "file:///etc/passwd") == "file:///etc/passwd"
    with pytest.raises(InvalidKey, match="'..' folder"):
        lake_place(embedded, "s3://lakeward-data/../other/x")


def test_a_lake_on_s3_is_named_by_its_own_uri(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, lake={"root": "s3://company-lake/prod"})
    name = public_uri(settings, "lakeward-data", "raw/x.csv")
    assert name == "s3://company-lake/prod/lakeward-data/raw/x.csv"
    assert lake_place(settings, name) == ("lakeward-data", "raw/x.csv")
    assert lake_place(settings, "s3://other-bucket/raw/x.csv") is None
