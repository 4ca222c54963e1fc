"""The BI JSON API under ``/api/bi``: thin routes over ``BiService``.

Callers are console users: the session cookie identifies them and every
state-changing request (POST, PUT, DELETE) must carry the session's CSRF
token in ``X-CSRF-Token``. Errors come back in the server's one error shape.
Paths and bodies are listed in docs/bi.md.
"""

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request

from lakeward.access.sessions import Session, Sessions
from lakeward.bi.dashboards import Mode
from lakeward.bi.model import Kind
from lakeward.bi.service import BiService
from lakeward.errors import InvalidRequest, ResourceNotFound
from lakeward.http.body import DEFAULT_MAX_BODY_BYTES, read_body
from lakeward.http.sessions import session_dependency


async def _json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object, read up to ``DEFAULT_MAX_BODY_BYTES`` (never buffering more)."""
    data = await read_body(request, DEFAULT_MAX_BODY_BYTES)
    try:
        value = json.loads(data or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidRequest("the request body must be a JSON object")
    return value


JsonBody = Annotated[dict[str, Any], Depends(_json_body)]
_KINDS: dict[str, Kind] = {"data-sources": "datasource", "datasets": "dataset",
                           "analyses": "analysis", "dashboards": "dashboard"}  # fmt: skip


def _filters(text: str | None) -> list[dict[str, Any]]:
    if not text:
        return []
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(f"filters: not valid JSON ({exc.msg} at {exc.pos})") from None
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise InvalidRequest("filters: give a JSON list of filter objects")
    return value


def _id(body: dict[str, Any]) -> str:
    value = body.pop("id", None)
    if not isinstance(value, str):
        raise InvalidRequest("id: required, a string")
    return value


def bi_router(service: BiService, sessions: Sessions) -> APIRouter:
    router = APIRouter(prefix="/api/bi", tags=["bi"])

    signed_in = session_dependency(sessions)

    async def user(session: Annotated[Session, Depends(signed_in)]) -> str:
        return session.user

    User = Annotated[str, Depends(user)]
    ModeQ = Annotated[str, Query(description="auto, extract or live")]

    # -- data sources -------------------------------------------------------

    @router.get("/data-sources")
    def list_data_sources(who: User) -> list[dict[str, Any]]:
        return [s.to_json() for s in service.list_data_sources(who)]

    @router.post("/data-sources")
    def create_data_source(who: User, body: JsonBody) -> dict[str, Any]:
        """Body: ``{"id", "name", "catalog", "workgroup"?}``."""
        source_id = _id(body)
        unknown = set(body) - {"name", "catalog", "workgroup"}
        if unknown:
            raise InvalidRequest(f"unknown field(s): {', '.join(sorted(unknown))}")
        for key in ("name", "catalog"):
            if not isinstance(body.get(key), str):
                raise InvalidRequest(f"{key}: required, a string")
        return service.create_data_source(
            who, source_id, body["name"], body["catalog"], str(body.get("workgroup", "primary"))
        ).to_json()

    @router.get("/data-sources/{source_id}")
    def get_data_source(who: User, source_id: str) -> dict[str, Any]:
        return service.get_data_source(who, source_id).to_json()

    @router.put("/data-sources/{source_id}")
    def update_data_source(who: User, source_id: str, body: JsonBody) -> dict[str, Any]:
        """Body: any of ``{"name", "catalog", "workgroup"}``; a new catalog needs validating."""
        body.pop("id", None)
        unknown = set(body) - {"name", "catalog", "workgroup"}
        if unknown:
            raise InvalidRequest(f"unknown field(s): {', '.join(sorted(unknown))}")
        for key, value in body.items():
            if not isinstance(value, str):
                raise InvalidRequest(f"{key}: a string")
        return service.update_data_source(who, source_id, **body).to_json()

    @router.delete("/data-sources/{source_id}")
    def delete_data_source(who: User, source_id: str) -> dict[str, str]:
        service.delete_data_source(who, source_id)
        return {"deleted": source_id}

    @router.post("/data-sources/{source_id}/validate")
    def validate_data_source(who: User, source_id: str) -> dict[str, Any]:
        return service.validate_data_source(who, source_id).to_json()

    # -- datasets -----------------------------------------------------------

    @router.get("/datasets")
    def list_datasets(who: User) -> list[dict[str, Any]]:
        return [d.to_json() for d in service.list_datasets(who)]

    @router.post("/datasets")
    def create_dataset(who: User, body: JsonBody) -> dict[str, Any]:
        """Body: ``{"id", ...DatasetSpec}``; a SPICE dataset is imported before this returns."""
        dataset_id = _id(body)
        dataset = service.create_dataset(who, dataset_id, body)
        return {**dataset.to_json(), "extract": service.get_extract(who, dataset_id).to_json()}

    @router.post("/datasets/preview")
    def preview_new_dataset(who: User, body: JsonBody) -> dict[str, Any]:
        """Body: a DatasetSpec (not saved), optional ``limit``; runs the query live."""
        limit = body.pop("limit", 100)
        if not isinstance(limit, int):
            raise InvalidRequest("limit: a whole number")
        return service.preview_dataset(who, body, limit).to_json()

    @router.get("/datasets/{dataset_id}")
    def get_dataset(who: User, dataset_id: str) -> dict[str, Any]:
        dataset = service.get_dataset(who, dataset_id)
        return {**dataset.to_json(), "extract": service.get_extract(who, dataset_id).to_json()}

    @router.put("/datasets/{dataset_id}")
    def update_dataset(who: User, dataset_id: str, body: JsonBody) -> dict[str, Any]:
        body.pop("id", None)
        dataset = service.update_dataset(who, dataset_id, body)
        return {**dataset.to_json(), "extract": service.get_extract(who, dataset_id).to_json()}

    @router.delete("/datasets/{dataset_id}")
    def delete_dataset(who: User, dataset_id: str) -> dict[str, str]:
        service.delete_dataset(who, dataset_id)
        return {"deleted": dataset_id}

    @router.get("/datasets/{dataset_id}/preview")
    def preview_dataset(who: User, dataset_id: str, limit: int = 100) -> dict[str, Any]:
        return service.preview_dataset(who, dataset_id, limit).to_json()

    @router.get("/datasets/{dataset_id}/extract")
    def get_extract(who: User, dataset_id: str) -> dict[str, Any]:
        return service.get_extract(who, dataset_id).to_json()

    @router.post("/datasets/{dataset_id}/refresh")
    def refresh_extract(who: User, dataset_id: str) -> dict[str, Any]:
        return service.refresh_extract(who, dataset_id).to_json()

    @router.post("/datasets/{dataset_id}/series")
    def dataset_series(who: User, dataset_id: str, body: JsonBody) -> dict[str, Any]:
        """Body: ``{"visual": Visual, "filters"?: [Filter], "mode"?: auto|extract|live}``."""
        visual = body.get("visual")
        if not isinstance(visual, dict):
            raise InvalidRequest("visual: required, an object")
        filters = body.get("filters", [])
        if not isinstance(filters, list):
            raise InvalidRequest("filters: a list of filter objects")
        mode = _mode(body.get("mode", "auto"))
        return service.dataset_series(who, dataset_id, visual, filters, mode).to_json()

    # -- analyses and dashboards --------------------------------------------

    @router.get("/analyses")
    def list_analyses(who: User) -> list[dict[str, Any]]:
        return [a.to_json() for a in service.list_analyses(who)]

    @router.post("/analyses")
    def create_analysis(who: User, body: JsonBody) -> dict[str, Any]:
        """Body: ``{"id", ...AnalysisSpec}``."""
        analysis_id = _id(body)
        return service.create_analysis(who, analysis_id, body).to_json()

    @router.get("/analyses/{analysis_id}")
    def get_analysis(who: User, analysis_id: str) -> dict[str, Any]:
        return service.get_analysis(who, analysis_id).to_json()

    @router.put("/analyses/{analysis_id}")
    def update_analysis(who: User, analysis_id: str, body: JsonBody) -> dict[str, Any]:
        body.pop("id", None)
        return service.update_analysis(who, analysis_id, body).to_json()

    @router.delete("/analyses/{analysis_id}")
    def delete_analysis(who: User, analysis_id: str) -> dict[str, str]:
        service.delete_analysis(who, analysis_id)
        return {"deleted": analysis_id}

    @router.get("/analyses/{analysis_id}/visuals/{visual_id}/series")
    def analysis_series(
        who: User, analysis_id: str, visual_id: str, mode: ModeQ = "auto",
        filters: Annotated[str | None, Query()] = None,
    ) -> dict[str, Any]:  # fmt: skip
        return service.analysis_series(
            who, analysis_id, visual_id, _filters(filters), _mode(mode)
        ).to_json()

    @router.post("/analyses/{analysis_id}/publish")
    def publish(who: User, analysis_id: str, body: JsonBody) -> dict[str, Any]:
        """Body: ``{"dashboard_id"?, "name"?}``; publishing again makes a new version."""
        dashboard_id, name = body.get("dashboard_id"), body.get("name")
        if dashboard_id is not None and not isinstance(dashboard_id, str):
            raise InvalidRequest("dashboard_id: a string")
        if name is not None and not isinstance(name, str):
            raise InvalidRequest("name: a string")
        return service.publish_dashboard(who, analysis_id, dashboard_id, name).to_json()

    @router.get("/dashboards")
    def list_dashboards(who: User) -> list[dict[str, Any]]:
        return [d.to_json() for d in service.list_dashboards(who)]

    @router.get("/dashboards/{dashboard_id}")
    def get_dashboard(who: User, dashboard_id: str) -> dict[str, Any]:
        return service.get_dashboard(who, dashboard_id).to_json()

    @router.put("/dashboards/{dashboard_id}")
    def rename_dashboard(who: User, dashboard_id: str, body: JsonBody) -> dict[str, Any]:
        """Body: ``{"name"}`` (the definition changes by publishing the analysis again)."""
        if set(body) - {"name", "id"} or not isinstance(body.get("name"), str):
            raise InvalidRequest('give {"name": "..."}; publish the analysis to change the rest')
        return service.rename_dashboard(who, dashboard_id, body["name"]).to_json()

    @router.get("/dashboards/{dashboard_id}/versions")
    def dashboard_versions(who: User, dashboard_id: str) -> list[dict[str, Any]]:
        return [v.to_json() for v in service.list_dashboard_versions(who, dashboard_id)]

    @router.put("/dashboards/{dashboard_id}/versions/{version}")
    def set_dashboard_version(who: User, dashboard_id: str, version: int) -> dict[str, Any]:
        """Show this published version (go back to an earlier one, or forward again)."""
        return service.set_dashboard_version(who, dashboard_id, version).to_json()

    @router.delete("/dashboards/{dashboard_id}")
    def delete_dashboard(who: User, dashboard_id: str) -> dict[str, str]:
        service.delete_dashboard(who, dashboard_id)
        return {"deleted": dashboard_id}

    @router.get("/dashboards/{dashboard_id}/visuals/{visual_id}/series")
    def dashboard_series(
        who: User, dashboard_id: str, visual_id: str, mode: ModeQ = "auto",
        filters: Annotated[str | None, Query()] = None,
    ) -> dict[str, Any]:  # fmt: skip
        """``filters``: a JSON list of filters that replace the saved ones on their fields."""
        return service.dashboard_series(
            who, dashboard_id, visual_id, _filters(filters), _mode(mode)
        ).to_json()

    @router.get("/{kind}/{object_id}/fields/{field}/values")
    def field_values(
        who: User, kind: str, object_id: str, field: str, search: str = "", limit: int = 200
    ) -> dict[str, Any]:
        """A field's distinct values (``search``: those holding it), for a category filter."""
        if kind not in ("analyses", "dashboards"):
            raise ResourceNotFound(f"no field values for {kind}: analyses or dashboards")
        which: Literal["analysis", "dashboard"] = "analysis" if kind == "analyses" else "dashboard"
        return service.field_values(who, which, object_id, field, search, limit).to_json()

    # -- sharing ------------------------------------------------------------

    @router.get("/{kind}/{resource_id}/permissions")
    def get_permissions(who: User, kind: str, resource_id: str) -> dict[str, Any]:
        owner, shares = service.get_permissions(who, _kind(kind), resource_id)
        return {"owner": owner, "shares": [s.model_dump() for s in shares]}

    @router.put("/{kind}/{resource_id}/permissions")
    def set_permissions(who: User, kind: str, resource_id: str, body: JsonBody) -> dict[str, Any]:
        """Body: ``{"shares": [{"principal": "group/DataEngineerGroup", "role": "viewer"}]}``."""
        shares = body.get("shares")
        if not isinstance(shares, list):
            raise InvalidRequest("shares: required, a list")
        owner, found = service.set_permissions(who, _kind(kind), resource_id, shares)
        return {"owner": owner, "shares": [s.model_dump() for s in found]}

    return router


def _mode(value: object) -> Mode:
    if value == "auto" or value == "extract" or value == "live":
        return value
    raise InvalidRequest(f"mode: auto, extract or live, not {value!r}")


def _kind(path: str) -> Kind:
    if path not in _KINDS:
        raise InvalidRequest(f"no such kind of BI object: {path} (use {', '.join(_KINDS)})")
    return _KINDS[path]
