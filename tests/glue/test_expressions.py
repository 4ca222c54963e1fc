"""GetPartitions' Expression, evaluated over partition values by each key's type."""

from __future__ import annotations

import pytest

from lakeward.errors import InvalidRequest
from lakeward.glue.expressions import HIVE_DEFAULT_PARTITION, compile_expression

KEYS = [("year", "int"), ("month", "string"), ("day", "date")]
PARTITIONS = [
    ["2019", "12", "2019-12-31"],
    ["2020", "1", "2020-01-15"],
    ["2020", "10", "2020-10-01"],
    ["2020", "2", "2020-02-29"],
    ["2021", "1", "2021-01-01"],
    [HIVE_DEFAULT_PARTITION, "1", "2021-01-02"],
]


def matching(expression: str) -> list[list[str]]:
    test = compile_expression(expression, KEYS)
    return [p for p in PARTITIONS if test(p)]


def test_an_int_key_compares_as_a_number_and_a_string_key_as_text() -> None:
    assert matching("year > 2019 AND year < 2021") == PARTITIONS[1:4]
    assert matching("year >= '2020'") == PARTITIONS[1:5]  # the literal takes the key's type
    # month is a string: '10' < '2' as text, as Glue compares a string key
    assert matching("month < '2' AND year = 2020") == [PARTITIONS[1], PARTITIONS[2]]


def test_between_in_like_not_or_and_null() -> None:
    assert matching("day BETWEEN '2020-01-01' AND '2020-03-01'") == [PARTITIONS[1], PARTITIONS[3]]
    assert matching("month IN ('1', '12')") == [
        PARTITIONS[0],
        PARTITIONS[1],
        PARTITIONS[4],
        PARTITIONS[5],
    ]
    assert matching("month LIKE '1%' AND NOT (year = 2019)") == [
        PARTITIONS[1],
        PARTITIONS[2],
        PARTITIONS[4],
    ]
    assert matching("year = 2019 OR year = 2021") == [PARTITIONS[0], PARTITIONS[4]]
    assert matching("year IS NULL") == [PARTITIONS[5]]
    assert matching("2020 = year") == PARTITIONS[1:4]


@pytest.mark.parametrize(
    ("expression", "named"),
    [
        ("country = 'FR'", "country is not a partition key (the keys: year, month, day)"),
        ("year = 'abc'", "'abc' is not a int (key year)"),
        ("year =", "Expression 'year =' is not valid"),
        ("year + 1 = 2", "is not a partition key"),
        ("upper(month) = 'A'", "is not a partition key"),
    ],
)
def test_a_bad_expression_is_refused_naming_what_is_wrong(expression: str, named: str) -> None:
    with pytest.raises(InvalidRequest, match="Expression") as refused:
        matching(expression)
    assert named in refused.value.message
