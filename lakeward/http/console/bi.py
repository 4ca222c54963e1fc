"""BI pages: data sources, datasets and their extracts, analyses, dashboards.

Thin over ``BiService``, which authorizes every call (owners, shares, the
caller's policies, and the catalog check that keeps sharing from widening
anyone's access to data). Definitions are built with plain forms, checked by
the service's own models; charts are drawn in the browser by static/charts.js
from the series that ``/api/bi`` computes.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response

from lakeward.access.arns import catalog_arn, quicksight_arn
from lakeward.access.sessions import Session
from lakeward.bi.model import KIND_NAMES, AnalysisSpec, Filter, Kind
from lakeward.bi.permissions import NOUNS
from lakeward.bi.service import BiService
from lakeward.errors import AccessDenied, InvalidRequest, LakewardError, ResourceNotFound
from lakeward.http.console.base import PREFIX, Console, NavItem, redirect, signed_in
from lakeward.http.console.forms import (
    FIELD_OPS,
    SORTS,
    VISUAL_TYPES,
    dataset_spec_from,
    id_from_name,
    visual_from,
    visual_values,
)
from lakeward.query.metadata import MAX_QUERY_LENGTH

DASHBOARDS = NavItem(
    "dashboards",
    "Dashboards",
    f"{PREFIX}/dashboards",
    "quicksight:ListDashboards",
    quicksight_arn("dashboard", "*"),
)
DATASETS = NavItem(
    "datasets",
    "Datasets",
    f"{PREFIX}/datasets",
    "quicksight:ListDataSets",
    quicksight_arn("dataset", "*"),
)

USE_CATALOG = "lakeward:UseCatalog"
# The console's path of each kind of BI object that can be shared.
SHAREABLE: dict[str, Kind] = {
    "analyses": "analysis",
    "dashboards": "dashboard",
    "datasets": "dataset",
}


def bi_of(request: Request) -> BiService:
    service = getattr(request.app.state, "bi_service", None)
    if not isinstance(service, BiService):
        raise ResourceNotFound("the BI service is not running in this server")
    return service


@contextmanager
def unseen_as_missing(kind: Kind, object_id: str) -> Iterator[None]:
    """A dashboard, analysis or dataset the user may not open is, on its page, one that is
    not there, as a code host answers for a private repository: the page neither tells
    whether it exists nor asks an administrator for a policy, but says who can open it.
    The refusal is audited as before, and the API still answers AccessDenied."""
    try:
        yield
    except AccessDenied as refused:
        raise ResourceNotFound(
            f"There is no {KIND_NAMES[kind]} {object_id}, or it is not shared with you: "
            f"its owner can share it"
        ) from refused


def bi_router(console: Console) -> APIRouter:
    router = APIRouter(prefix=PREFIX, include_in_schema=False)
    Signed = Annotated[Session, Depends(signed_in(console))]
    Bi = Annotated[BiService, Depends(bi_of)]

    # -- dashboards and analyses ----------------------------------------------

    @router.get("/dashboards")
    def dashboards(request: Request, session: Signed, bi: Bi) -> HTMLResponse:
        return console.render(
            request,
            "dashboards.html",
            session,
            title="Dashboards",
            page=DASHBOARDS.key,
            dashboards=bi.list_dashboards(session.user),
            analyses=bi.list_analyses(session.user),
        )

    @router.get("/dashboards/{dashboard_id}")
    def dashboard(request: Request, dashboard_id: str, session: Signed, bi: Bi) -> HTMLResponse:
        with unseen_as_missing("dashboard", dashboard_id):
            found = bi.get_dashboard(session.user, dashboard_id)
        owner, shares = bi.get_permissions(session.user, "dashboard", dashboard_id)
        may = bi.may(session.user, "dashboard", dashboard_id, owner)
        return console.render(
            request,
            "sheet.html",
            session,
            title=found.name,
            page=DASHBOARDS.key,
            kind="dashboard",
            item=found,
            definition=found.definition,
            filter_groups=filter_groups(found.definition),
            visual_specs=visual_specs,
            owner=owner,
            shares=shares,
            share_path="dashboards",
            item_id=found.id,
            series_base=f"/api/bi/dashboards/{found.id}/visuals/",
            versions=bi.list_dashboard_versions(session.user, dashboard_id),
            may=may,
        )

    @router.get("/analyses/{analysis_id}")
    def analysis(request: Request, analysis_id: str, session: Signed, bi: Bi) -> HTMLResponse:
        with unseen_as_missing("analysis", analysis_id):
            found = bi.get_analysis(session.user, analysis_id)
        dataset = bi.get_dataset(session.user, found.spec.dataset_id)
        owner, shares = bi.get_permissions(session.user, "analysis", analysis_id)
        may = bi.may(session.user, "analysis", analysis_id, owner)
        return console.render(
            request,
            "sheet.html",
            session,
            title=found.spec.name,
            page=DASHBOARDS.key,
            kind="analysis",
            item=found,
            definition=found.spec,
            dataset=dataset,
            shares=shares,
            owner=owner,
            visual_types=VISUAL_TYPES,
            sorts=SORTS,
            visual_values=visual_values,
            may=may,
            filter_groups=filter_groups(found.spec),
            visual_specs=visual_specs,
            share_path="analyses",
            item_id=found.id,
            series_base=f"/api/bi/analyses/{found.id}/visuals/",
        )

    @router.get("/analyses/new/{dataset_id}")
    def new_analysis(request: Request, dataset_id: str, session: Signed, bi: Bi) -> HTMLResponse:
        with unseen_as_missing("dataset", dataset_id):
            dataset = bi.get_dataset(session.user, dataset_id)
        return console.render(
            request,
            "analysis_new.html",
            session,
            title="New analysis",
            page=DASHBOARDS.key,
            dataset=dataset,
            visual_types=VISUAL_TYPES,
            sorts=SORTS,
            values={},
        )

    @router.post("/analyses/new/{dataset_id}")
    async def create_analysis(
        request: Request, dataset_id: str, session: Signed, bi: Bi
    ) -> Response:
        form = await request.form()
        dataset = bi.get_dataset(session.user, dataset_id)
        values = {k: str(v) for k, v in form.items()}
        try:
            visual = visual_from(form, "v1")
            spec = {
                "name": values.get("name", "").strip() or "Untitled analysis",
                "dataset_id": dataset_id,
                "sheets": [{"id": "sheet1", "title": "Sheet 1", "visuals": [visual]}],
            }
            analysis_id = values.get("id", "").strip() or id_from_name(values.get("name", ""))
            bi.create_analysis(session.user, analysis_id, spec)
        except (LakewardError, ValueError) as exc:
            return console.render(
                request,
                "analysis_new.html",
                session,
                status=400,
                title="New analysis",
                page=DASHBOARDS.key,
                dataset=dataset,
                visual_types=VISUAL_TYPES,
                sorts=SORTS,
                values=values,
                error=_message(exc),
            )
        return redirect(f"/analyses/{analysis_id}")

    @router.post("/analyses/{analysis_id}/visuals")
    async def add_visual(request: Request, analysis_id: str, session: Signed, bi: Bi) -> Response:
        form = await request.form()
        found = bi.get_analysis(session.user, analysis_id)
        spec = found.spec.model_dump(mode="json")
        taken = {v["id"] for s in spec["sheets"] for v in s["visuals"]}
        visual_id = next(f"v{n}" for n in range(1, 1000) if f"v{n}" not in taken)
        try:
            spec["sheets"][0]["visuals"].append(visual_from(form, visual_id))
            bi.update_analysis(session.user, analysis_id, spec)
        except (LakewardError, ValueError) as exc:
            return redirect(f"/analyses/{analysis_id}", error=_message(exc))
        return redirect(f"/analyses/{analysis_id}", done=f"added visual {visual_id}")

    @router.post("/analyses/{analysis_id}/publish")
    async def publish(request: Request, analysis_id: str, session: Signed, bi: Bi) -> Response:
        form = await request.form()
        name = str(form.get("name") or "") or None
        dashboard_id = str(form.get("dashboard_id") or "") or None
        published = bi.publish_dashboard(session.user, analysis_id, dashboard_id, name)
        return redirect(
            f"/dashboards/{published.id}", done=f"published version {published.version}"
        )

    @router.post("/{kind}/{resource_id}/shares")
    async def share(
        request: Request, kind: str, resource_id: str, session: Signed, bi: Bi
    ) -> Response:
        if kind not in SHAREABLE:
            raise ResourceNotFound(f"nothing to share at {kind}")
        form = await request.form()
        principal = str(form.get("principal") or "").strip()
        role = str(form.get("role") or "viewer")
        _owner, shares = bi.get_permissions(session.user, SHAREABLE[kind], resource_id)
        wanted = [s.model_dump() for s in shares if s.principal != principal]
        if not form.get("remove"):
            wanted.append({"principal": principal, "role": role})
        try:
            bi.set_permissions(session.user, SHAREABLE[kind], resource_id, wanted)
        except InvalidRequest as exc:
            return redirect(f"/{kind}/{resource_id}", error=exc.message)
        done = f"sharing of {resource_id} updated"
        catalog, blind = ("", []) if form.get("remove") else bi.shared_without_data(
            SHAREABLE[kind], resource_id, principal)  # fmt: skip
        if blind:
            return redirect(
                f"/{kind}/{resource_id}",
                done=done,
                warning=f"{', '.join(blind)} may not use the catalog {catalog} its data comes "
                "from (lakeward:UseCatalog): they will see it without its data until an "
                "administrator grants that",
            )
        return redirect(f"/{kind}/{resource_id}", done=done)

    # -- data sources and datasets ---------------------------------------------

    @router.get("/datasets")
    def datasets(request: Request, session: Signed, bi: Bi) -> HTMLResponse:
        found = bi.list_datasets(session.user)
        extracts = {d.id: bi.get_extract(session.user, d.id) for d in found}
        # Building is offered over the catalogs the user may use only.
        names = [c.name for c in bi.queries.list_data_catalogs()]
        usable = [n for n in names if console.may(session.user, USE_CATALOG, catalog_arn(n))]
        return console.render(
            request,
            "datasets.html",
            session,
            title="Datasets",
            page=DATASETS.key,
            datasets=found,
            extracts=extracts,
            sources=bi.list_data_sources(session.user),
            catalogs=usable,
            can_build=bool(usable),
            may_of=lambda kind, item: bi.may(session.user, kind, item.id, item.owner)(
                f"{'Delete' if kind == 'dataset' else 'Update'}{NOUNS[kind]}"
            ),
        )

    @router.post("/data-sources")
    async def create_data_source(request: Request, session: Signed, bi: Bi) -> Response:
        form = await request.form()
        try:
            source = bi.create_data_source(
                session.user,
                str(form.get("id") or "").strip() or id_from_name(str(form.get("name") or "")),
                str(form.get("name") or "").strip(),
                str(form.get("catalog") or "").strip(),
            )
            source = bi.validate_data_source(session.user, source.id)
        except InvalidRequest as exc:
            return redirect("/datasets", error=exc.message)
        if source.status != "VALID":
            return redirect("/datasets", error=f"{source.id}: {source.status_message}")
        return redirect("/datasets", done=f"data source {source.id} created and validated")

    @router.post("/data-sources/{source_id}/validate")
    def validate(source_id: str, session: Signed, bi: Bi) -> Response:
        source = bi.validate_data_source(session.user, source_id)
        if source.status != "VALID":
            return redirect("/datasets", error=f"{source.id}: {source.status_message}")
        return redirect("/datasets", done=f"data source {source.id}: {source.status_message}")

    def builder(
        request: Request, session: Session, bi: BiService, status: int = 200, **context: Any
    ) -> HTMLResponse:
        return console.render(
            request,
            "dataset_new.html",
            session,
            status=status,
            title="New dataset",
            page=DATASETS.key,
            sources=bi.list_data_sources(session.user),
            field_ops=FIELD_OPS,
            **{"values": {}, "ops": [], "preview": None, "error": "", **context},
        )

    @router.get("/datasets/new")
    def new_dataset(
        request: Request,
        session: Signed,
        bi: Bi,
        sql: Annotated[str, Query(max_length=MAX_QUERY_LENGTH)] = "",
        database: Annotated[str, Query(max_length=128)] = "",
        catalog: Annotated[str, Query(max_length=128)] = "",
    ) -> HTMLResponse:
        """The dataset form; from the query editor's "Chart this result", filled with the
        query, its database and a data source over its catalog, and going on to a chart."""
        if not sql:
            return builder(request, session, bi)
        sources = bi.list_data_sources(session.user)
        over = [s.id for s in sources if s.catalog.lower() == catalog.lower()]
        values = {
            "source_kind": "sql",
            "sql": sql,
            "database": database or "default",
            "data_source_id": over[0] if over else "",
            "then": "chart",
        }
        return builder(request, session, bi, values=values)

    @router.post("/datasets/new")
    async def create_dataset(request: Request, session: Signed, bi: Bi) -> Response:
        form = await request.form()
        values = {k: str(v) for k, v in form.items() if not k.startswith("op_")}
        spec, ops = dataset_spec_from(form)
        dataset_id = values.get("id", "").strip() or id_from_name(values.get("name", ""))
        try:
            if form.get("action") == "preview":
                preview = bi.preview_dataset(session.user, spec, limit=20)
                return builder(request, session, bi, values=values, ops=ops, preview=preview)
            bi.create_dataset(session.user, dataset_id, spec)
        except LakewardError as exc:
            return builder(request, session, bi, 400, values=values, ops=ops, error=_message(exc))
        if values.get("then") == "chart":
            return redirect(f"/analyses/new/{dataset_id}", done=f"dataset {dataset_id} created")
        return redirect(f"/datasets/{dataset_id}", done=f"dataset {dataset_id} created")

    @router.get("/datasets/{dataset_id}")
    def dataset(request: Request, dataset_id: str, session: Signed, bi: Bi) -> HTMLResponse:
        with unseen_as_missing("dataset", dataset_id):
            found = bi.get_dataset(session.user, dataset_id)
        preview = bi.preview_dataset(session.user, dataset_id, limit=20)
        owner, shares = bi.get_permissions(session.user, "dataset", dataset_id)
        return console.render(
            request,
            "dataset.html",
            session,
            title=found.spec.name,
            page=DATASETS.key,
            dataset=found,
            extract=bi.get_extract(session.user, dataset_id),
            preview=preview,
            owner=owner,
            shares=shares,
            can_refresh=owner == session.user
            or console.may(session.user, "quicksight:CreateIngestion", found.arn),
            may=bi.may(session.user, "dataset", dataset_id, owner),
            share_path="datasets",
            item_id=found.id,
        )

    @router.post("/datasets/{dataset_id}/refresh")
    def refresh(dataset_id: str, session: Signed, bi: Bi) -> Response:
        extract = bi.refresh_extract(session.user, dataset_id)
        return redirect(
            f"/datasets/{dataset_id}",
            done=f"extract refreshed: {extract.row_count:,} rows in {extract.duration_ms} ms",
        )

    return router


def visual_specs(spec: AnalysisSpec) -> dict[str, dict[str, Any]]:
    """What charts.js draws each visual with (fields, titles, formats, labels), by id."""
    return {
        v.id: v.model_dump(mode="json", exclude={"filters"}) for s in spec.sheets for v in s.visuals
    }


def filter_groups(spec: AnalysisSpec) -> list[tuple[str, str, Filter]]:
    """Every filter of a definition with where it applies: ``sheet`` or a visual's id."""
    groups: list[tuple[str, str, Filter]] = []
    for sheet in spec.sheets:
        groups += [("sheet", "All visuals", f) for f in sheet.filters]
        for visual in sheet.visuals:
            groups += [(visual.id, visual.title or visual.id, f) for f in visual.filters]
    return groups


def _message(exc: Exception) -> str:
    return exc.message if isinstance(exc, LakewardError) else str(exc)
