"""Bar charts that answer questions: sort, top N with an optional Other bar, formats and
the options each chart type takes (no stack needed: the series are computed on a table)."""

from __future__ import annotations

import random
from collections import defaultdict

import pyarrow as pa
import pytest

from lakeward.bi.datasets import apply_fields
from lakeward.bi.model import DatasetSpec, Visual, parse
from lakeward.bi.visuals import compute_series
from lakeward.errors import InvalidRequest

# 30 countries, 1 to 4 rows each (provinces), in two continents; some ties in the totals.
rng = random.Random(16)
ROWS = [
    (f"C{n:02d}", "north" if n % 2 else "south",
     rng.choice([5, 10, 20, 1000, rng.randint(1, 9999)]))
    for n in range(30) for _ in range(rng.randint(1, 4))
]  # fmt: skip
TABLE = pa.table({
    "country": [r[0] for r in ROWS], "continent": [r[1] for r in ROWS],
    "deaths": [r[2] for r in ROWS], "rate": [r[2] / 10_000 for r in ROWS],
})  # fmt: skip
COLUMNS = apply_fields(
    TABLE,
    DatasetSpec.model_validate({"name": "t", "data_source_id": "s", "sql": "SELECT 1"}).fields,
).columns


def totals(key: int = 0) -> dict[str, int]:
    found: dict[str, int] = defaultdict(int)
    for row in ROWS:
        found[row[key]] += row[2]
    return dict(found)


def bars(**visual: object) -> dict[str, object]:
    spec = parse(Visual, {"id": "v", "type": "bar", "x": "country", "y": "deaths", **visual}, "v")
    return compute_series(TABLE, COLUMNS, spec, [], "extract").data


def test_top_ten_sorted_by_value_either_way() -> None:
    by_deaths = sorted(totals().items(), key=lambda kv: (-kv[1], kv[0]))
    top = by_deaths[:10]
    data = bars(top_n=10, sort={"by": "value", "order": "desc"})
    (only,) = data["series"]  # type: ignore[misc]
    assert list(zip(only["x"], only["y"], strict=True)) == top
    assert data["categories"] == [k for k, _ in top]
    ascending = bars(top_n=10, sort={"by": "value", "order": "asc"})
    assert ascending["categories"] == sorted((k for k, _ in top), key=lambda k: (totals()[k], k))
    by_label = bars(top_n=10, sort={"by": "label", "order": "desc"})
    assert by_label["categories"] == sorted((k for k, _ in top), reverse=True)


def test_other_sums_the_rest_and_comes_last() -> None:
    by_deaths = sorted(totals().items(), key=lambda kv: (-kv[1], kv[0]))
    data = bars(top_n=5, other=True, sort={"by": "value", "order": "asc"})
    (only,) = data["series"]  # type: ignore[misc]
    shown = dict(zip(only["x"], only["y"], strict=True))
    assert shown == {**dict(by_deaths[:5]), "Other": sum(v for _, v in by_deaths[5:])}
    assert only["x"][-1] == "Other" and data["categories"][-1] == "Other"  # type: ignore[index]
    assert sum(shown.values()) == sum(r[2] for r in ROWS)  # nothing lost, nothing counted twice
    # An average over Other is the average of its rows, not of the countries' averages.
    mean = bars(top_n=5, other=True, aggregation="avg", x="country")["series"][0]  # type: ignore[index]
    rest = [r[2] for r in ROWS if r[0] not in dict(mean_top(5))]
    assert dict(zip(mean["x"], mean["y"], strict=True))["Other"] == pytest.approx(
        sum(rest) / len(rest)
    )


def mean_top(n: int) -> list[tuple[str, float]]:
    rows: dict[str, list[int]] = defaultdict(list)
    for row in ROWS:
        rows[row[0]].append(row[2])
    means = {k: sum(v) / len(v) for k, v in rows.items()}
    return sorted(means.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def test_top_n_ranks_over_every_colour() -> None:
    data = bars(top_n=3, color="continent", sort={"by": "value", "order": "desc"})
    expected = [k for k, _ in sorted(totals().items(), key=lambda kv: (-kv[1], kv[0]))[:3]]
    assert data["categories"] == expected
    for entry in data["series"]:  # type: ignore[attr-defined]
        assert set(entry["x"]) <= set(expected)
        assert entry["x"] == [k for k in expected if k in entry["x"]]  # in the chart's order


def test_options_only_where_the_type_draws_them() -> None:
    visual = {"id": "v", "type": "line", "x": "day", "y": "deaths"}
    with pytest.raises(InvalidRequest, match="sort applies to bar visuals, not to a line"):
        parse(Visual, {**visual, "sort": {"by": "value"}}, "visual")
    with pytest.raises(InvalidRequest, match="top_n applies to bar and map visuals"):
        parse(Visual, {**visual, "top_n": 3}, "visual")
    with pytest.raises(InvalidRequest, match="other needs top_n"):
        parse(Visual, {"id": "v", "type": "bar", "x": "a", "y": "b", "other": True}, "visual")
    with pytest.raises(InvalidRequest, match="formats.deaths.decimals: Input should be less"):
        parse(Visual, {**visual, "formats": {"deaths": {"decimals": 11}}}, "visual")
    with pytest.raises(InvalidRequest, match="formats: field continent is string, not integer"):
        bars(formats={"continent": {"style": "percent"}})
    assert bars(formats={"rate": {"style": "percent", "decimals": 1}})["categories"]
