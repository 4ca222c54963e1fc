"""Athena's answers to the suite's cases (cases/*.json), through the SQL service on DuckDB."""

from __future__ import annotations

import pytest

from tests.query.conformance.conftest import PROPERTY
from tests.query.conformance.suite import Case, Runner, load_cases

CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(runner: Runner, case: Case, request: pytest.FixtureRequest) -> None:
    outcome = runner.run(case)
    request.node.user_properties.append((PROPERTY, f"{case.area}|{outcome.status}"))
    if outcome.status == "refused" or case.error is not None:
        # Counted, not failed: lakeward says what it cannot do, or fails as Athena does
        # (both messages shown with -rP).
        print(outcome.report())
    assert outcome.status != "wrong", outcome.report()


def test_the_cases_are_read_whole() -> None:
    assert CASES, "no case files"
    assert len({(c.area, c.sql) for c in CASES}) == len(CASES), "a case is repeated"
