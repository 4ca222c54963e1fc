"""Which places a partition projection reads: each type's values as Athena projects them."""

from __future__ import annotations

from datetime import datetime

import pytest

from lakeward.errors import InvalidRequest
from lakeward.query.projection import Projection, projection_of

NOW = datetime(2026, 3, 15, 10, 30)


def projection(keys: list[str], **properties: str) -> Projection:
    parameters = {"projection.enabled": "true"}
    parameters.update({k.replace("__", "."): v for k, v in properties.items()})
    found = projection_of(parameters, "s3://lake/t", keys, now=NOW)
    assert found is not None
    return found


def test_default_template_is_hive_s_layout_under_the_location() -> None:
    p = projection(["region"], projection__region__type="enum",
                   projection__region__values="eu-west-1,us-east-1")  # fmt: skip
    assert p.prefix == "s3://lake/t/"
    assert p.values("region=eu-west-1/part-0.parquet") == ("eu-west-1",)
    assert p.values("region=eu-west-1/nested/deeper/part-0") == ("eu-west-1",)
    assert p.values("region=eu-west-2/part-0.parquet") is None  # not a value of the enum
    assert p.values("region=eu-west-1") is None  # a file named like the directory
    assert p.values("part-0.parquet") is None


def test_integer_ranges_step_by_their_interval_with_their_digits() -> None:
    p = projection(["hour"], projection__hour__type="integer", projection__hour__range="0,23",
                   projection__hour__interval="6", projection__hour__digits="2")  # fmt: skip
    kept = [h for h in range(30) if p.values(f"hour={h:02d}/f") is not None]
    assert kept == [0, 6, 12, 18]
    assert p.values("hour=6/f") is None  # not zero-padded to two digits
    assert projection_of({"projection.enabled": "false"}, "s3://lake/t", ["hour"]) is None


def test_dates_follow_their_format_range_and_interval() -> None:
    p = projection(["dt"], projection__dt__type="date", projection__dt__format="yyyy/MM/dd",
                   projection__dt__range="NOW-2DAYS,NOW",
                   storage__location__template="s3://logs/AWSLogs/${dt}/")  # fmt: skip
    assert p.prefix == "s3://logs/AWSLogs/"
    found = [d for d in ("2026/03/12", "2026/03/13", "2026/03/14", "2026/03/15", "2026/03/16")
             if p.values(f"{d}/log.gz") is not None]  # fmt: skip
    assert found == ["2026/03/13", "2026/03/14", "2026/03/15"]
    assert p.values("2026/3/14/log.gz") is None  # not as the format writes it
    assert p.values("2026/02/30/log.gz") is None  # not a date


def test_months_and_hours_step_from_the_range_start() -> None:
    months = projection(["m"], projection__m__type="date", projection__m__format="yyyy-MM",
                        projection__m__range="2025-11,NOW", projection__m__interval="2",
                        projection__m__interval__unit="MONTHS")  # fmt: skip
    kept = [m for m in ("2025-10", "2025-11", "2025-12", "2026-01", "2026-03", "2026-05")
            if months.values(f"m={m}/f") is not None]  # fmt: skip
    assert kept == ["2025-11", "2026-01", "2026-03"]
    hours = projection(["h"], projection__h__type="date", projection__h__format="yyyy-MM-dd-HH",
                       projection__h__range="NOW-3HOURS,NOW")  # fmt: skip
    kept = [h for h in range(6, 13) if hours.values(f"h=2026-03-15-{h:02d}/f") is not None]
    assert kept == [7, 8, 9, 10]


def test_several_columns_are_all_checked() -> None:
    p = projection(["region", "day"], projection__region__type="enum",
                   projection__region__values="eu,us", projection__day__type="date",
                   projection__day__format="yyyy-MM-dd",
                   projection__day__range="2026-01-01,2026-01-31")  # fmt: skip
    assert p.values("region=eu/day=2026-01-05/f") == ("eu", "2026-01-05")
    assert p.values("region=eu/day=2026-02-05/f") is None
    assert p.values("region=asia/day=2026-01-05/f") is None


def test_a_partition_column_without_a_type_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="'projection.day.type' is not set"):
        projection_of({"projection.enabled": "true", "projection.region.type": "injected"},
                      "s3://lake/t", ["region", "day"])  # fmt: skip
