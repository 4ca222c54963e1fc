"""The suite's cases on the Spark engine: Athena's answer, or a refusal naming what is unsupported.

One Spark session (the service's Spark engine over the session stack) answers every case.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lakeward.config import Settings
from lakeward.query.model import WorkGroup
from lakeward.query.service import QueryService
from tests.helpers import over_stack
from tests.query.conformance.conftest import SPARK_PROPERTY
from tests.query.conformance.suite import (
    DOCS,
    Case,
    Runner,
    counts,
    documented_counts,
    load_cases,
)

pytestmark = pytest.mark.spark

CASES = load_cases()
_statuses: list[tuple[str, str]] = []


@pytest.fixture(scope="module", autouse=True)
def documented() -> Iterator[None]:
    """After every case ran here, the Spark counts must be docs/query.md's support table's."""
    yield
    if len(_statuses) != len(CASES):  # a selection, or an xdist worker's share
        return
    found = {area: (c["passed"], c["refused"], c["wrong"]) for area, c in counts(_statuses).items()}
    documented = documented_counts(DOCS.read_text(), "spark")
    differ = sorted(
        a for a in found.keys() | documented.keys() if found.get(a) != documented.get(a)
    )
    if differ:
        pytest.fail(
            f"docs/query.md's Spark counts differ for {', '.join(differ)} (suite: "
            f"{[found.get(a) for a in differ]}, docs: {[documented.get(a) for a in differ]}; "
            "passed, refused, wrong): run python -m tests.query.conformance.suite --spark "
            "DATA_DIR on a running stack"
        )


@pytest.fixture(scope="module")
def spark_runner(stack: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    settings = over_stack(stack, tmp_path_factory.mktemp("conformance-spark"))
    service = QueryService(settings, owner=True)
    service.put_work_group(WorkGroup(name="spark", engine="spark"))
    yield Runner(service, workgroup="spark")
    service.close()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_on_spark(spark_runner: Runner, case: Case, request: pytest.FixtureRequest) -> None:
    outcome = spark_runner.run(case)
    request.node.user_properties.append((SPARK_PROPERTY, f"{case.area}|{outcome.status}"))
    _statuses.append((case.area, outcome.status))
    if outcome.status == "refused":
        print(outcome.report())  # counted, not failed: lakeward says what Spark cannot do
    assert outcome.status != "wrong", outcome.report()
