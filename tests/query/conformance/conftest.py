"""The conformance suite's service, and its per-area counts printed at the end of the run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeward.config import load_settings
from lakeward.query.service import QueryService
from tests.query.conformance.suite import Runner, counts, summary

PROPERTY = "conformance"
SPARK_PROPERTY = "conformance-spark"
_ENGINES = {PROPERTY: "duckdb", SPARK_PROPERTY: "spark"}
_outcomes: dict[str, list[tuple[str, str]]] = {name: [] for name in _ENGINES}


@pytest.fixture(scope="session")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    """A service over its own state and lake: literal queries need no metastore."""
    settings = load_settings(data_dir=tmp_path_factory.mktemp("conformance") / "data", env={})
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    service = QueryService(settings)
    yield Runner(service)
    service.close()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Reports reach the controlling process also under xdist, with their properties.
    if report.when == "call":
        for name, value in report.user_properties:
            if name in _outcomes:
                area, status = str(value).split("|")
                _outcomes[name].append((area, status))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for name, engine in _ENGINES.items():
        if _outcomes[name]:
            terminalreporter.section(f"Athena conformance ({engine}): cases per area")
            terminalreporter.write_line(summary(counts(_outcomes[name])))
