"""The conformance suite: Athena's (Trino's) answers, and lakeward's, case by case.

Each area's cases are a JSON list in ``cases/<area>.json``::

    {"sql": "SELECT 7 / 2", "type": "integer", "value": "3"}
    {"sql": "SELECT 1 / 0", "error": "Division by zero"}
    {"sql": "...", "types": ["integer", "bigint"], "rows": [["1", "2"], ["2", null]],
     "names": ["x", "_col1"], "ordered": true, "note": "why"}

Values are the text Athena returns in ``VarCharValue`` (null: no value, SQL NULL);
types are the Trino names Athena reports in ``ResultSetMetadata`` (``decimal(p,s)``
compares the type, precision and scale; ``array(integer)``, ``map(...)``,
``row(...)`` compare the name Athena reports: array, map, row). Rows compare as a
multiset unless ``ordered``. ``error``: Athena fails; any failure of lakeward
agrees, and both texts are kept.

A case runs through the SQL service as a client's query does: parsed and
checked, translated, run by the engine, written as a result and read back as
``GetQueryResults`` pages, the types from the result's ``.csv.metadata``.
Its outcome is one of:

- passed: the same rows and types, or a failure where Athena fails;
- refused: lakeward refused the query when it was started (InvalidRequest
  naming what it does not support), or failed saying what "is not supported"
  when only a value could tell (a pattern in a column), where Athena answers;
- wrong: anything else (another answer, an answer where Athena fails, or the
  engine failing where Athena answers).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakeward.errors import InvalidRequest
from lakeward.query.model import QueryState
from lakeward.query.service import QueryService
from lakeward.storage.paths import lake_place

CASES = Path(__file__).parent / "cases"
OUTCOMES = ("passed", "refused", "wrong")
# How lakeward words a refusal, also one that only a value can decide (query/translate).
REFUSAL = "is not supported"
_KEYS = {"sql", "type", "types", "value", "rows", "names", "error", "ordered", "note"}

Row = list[str | None]


@dataclass(frozen=True)
class Case:
    area: str
    index: int
    sql: str
    types: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    names: list[str] | None = None
    error: str | None = None
    ordered: bool = False
    note: str = ""

    @property
    def id(self) -> str:
        return f"{self.area}:{self.index}"


@dataclass
class Outcome:
    case: Case
    status: str  # passed | refused | wrong
    types: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    error: str | None = None
    why: str = ""

    def report(self) -> str:
        """What a failure says: the case, its SQL, what Athena gives and what lakeward gave."""
        case = self.case
        expected = (
            f"an error like {case.error!r}"
            if case.error is not None
            else f"types {case.types}, rows {case.rows}"
        )
        received = (
            f"error {self.error!r}"
            if self.error is not None
            else f"types {self.types}, rows {self.rows}, names {self.names}"
        )
        return (
            f"{case.id} {self.status}: {self.why}\n  sql:      {case.sql}\n"
            f"  expected: {expected}\n  received: {received}"
        )


def load_cases(directory: Path = CASES) -> list[Case]:
    """Every case of every area file, in file and list order; a malformed case raises."""
    cases = []
    for path in sorted(directory.glob("*.json")):
        for index, raw in enumerate(json.loads(path.read_text()), start=1):
            cases.append(_case(path.stem, index, raw, path))
    return cases


def _case(area: str, index: int, raw: dict[str, Any], path: Path) -> Case:
    where = f"{path.name} case {index}"
    unknown = set(raw) - _KEYS
    if unknown or "sql" not in raw:
        raise ValueError(f"{where}: needs 'sql'; unknown keys {sorted(unknown)}")
    if "error" in raw:
        if {"value", "rows", "type", "types"} & set(raw):
            raise ValueError(f"{where}: an error case has no value, rows or types")
        return Case(area, index, raw["sql"], error=raw["error"], note=raw.get("note", ""))
    if "value" in raw:
        types, rows = [raw["type"]], [[raw["value"]]]
    else:
        types, rows = raw["types"], raw["rows"]
    if any(len(row) != len(types) for row in rows):
        raise ValueError(f"{where}: every row needs one value per type")
    return Case(
        area,
        index,
        raw["sql"],
        types=types,
        rows=rows,
        names=raw.get("names"),
        ordered=raw.get("ordered", False),
        note=raw.get("note", ""),
    )


def type_text(name: str, precision: int, scale: int) -> str:
    """A reported column type in the cases' notation: decimal(p,s), else Athena's name."""
    return f"decimal({precision},{scale})" if name == "decimal" else name


def expected_type(text: str) -> str:
    """A case's type as Athena reports it: array(integer) is reported as array."""
    text = text.strip().lower()
    if text.startswith("decimal"):
        return text.replace(" ", "")
    return text.split("(", 1)[0].strip()  # also "timestamp with time zone"


class Runner:
    """Runs cases through ``service`` on ``workgroup``'s engine (None: the default), one by one."""

    def __init__(
        self, service: QueryService, timeout: float = 60, workgroup: str | None = None
    ) -> None:
        self.service = service
        self.timeout = timeout
        self.workgroup = workgroup

    def run(self, case: Case) -> Outcome:
        try:
            execution_id = self.service.start_query_execution(case.sql, workgroup=self.workgroup)
        except InvalidRequest as refused:
            if case.error is not None:
                return Outcome(case, "passed", error=refused.message, why="both fail")
            return Outcome(case, "refused", error=refused.message, why="refused when started")
        execution = self._wait(execution_id)
        if execution.state != QueryState.SUCCEEDED:
            reason = execution.state_change_reason or execution.state.value
            if case.error is not None:
                return Outcome(case, "passed", error=reason, why="both fail")
            if REFUSAL in reason:  # refused by a value the text did not show (a pattern, bytes)
                return Outcome(case, "refused", error=reason, why="refused when it ran")
            return Outcome(case, "wrong", error=reason, why="failed where Athena answers")
        names, types, rows = self._result(execution_id, execution.output_location)
        outcome = Outcome(case, "wrong", types=types, rows=rows, names=names)
        if case.error is not None:
            outcome.why = "answered where Athena fails"
        elif types != [expected_type(t) for t in case.types]:
            outcome.why = "other types"
        elif (rows if case.ordered else _sorted(rows)) != (
            case.rows if case.ordered else _sorted(case.rows)
        ):
            outcome.why = "other values"
        elif case.names is not None and names != case.names:
            outcome.why = "other column names"
        else:
            outcome.status, outcome.why = "passed", "the same answer"
        return outcome

    def _wait(self, execution_id: str) -> Any:
        deadline = time.monotonic() + self.timeout
        while not (execution := self.service.get_query_execution(execution_id)).state.done:
            if time.monotonic() > deadline:
                self.service.stop_query_execution(execution_id)
                raise TimeoutError(f"no answer within {self.timeout} s")
            time.sleep(0.005)
        return execution

    def _result(self, execution_id: str, location: str) -> tuple[list[str], list[str], list[Row]]:
        rows: list[Row] = []
        token = None
        while True:
            page = self.service.get_query_results(execution_id, token, 1000)
            rows.extend(page.rows)
            token = page.next_token
            if token is None:
                break
        names = [c.name for c in page.columns]
        types = [type_text(c.type, c.precision, c.scale) for c in page.columns]
        # The same types in the result's .csv.metadata, which PyAthena's readers use.
        place = lake_place(self.service.settings, location + ".metadata")
        assert place is not None, location
        metadata = json.loads(self.service.storage.get(*place))
        stored = [type_text(c["type"], c["precision"], c["scale"]) for c in metadata["columns"]]
        if stored != types:
            raise AssertionError(f"the .csv.metadata says {stored}, the page {types}")
        return names, types, rows[1:]  # after Athena's labels row


def _sorted(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda row: [(v is None, v or "") for v in row])


def counts(outcomes: list[tuple[str, str]]) -> dict[str, Counter[str]]:
    """Per area, how many cases passed, were refused, were wrong: from (area, status) pairs."""
    table: dict[str, Counter[str]] = {}
    for area, status in outcomes:
        table.setdefault(area, Counter())[status] += 1
    return dict(sorted(table.items()))


def summary(table: dict[str, Counter[str]]) -> str:
    lines = [f"{'area':<12} {'passed':>7} {'refused':>8} {'wrong':>6}"]
    total: Counter[str] = Counter()
    for area, counter in table.items():
        total.update(counter)
        lines.append(
            f"{area:<12} {counter['passed']:>7} {counter['refused']:>8} {counter['wrong']:>6}"
        )
    lines.append(f"{'total':<12} {total['passed']:>7} {total['refused']:>8} {total['wrong']:>6}")
    return "\n".join(lines)


# -- the support table in docs/query.md ------------------------------------------------------

DOCS = Path(__file__).resolve().parents[3] / "docs" / "query.md"
BEGIN, END = "<!-- conformance:duckdb -->", "<!-- /conformance:duckdb -->"
# A row: area, cases, DuckDB's passed/refused/wrong, then Spark's (- where not counted yet).
_ROW = re.compile(
    r"^\| (\w+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|"
    r"(?: (\d+|-) \| (\d+|-) \| (\d+|-) \|)?$"
)
_HEADER = [
    "| area | cases | passed | refused | wrong | Spark: passed | refused | wrong |",
    "|---|---|---|---|---|---|---|---|",
]
Counts = dict[str, tuple[int, int, int]]


def _row(area: str, cases: int, duckdb: tuple[int, ...], spark: tuple[int, ...] | None) -> str:
    cells = [area, cases, *duckdb, *(spark or ("-", "-", "-"))]
    return "| " + " | ".join(map(str, cells)) + " |"


def support_block(outcomes: list[Outcome], spark: Counts | None = None) -> str:
    """The docs' table of counts per area (Spark's as given: a Spark run counts them), and
    each case refused on DuckDB with lakeward's reason."""
    table = counts([(o.case.area, o.status) for o in outcomes])
    lines = [BEGIN, "", *_HEADER]
    for area, counter in table.items():
        duckdb = (counter["passed"], counter["refused"], counter["wrong"])
        lines.append(_row(area, sum(counter.values()), duckdb, (spark or {}).get(area)))
    lines += ["", "Refused on DuckDB, with the reason lakeward gives:", ""]
    for outcome in outcomes:
        if outcome.status == "refused":
            reason = (outcome.error or "").replace("|", "\\|")
            lines.append(f"- {outcome.case.area}: `{outcome.case.sql}`: {reason}")
    return "\n".join([*lines, "", END])


def documented_counts(text: str, engine: str = "duckdb") -> Counts:
    """The (passed, refused, wrong) per area that docs/query.md's support table states."""
    block = text.partition(BEGIN)[2].partition(END)[0]
    first = 3 if engine == "duckdb" else 6
    found = {}
    for line in block.splitlines():
        match = _ROW.match(line.strip())
        if match and (match[first] or "-") != "-":
            found[match[1]] = (int(match[first]), int(match[first + 1]), int(match[first + 2]))
    return found


def with_spark_counts(text: str, spark: Counts) -> str:
    """docs/query.md's text with the support table's Spark cells set to ``spark``."""
    lines = []
    for line in text.splitlines(keepends=True):
        match = _ROW.match(line.strip())
        if match:
            duckdb = (int(match[3]), int(match[4]), int(match[5]))
            line = _row(match[1], int(match[2]), duckdb, spark.get(match[1])) + "\n"
        elif line.startswith("| area | cases |"):
            line = _HEADER[0] + "\n"
        elif line.startswith("|---|---|---|---|---|"):
            line = _HEADER[1] + "\n"
        lines.append(line)
    return "".join(lines)


def _write_docs() -> None:
    """Run every case on DuckDB and put the support block into docs/query.md."""
    import logging
    import tempfile

    from lakeward.config import load_settings

    logging.disable(logging.WARNING)  # refused queries are logged; here they are the point
    with tempfile.TemporaryDirectory() as directory:
        data = Path(directory) / "data"
        data.mkdir()
        service = QueryService(load_settings(data_dir=data, env={}))
        try:
            runner = Runner(service)
            outcomes = [runner.run(case) for case in load_cases()]
        finally:
            service.close()
    text = DOCS.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOCS} has no {BEGIN} ... {END} block to fill")
    before, _, rest = text.partition(BEGIN)
    after = rest.partition(END)[2]
    spark = documented_counts(text, "spark")  # kept: only a Spark run counts them
    DOCS.write_text(before + support_block(outcomes, spark) + after)
    print(summary(counts([(o.case.area, o.status) for o in outcomes])))


def _write_spark_docs(stack_data_dir: str) -> None:
    """Run every case on Spark, over a running stack, and put the counts into the table."""
    import logging
    import tempfile

    from lakeward.config import load_settings
    from lakeward.query.model import WorkGroup
    from tests.helpers import over_stack

    logging.disable(logging.WARNING)
    stack = load_settings(data_dir=stack_data_dir, env={})
    with tempfile.TemporaryDirectory() as directory:
        service = QueryService(over_stack(stack, Path(directory)), owner=True)
        try:
            service.put_work_group(WorkGroup(name="spark", engine="spark"))
            runner = Runner(service, workgroup="spark")
            outcomes = [runner.run(case) for case in load_cases()]
        finally:
            service.close()
    table = counts([(o.case.area, o.status) for o in outcomes])
    spark = {a: (c["passed"], c["refused"], c["wrong"]) for a, c in table.items()}
    DOCS.write_text(with_spark_counts(DOCS.read_text(), spark))
    print(summary(table))


if __name__ == "__main__":
    # python -m tests.query.conformance.suite: the DuckDB counts and refusals;
    # python -m tests.query.conformance.suite --spark DATA_DIR: the Spark counts, on the
    # running stack whose data directory is DATA_DIR (lakeward up --data-dir DATA_DIR).
    import sys

    if sys.argv[1:2] == ["--spark"] and len(sys.argv) == 3:
        _write_spark_docs(sys.argv[2])
    else:
        _write_docs()
