"""Results of every Athena type, for the page-bytes test and the snapshot it compares with.

``SQL_CASES`` run on the DuckDB engine (no tables); ``arrow_cases`` are batches as
an engine could hand them over (types DuckDB does not produce, several batches).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from decimal import Decimal

import pyarrow as pa

SQL_CASES = {
    "scalars": """
        SELECT * FROM (VALUES
          (true, 1::TINYINT, 2::SMALLINT, 3::INTEGER, 4::BIGINT, 1.5::REAL, 0.1::DOUBLE,
           'plain', DATE '2020-02-29', TIMESTAMP '2020-01-02 03:04:05.678901',
           1.50::DECIMAL(10, 2), 12345678901234567890.1234567890::DECIMAL(38, 10),
           '\\x00\\xffhi'::BLOB, TIME '01:02:03.456789'),
          (false, (-128)::TINYINT, (-32768)::SMALLINT, (-2147483648)::INTEGER,
           (-9223372036854775808)::BIGINT, 'NaN'::REAL, 'Infinity'::DOUBLE,
           '', DATE '1970-01-01', TIMESTAMP '1999-12-31 23:59:59.999',
           (-0.01)::DECIMAL(10, 2), 0::DECIMAL(38, 10), ''::BLOB, TIME '00:00:00'),
          (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
          (true, 127::TINYINT, 32767::SMALLINT, 2147483647::INTEGER,
           9223372036854775807::BIGINT, 3.4e38::REAL, (-0.0)::DOUBLE,
           ' spaced ', DATE '0001-01-01', TIMESTAMP '2020-01-02 00:00:00',
           99999999.99::DECIMAL(10, 2), (-1.0000000001)::DECIMAL(38, 10), 'a"b'::BLOB,
           TIME '23:59:59.999')
        ) AS t(b, ti, si, i, bi, r, d, s, dt, ts, dec, wide, bin, tm)
    """,
    "doubles": """
        SELECT x, x * 1e7 AS big, x / 1e5 AS small, CAST(x AS REAL) AS single
        FROM (VALUES (0.1), (1.0), (100.0), (0.001), (0.0001), (1e21), (-2.5e-10),
                     (12345.5), (9999999.0), (10000000.0), (1.0 / 3), (NULL)) AS t(x)
    """,
    "strings": """
        SELECT * FROM (VALUES
          ('say "hi"', 'back\\slash', 'tab' || chr(9) || 'end'),
          ('new' || chr(10) || 'line', 'cr' || chr(13) || 'lf' || chr(10), 'bell' || chr(7)),
          ('caf' || chr(233), '日本語', 'emoji ' || chr(128512) || ' ok'),
          ('', NULL, 'nul' || chr(0) || 'byte'),
          (NULL, '', 'ctl' || chr(31) || chr(127) || chr(8) || chr(12)),
          ('</script>', '{"json": [1, "x"]}', 'u' || chr(8232) || chr(8233) || chr(65279)),
          ('a,b', '''quoted''', '\\u0041 not an escape'),
          ('del' || chr(127), 'tab' || chr(9), 'quote"' || chr(127))
        ) AS t("plain", "Ünïcode name", "sp""é""cial")
    """,
    "nested": """
        SELECT * FROM (VALUES
          ([1, 2, NULL], MAP {'a': 1, 'b': NULL}, {'x': 1, 'y': 'two', 'z': [1.5, NULL]},
           [{'k': 'v', 'n': [DATE '2020-01-01']}], [['a', NULL], []], MAP {1: [true, NULL]}),
          ([], MAP {}, {'x': NULL, 'y': '', 'z': []}, [], [], MAP {}),
          (NULL, NULL, NULL, NULL, NULL, NULL),
          ([NULL], MAP {'é"': 3}, {'x': -1, 'y': 'ü,=}', 'z': NULL}, [NULL],
           [NULL, ['x y']], MAP {2: NULL})
        ) AS t(ints, m, r, rows, nested, mb)
    """,
    "timestamps": """
        SELECT TIMESTAMP '2020-01-02 03:04:05' + to_milliseconds(i * 1234567) AS ts,
               DATE '2020-01-01' + CAST(i AS INTEGER) AS d,
               i AS n
        FROM range(25) AS t(i)
    """,
    "many_pages": """
        SELECT i AS id, CASE WHEN i % 7 = 0 THEN NULL ELSE 'row ' || i END AS text,
               CASE WHEN i % 11 = 0 THEN '' ELSE chr(CAST(913 + i % 20 AS INTEGER)) END AS greek,
               i / 8.0 AS ratio, i % 3 = 0 AS flag
        FROM range(2345) AS t(i) ORDER BY i
    """,
    "empty": "SELECT 1 AS one, 'x' AS two WHERE false",
    "aggregate": """
        SELECT i % 10 AS bucket, count(*) AS n, sum(i) AS total, avg(i) AS mean,
               min(CAST(i AS DECIMAL(12, 3))) AS least
        FROM range(1000) AS t(i) GROUP BY bucket ORDER BY bucket
    """,
}


def arrow_cases() -> dict[str, list[pa.RecordBatch]]:
    """Batches of the types an engine may hand over beyond what SQL_CASES produce."""
    zoned = pa.array(
        [datetime(2021, 5, 6, 7, 8, 9, 10_000, tzinfo=UTC), None], pa.timestamp("us", "UTC")
    )
    first = pa.record_batch(
        {
            "zoned": zoned,
            "dict": pa.array(["a", None]).dictionary_encode(),
            "f32": pa.array([0.1, None], pa.float32()),
            "t": pa.array([time(1, 2, 3, 456789), None], pa.time64("us")),
            "day": pa.array([date(2020, 2, 29), None]),
            "large": pa.array(["large ü", None], pa.large_string()),
            "bin": pa.array([b"\x00\x01\xfe", None], pa.binary()),
            "dec": pa.array([Decimal("-12.345"), None], pa.decimal128(20, 3)),
            "lst": pa.array([[time(4, 5, 6)], None], pa.list_(pa.time64("us"))),
        }
    )
    second = pa.record_batch(
        {
            "zoned": pa.array([None, datetime(1970, 1, 1, tzinfo=UTC)], pa.timestamp("us", "UTC")),
            "dict": pa.array(["b", "b"]).dictionary_encode(),
            "f32": pa.array([float("-inf"), 1e-5], pa.float32()),
            "t": pa.array([None, time(0, 0)], pa.time64("us")),
            "day": pa.array([None, date(1, 1, 1)]),
            "large": pa.array(["", "x"], pa.large_string()),
            "bin": pa.array([b"", b"\x7f"], pa.binary()),
            "dec": pa.array(
                [Decimal("0.000"), Decimal("99999999999999999.999")], pa.decimal128(20, 3)
            ),  # fmt: skip
            "lst": pa.array([[], [None]], pa.list_(pa.time64("us"))),
        }
    )
    return {"arrow_types": [first, second]}
