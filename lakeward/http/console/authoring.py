"""Editing and deleting BI objects from the console: data sources, datasets, analyses,
their visuals, and dashboards (rename, go back to a published version, delete).

Thin over ``BiService``, which authorizes each change per object (owners, shares,
the caller's policies) and audits it; the pages ask for a confirmation before a
delete or a change of version (``data-confirm``, console.js). A refusal comes back
on the page it was asked from, as a message naming what was wrong.
"""

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from lakeward.access.sessions import Session
from lakeward.bi.service import BiService
from lakeward.errors import LakewardError
from lakeward.http.console.base import PREFIX, Console, redirect, signed_in
from lakeward.http.console.bi import DATASETS, bi_of, unseen_as_missing
from lakeward.http.console.forms import (
    FIELD_OPS,
    dataset_spec_from,
    dataset_values,
    visual_from,
)


def _attempt(change: Callable[[], object], back: str, done: str, then: str = "") -> Response:
    """Make the change; back to ``back`` with its error, or to ``then`` (else ``back``)."""
    try:
        change()
    except (LakewardError, ValueError) as exc:
        message = exc.message if isinstance(exc, LakewardError) else str(exc)
        return redirect(back, error=message)
    return redirect(then or back, done=done)


def authoring_router(console: Console) -> APIRouter:
    router = APIRouter(prefix=PREFIX, include_in_schema=False)
    Signed = Annotated[Session, Depends(signed_in(console))]
    Bi = Annotated[BiService, Depends(bi_of)]

    # -- data sources ---------------------------------------------------------

    @router.post("/data-sources/{source_id}/edit")
    async def edit_data_source(
        request: Request, source_id: str, session: Signed, bi: Bi
    ) -> Response:
        form = await request.form()
        name, catalog = str(form.get("name") or ""), str(form.get("catalog") or "")

        def change() -> None:
            source = bi.update_data_source(
                session.user, source_id, name=name or None, catalog=catalog or None
            )
            if source.status == "UNVALIDATED":
                bi.validate_data_source(session.user, source_id)

        return _attempt(change, "/datasets", f"data source {source_id} saved")

    @router.post("/data-sources/{source_id}/delete")
    def delete_data_source(source_id: str, session: Signed, bi: Bi) -> Response:
        return _attempt(
            lambda: bi.delete_data_source(session.user, source_id),
            "/datasets", f"data source {source_id} deleted",
        )  # fmt: skip

    # -- datasets -------------------------------------------------------------

    def editor(
        request: Request, session: Session, bi: BiService, dataset_id: str,
        status: int = 200, **context: Any,
    ) -> HTMLResponse:  # fmt: skip
        return console.render(
            request, "dataset_new.html", session, status=status,
            title=f"Edit dataset {dataset_id}", page=DATASETS.key,
            sources=bi.list_data_sources(session.user), field_ops=FIELD_OPS,
            form_action=f"{PREFIX}/datasets/{dataset_id}/edit", editing=dataset_id,
            **{"preview": None, "error": "", **context},
        )  # fmt: skip

    @router.get("/datasets/{dataset_id}/edit")
    def edit_dataset(request: Request, dataset_id: str, session: Signed, bi: Bi) -> HTMLResponse:
        with unseen_as_missing("dataset", dataset_id):
            found = bi.get_dataset(session.user, dataset_id)
        values, ops = dataset_values(found.spec)
        return editor(request, session, bi, dataset_id, values={"id": dataset_id, **values},
                      ops=ops)  # fmt: skip

    @router.post("/datasets/{dataset_id}/edit")
    async def save_dataset(request: Request, dataset_id: str, session: Signed, bi: Bi) -> Response:
        form = await request.form()
        values = {k: str(v) for k, v in form.items() if not k.startswith("op_")}
        values["id"] = dataset_id
        spec, ops = dataset_spec_from(form)
        try:
            if form.get("action") == "preview":
                preview = bi.preview_dataset(session.user, spec, limit=20)
                return editor(request, session, bi, dataset_id, values=values, ops=ops,
                              preview=preview)  # fmt: skip
            bi.update_dataset(session.user, dataset_id, spec)
        except LakewardError as exc:
            return editor(request, session, bi, dataset_id, 400, values=values, ops=ops,
                          error=exc.message)  # fmt: skip
        return redirect(f"/datasets/{dataset_id}", done=f"dataset {dataset_id} saved")

    @router.post("/datasets/{dataset_id}/delete")
    def delete_dataset(dataset_id: str, session: Signed, bi: Bi) -> Response:
        return _attempt(
            lambda: bi.delete_dataset(session.user, dataset_id),
            f"/datasets/{dataset_id}", f"dataset {dataset_id} deleted", then="/datasets",
        )  # fmt: skip

    # -- analyses and their visuals --------------------------------------------

    def change_spec(
        bi: BiService, user: str, analysis_id: str, edit: Callable[[dict[str, Any]], None]
    ) -> None:
        spec = bi.get_analysis(user, analysis_id).spec.model_dump(mode="json")
        edit(spec)
        bi.update_analysis(user, analysis_id, spec)

    @router.post("/analyses/{analysis_id}/visuals/{visual_id}")
    async def edit_visual(
        request: Request, analysis_id: str, visual_id: str, session: Signed, bi: Bi
    ) -> Response:
        form = await request.form()

        def replace(spec: dict[str, Any]) -> None:
            for sheet in spec["sheets"]:
                for index, visual in enumerate(sheet["visuals"]):
                    if visual["id"] == visual_id:
                        sheet["visuals"][index] = visual_from(form, visual_id)
                        return
            raise ValueError(f"analysis {analysis_id} has no visual {visual_id}")

        return _attempt(
            lambda: change_spec(bi, session.user, analysis_id, replace),
            f"/analyses/{analysis_id}", f"visual {visual_id} saved",
        )  # fmt: skip

    @router.post("/analyses/{analysis_id}/visuals/{visual_id}/delete")
    def delete_visual(analysis_id: str, visual_id: str, session: Signed, bi: Bi) -> Response:
        def drop(spec: dict[str, Any]) -> None:
            for sheet in spec["sheets"]:
                sheet["visuals"] = [v for v in sheet["visuals"] if v["id"] != visual_id]

        return _attempt(
            lambda: change_spec(bi, session.user, analysis_id, drop),
            f"/analyses/{analysis_id}", f"visual {visual_id} deleted",
        )  # fmt: skip

    @router.post("/analyses/{analysis_id}/rename")
    async def rename_analysis(
        request: Request, analysis_id: str, session: Signed, bi: Bi
    ) -> Response:
        name = str((await request.form()).get("name") or "").strip()
        return _attempt(
            lambda: change_spec(bi, session.user, analysis_id, lambda s: s.update(name=name)),
            f"/analyses/{analysis_id}", f"analysis renamed to {name}",
        )  # fmt: skip

    @router.post("/analyses/{analysis_id}/delete")
    def delete_analysis(analysis_id: str, session: Signed, bi: Bi) -> Response:
        return _attempt(
            lambda: bi.delete_analysis(session.user, analysis_id),
            f"/analyses/{analysis_id}", f"analysis {analysis_id} deleted", then="/dashboards",
        )  # fmt: skip

    # -- dashboards -------------------------------------------------------------

    @router.post("/dashboards/{dashboard_id}/versions/{version}")
    def show_version(dashboard_id: str, version: int, session: Signed, bi: Bi) -> Response:
        return _attempt(
            lambda: bi.set_dashboard_version(session.user, dashboard_id, version),
            f"/dashboards/{dashboard_id}", f"now showing version {version}",
        )  # fmt: skip

    @router.post("/dashboards/{dashboard_id}/rename")
    async def rename_dashboard(
        request: Request, dashboard_id: str, session: Signed, bi: Bi
    ) -> Response:
        name = str((await request.form()).get("name") or "")
        return _attempt(
            lambda: bi.rename_dashboard(session.user, dashboard_id, name),
            f"/dashboards/{dashboard_id}", f"dashboard renamed to {name.strip()}",
        )  # fmt: skip

    @router.post("/dashboards/{dashboard_id}/delete")
    def delete_dashboard(dashboard_id: str, session: Signed, bi: Bi) -> Response:
        return _attempt(
            lambda: bi.delete_dashboard(session.user, dashboard_id),
            f"/dashboards/{dashboard_id}", f"dashboard {dashboard_id} deleted",
            then="/dashboards",
        )  # fmt: skip

    return router
