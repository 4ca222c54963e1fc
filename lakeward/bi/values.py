"""The distinct values of a field, for a category filter's list (part of ``BiService``).

A viewer's multi-select offers what the data holds, not only the values saved
in the filter: "France" can be added to a chart saved with six countries. The
values come from the same rows a visual reads (the extract, or live), with the
same checks as the visual's data (``QueryDashboard`` / ``QueryAnalysis``, and
the catalog check unless sharing grants data).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from lakeward.bi.model import AnalysisSpec, Dataset, DataSource
from lakeward.bi.permissions import Gate
from lakeward.bi.store import BiStore
from lakeward.config import Settings
from lakeward.errors import InvalidRequest, ResourceNotFound

MAX_VALUES = 1000


@dataclass(frozen=True)
class FieldValues:
    field: str
    values: list[str | int | float | bool]
    truncated: bool  # more values match than were returned: narrow with ``search``

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "values": self.values, "truncated": self.truncated}


class DistinctValues:
    """The ``field_values`` call of ``BiService``."""

    settings: Settings
    store: BiStore
    gate: Gate

    if TYPE_CHECKING:

        def _rows(
            self, dataset: Dataset, source: DataSource, mode: Literal["auto", "extract", "live"]
        ) -> tuple[pa.Table, list[Any], Literal["extract", "live"]]: ...

    def field_values(
        self, principal: str, kind: Literal["analysis", "dashboard"], object_id: str,
        field: str, search: str = "", limit: int = 200,
    ) -> FieldValues:  # fmt: skip
        """Sorted distinct non-null values of ``field`` holding ``search`` (any case)."""
        if not 1 <= limit <= MAX_VALUES:
            raise InvalidRequest(f"limit: between 1 and {MAX_VALUES}, not {limit}")
        caller = self.gate.caller(principal)
        spec: AnalysisSpec
        if kind == "dashboard":
            dashboard = self.gate.get(
                caller, "dashboard", object_id, "QueryDashboard", self.store.dashboard
            )
            spec, what = dashboard.definition, f"dashboard {dashboard.name}"
            data_check = not self.settings.bi.sharing_grants_data
        else:
            analysis = self.gate.get(
                caller, "analysis", object_id, "QueryAnalysis", self.store.analysis
            )
            spec, what, data_check = analysis.spec, f"analysis {object_id}", True
        dataset = self.store.dataset(spec.dataset_id)
        source = self.store.data_source(dataset.spec.data_source_id) if dataset else None
        if dataset is None or source is None:
            raise ResourceNotFound(f"{what}: its dataset {spec.dataset_id} is gone")
        if data_check:
            self.gate.check_data(caller, source, dataset.spec, what)
        names = [c.name for c in dataset.columns]
        if field not in names:
            raise InvalidRequest(
                f"field: {what}'s dataset has no field {field!r} ({', '.join(names)})"
            )
        table, _columns, _origin = self._rows(dataset, source, "auto")
        values = [_plain(v) for v in pc.unique(table.column(field).drop_null()).to_pylist()]
        needle = search.casefold()
        found = sorted(
            (v for v in values if needle in str(v).casefold()),
            key=lambda v: (isinstance(v, str), v if not isinstance(v, str) else v.casefold()),
        )
        return FieldValues(field, found[:limit], len(found) > limit)


def _plain(value: object) -> str | int | float | bool:
    """A value as the filter's JSON holds it (dates and times as ISO text)."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, str | int | float | bool):
        return value
    return str(value)
