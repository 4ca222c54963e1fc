"""The conformance suite's service, and its per-area counts printed at the end of the run.

When every case ran on DuckDB, the counts must be those of docs/query.md's support
table: the run fails otherwise, naming the areas that differ.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeward.config import load_settings
from lakeward.query.service import QueryService
from tests.query.conformance.suite import (
    DOCS,
    Runner,
    counts,
    documented_counts,
    load_cases,
    summary,
)

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


def pytest_sessionfinish(session: pytest.Session) -> None:
    ran = _outcomes[PROPERTY]
    if not ran or len(ran) != len(load_cases()):  # a selection, or an xdist worker's share
        return
    found = {area: (c["passed"], c["refused"], c["wrong"]) for area, c in counts(ran).items()}
    documented = documented_counts(DOCS.read_text())
    if found != documented:
        differ = sorted(
            a for a in found.keys() | documented.keys() if found.get(a) != documented.get(a)
        )
        session.config.get_terminal_writer().line(
            f"docs/query.md's support table differs from the suite for {', '.join(differ)} "
            f"(suite: {[found.get(a) for a in differ]}, docs: {[documented.get(a) for a in differ]}"
            "; passed, refused, wrong): run python -m tests.query.conformance.suite",
            red=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
