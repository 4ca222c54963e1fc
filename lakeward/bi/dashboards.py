"""Analyses and dashboards: sheets of visuals over one dataset, published read-only.

An analysis is the editable definition; publishing copies it into a
dashboard as a new version, kept with the earlier ones: a dashboard shows one
version and can go back to an earlier one. A viewer's date pickers and multi-selects
arrive as filters that replace the saved ones on the same field. Part of
``BiService``; kept apart so that each module stays about one thing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from lakeward.bi.datasets import arrow_type_of
from lakeward.bi.model import (
    Analysis,
    AnalysisSpec,
    Dashboard,
    DashboardVersion,
    Dataset,
    DataSource,
    Filter,
    Series,
    Visual,
    check_id,
    now,
    parse,
    parse_filters,
    with_arn,
)
from lakeward.bi.permissions import Caller, Gate
from lakeward.bi.store import BiStore
from lakeward.bi.visuals import compute_series, merge_filters
from lakeward.config import Settings
from lakeward.errors import InvalidRequest, ResourceNotFound

Mode = Literal["auto", "extract", "live"]


class AnalysesAndDashboards:
    """The analysis and dashboard calls of ``BiService``."""

    settings: Settings
    store: BiStore
    gate: Gate

    if TYPE_CHECKING:

        def _series(
            self, dataset: Dataset, source: DataSource, visual: Visual, filters: list[Filter],
            mode: Mode,
        ) -> Series: ...  # fmt: skip

    # -- analyses -----------------------------------------------------------

    def list_analyses(self, principal: str) -> list[Analysis]:
        found: list[Analysis] = self.gate.listed(principal, "analysis")
        return found

    def create_analysis(
        self, principal: str, analysis_id: str, spec: AnalysisSpec | dict[str, Any]
    ) -> Analysis:
        caller = self.gate.caller(principal)
        check_id("analysis id", analysis_id)
        spec = spec if isinstance(spec, AnalysisSpec) else parse(AnalysisSpec, spec, "analysis")
        self.gate.create(caller, "analysis", analysis_id)
        self._check_spec(caller, spec)
        created = now()
        analysis = Analysis(analysis_id, spec, caller.name, created, created)
        self.store.add("analysis", analysis)
        return with_arn(analysis, "analysis")

    def update_analysis(
        self, principal: str, analysis_id: str, spec: AnalysisSpec | dict[str, Any]
    ) -> Analysis:
        caller = self.gate.caller(principal)
        analysis = self.gate.get(
            caller, "analysis", analysis_id, "UpdateAnalysis", self.store.analysis
        )
        spec = spec if isinstance(spec, AnalysisSpec) else parse(AnalysisSpec, spec, "analysis")
        self._check_spec(caller, spec)
        analysis.spec, analysis.updated = spec, now()
        self.store.put("analysis", analysis)
        return with_arn(analysis, "analysis")

    def _check_spec(self, caller: Caller, spec: AnalysisSpec) -> None:
        """The dataset may be used by the caller, and every visual's fields exist in it."""
        dataset = self.gate.get(
            caller, "dataset", spec.dataset_id, "PassDataSet", self.store.dataset
        )
        empty = pa.table({c.name: pa.array([], arrow_type_of(c.type)) for c in dataset.columns})
        for sheet in spec.sheets:
            for visual in sheet.visuals:
                compute_series(empty, dataset.columns, visual, sheet.filters, "extract")

    def get_analysis(self, principal: str, analysis_id: str) -> Analysis:
        caller = self.gate.caller(principal)
        return with_arn(
            self.gate.get(caller, "analysis", analysis_id, "DescribeAnalysis", self.store.analysis),
            "analysis",
        )

    def delete_analysis(self, principal: str, analysis_id: str) -> None:
        caller = self.gate.caller(principal)
        self.gate.get(caller, "analysis", analysis_id, "DeleteAnalysis", self.store.analysis)
        self.store.delete("analysis", analysis_id)

    def analysis_series(
        self, principal: str, analysis_id: str, visual_id: str,
        filters: Sequence[Filter | dict[str, Any]] = (), mode: Mode = "auto",
    ) -> Series:  # fmt: skip
        caller = self.gate.caller(principal)
        analysis = self.gate.get(
            caller, "analysis", analysis_id, "QueryAnalysis", self.store.analysis
        )
        return self._definition_series(caller, analysis.spec, visual_id, filters, mode,
                                       f"analysis {analysis_id}", data_check=True)  # fmt: skip

    def publish_dashboard(
        self, principal: str, analysis_id: str, dashboard_id: str | None = None,
        name: str | None = None,
    ) -> Dashboard:  # fmt: skip
        """Publish the analysis as a dashboard (a new one, or a new version of ``dashboard_id``)."""
        caller = self.gate.caller(principal)
        analysis = self.gate.get(
            caller, "analysis", analysis_id, "DescribeAnalysis", self.store.analysis
        )
        dashboard_id = dashboard_id or analysis_id
        check_id("dashboard id", dashboard_id)
        existing = self.store.dashboard(dashboard_id)
        if existing is None:
            self.gate.create(caller, "dashboard", dashboard_id)
            version, owner = 1, caller.name
        else:
            self.gate.check(caller, "dashboard", dashboard_id, existing.owner, "CreateDashboard")
            # After going back to an earlier version, the next one still comes after the last.
            known = [v.version for v in self.store.dashboard_versions(dashboard_id)]
            version, owner = max([existing.version, *known]) + 1, existing.owner
        dashboard = Dashboard(
            dashboard_id, (name or analysis.spec.name).strip()[:128] or dashboard_id,
            analysis_id, analysis.spec, version, owner, now(),
        )  # fmt: skip
        self.store.publish(dashboard, caller.name, new=existing is None)
        return with_arn(dashboard, "dashboard")

    def list_dashboard_versions(self, principal: str, dashboard_id: str) -> list[DashboardVersion]:
        """Every published version of the dashboard, oldest first."""
        caller = self.gate.caller(principal)
        self.gate.get(
            caller, "dashboard", dashboard_id, "ListDashboardVersions", self.store.dashboard
        )
        return self.store.dashboard_versions(dashboard_id)

    def set_dashboard_version(self, principal: str, dashboard_id: str, version: int) -> Dashboard:
        """Show an earlier (or later) published version again, as QuickSight's
        UpdateDashboardPublishedVersion does; no version is made or lost."""
        caller = self.gate.caller(principal)
        dashboard = self.gate.get(
            caller, "dashboard", dashboard_id, "UpdateDashboardPublishedVersion",
            self.store.dashboard,
        )  # fmt: skip
        found = next(
            (v for v in self.store.dashboard_versions(dashboard_id) if v.version == version), None
        )
        if found is None:
            raise ResourceNotFound(f"dashboard {dashboard_id} has no version {version}")
        dashboard.version, dashboard.name = found.version, found.name
        dashboard.analysis_id, dashboard.definition = found.analysis_id, found.definition
        dashboard.published = found.published
        self.store.put("dashboard", dashboard)
        return with_arn(dashboard, "dashboard")

    def rename_dashboard(self, principal: str, dashboard_id: str, name: str) -> Dashboard:
        caller = self.gate.caller(principal)
        dashboard = self.gate.get(
            caller, "dashboard", dashboard_id, "UpdateDashboard", self.store.dashboard
        )
        if not name.strip() or len(name) > 128:
            raise InvalidRequest("name: give 1 to 128 characters")
        dashboard.name = name.strip()
        self.store.put("dashboard", dashboard)
        return with_arn(dashboard, "dashboard")

    # -- dashboards ---------------------------------------------------------

    def list_dashboards(self, principal: str) -> list[Dashboard]:
        found: list[Dashboard] = self.gate.listed(principal, "dashboard")
        return found

    def get_dashboard(self, principal: str, dashboard_id: str) -> Dashboard:
        """The dashboard's definition (its data comes from ``dashboard_series``)."""
        caller = self.gate.caller(principal)
        dashboard = self.gate.get(
            caller, "dashboard", dashboard_id, "DescribeDashboard", self.store.dashboard
        )
        return with_arn(dashboard, "dashboard")

    def delete_dashboard(self, principal: str, dashboard_id: str) -> None:
        caller = self.gate.caller(principal)
        self.gate.get(caller, "dashboard", dashboard_id, "DeleteDashboard", self.store.dashboard)
        self.store.delete("dashboard", dashboard_id)

    def dashboard_series(
        self, principal: str, dashboard_id: str, visual_id: str,
        filters: Sequence[Filter | dict[str, Any]] = (), mode: Mode = "auto",
    ) -> Series:  # fmt: skip
        """One visual's data; ``filters`` (the viewer's controls) replace saved ones on a field."""
        caller = self.gate.caller(principal)
        dashboard = self.gate.get(
            caller, "dashboard", dashboard_id, "QueryDashboard", self.store.dashboard
        )
        return self._definition_series(
            caller, dashboard.definition, visual_id, filters, mode,
            f"dashboard {dashboard.name}", data_check=not self.settings.bi.sharing_grants_data,
        )  # fmt: skip

    def _definition_series(
        self, caller: Caller, spec: AnalysisSpec, visual_id: str,
        filters: Sequence[Filter | dict[str, Any]], mode: Mode, what: str, *, data_check: bool,
    ) -> Series:  # fmt: skip
        found = next(((s, v) for s in spec.sheets for v in s.visuals if v.id == visual_id), None)
        if found is None:
            raise ResourceNotFound(f"{what} has no visual {visual_id}")
        sheet, visual = found
        dataset = self.store.dataset(spec.dataset_id)
        source = self.store.data_source(dataset.spec.data_source_id) if dataset else None
        if dataset is None or source is None:
            raise ResourceNotFound(f"{what}: its dataset {spec.dataset_id} is gone")
        if data_check:
            self.gate.check_data(caller, source, dataset.spec, what)
        merged = merge_filters(sheet.filters, visual.filters, parse_filters(filters))
        # The viewer's filters win over the visual's own, so they go last.
        return self._series(
            dataset, source, visual.model_copy(update={"filters": []}), merged, mode
        )
