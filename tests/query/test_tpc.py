"""TPC-H through PyAthena against the session's stack: the 22 queries at scale factor 0.01,
each answer compared with the official one (DuckDB's tpch extension keeps them).

The data and answers come from the extension in a side environment (``bench/tpc_env.sh``,
made by ``./dev.sh install``); ``bench/tpc.py`` runs the same at scale factor 1, and
TPC-DS, beside DuckDB alone.
"""

from __future__ import annotations

import subprocess

import pytest

from bench._tpc import Stack, answer_rows, cache_dir, difference, extension_queries, generated
from lakeward.config import Settings
from tests.helpers import need

pytestmark = pytest.mark.spark


def test_tpch_answers_every_query_as_the_specification_does(stack: Settings) -> None:
    try:
        source = generated("tpch", 0.01, cache_dir())
    except (OSError, subprocess.CalledProcessError) as e:
        need(False, f"DuckDB's tpch extension could not be installed (bench/tpc_env.sh): {e}")
    queries = extension_queries(source)
    assert len(queries) == 22
    lake = Stack.connect(stack, "tpch_sf0_01")
    lake.load(source)

    wrong = {}
    for name, sql in queries.items():
        found = difference(lake.rows(sql), answer_rows(source / "answers" / f"{name}.csv"))
        if found is not None:
            wrong[name] = found
    assert wrong == {}
    # The answers are not empty ones: the pricing summary has its four groups.
    assert len(answer_rows(source / "answers" / "q01.csv")) == 4
