"""The web console: server-rendered pages over the services, under ``/console``.

One router per page group, each thin: it checks who is signed in, calls a
service core (which authorizes), and renders a template. Pages are listed in
the navigation only for principals whose policies allow them; the routes
check again, so guessing a URL gains nothing.

Nothing is fetched from the internet: plotly.js is served from the ``plotly``
package, the world topology from ``static/vendor/topojson`` and the editor's
CodeMirror from ``static/vendor/codemirror`` (installed at setup by ``dev.sh``, see
docs/console.md).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import replace

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from lakeward.access.arns import catalog_arn
from lakeward.access.control import AccessControl
from lakeward.access.sessions import Sessions
from lakeward.bi.model import AnalysisSpec
from lakeward.errors import InvalidRequest, LakewardError, ResourceNotFound
from lakeward.http.console import admin, authoring, bi, catalogs, erasure, plotly, query, signin
from lakeward.http.console.assets import Assets
from lakeward.http.console.base import PREFIX, STATIC, Console, wants_json
from lakeward.http.errors import error_response, invalid_request
from lakeward.query.service import QueryService

PLOTLY_JS = plotly.full_bundle()
TOPOJSON = STATIC / "vendor" / "topojson"
CODEMIRROR = STATIC / "vendor" / "codemirror"


def install_console(
    app: FastAPI, access: AccessControl, service: QueryService, sessions: Sessions
) -> Console:
    """Add the console's routes, static files and HTML error pages to the server."""
    console = Console(access, sessions)

    def sees_any(kind: str) -> Callable[[str], bool]:
        def shown(user: str) -> bool:
            service = getattr(app.state, "bi_service", None)
            if service is None:
                return False
            found = service.list_dashboards(user) if kind == "dashboards" else None
            return bool(found if found is not None else service.list_datasets(user))

        return shown

    def uses_a_catalog(user: str) -> bool:
        # The editor runs nothing for a user who may use no catalog: not offered to them.
        return any(
            console.may(user, "lakeward:UseCatalog", catalog_arn(c))
            for c in service.catalogs.names()
        )

    console.nav = [
        replace(bi.DASHBOARDS, shown=sees_any("dashboards")),
        replace(bi.DATASETS, shown=sees_any("datasets")),
        replace(query.NAV, requires=uses_a_catalog),
        catalogs.NAV,
        erasure.NAV,
        admin.NAV,
    ]
    app.include_router(signin.signin_router(console))
    app.include_router(bi.bi_router(console))
    app.include_router(authoring.authoring_router(console))
    app.include_router(catalogs.catalogs_router(console, service))
    app.include_router(catalogs.schema_router(console, service))
    app.include_router(query.query_router(console, service))
    app.include_router(erasure.erasure_router(console))
    app.include_router(admin.admin_router(console))

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        # A browser opening the server's address meets the console; the Athena API
        # is a POST to the same path (athena.AwsApiDispatch) and stays there.
        return RedirectResponse(f"{PREFIX}/", status_code=307)

    scripts = {path.name: path for path in STATIC.glob("*.*")}
    bundles = {plotly.FULL: PLOTLY_JS, **plotly.partial_bundles()}
    folders = {"topojson": TOPOJSON, "codemirror": CODEMIRROR}
    assets = Assets(PREFIX, {**scripts, **bundles}, folders)
    console.env.globals["asset_url"] = assets.url
    console.env.globals["has_asset"] = assets.known

    def plotly_url(spec: AnalysisSpec) -> str:
        types = {v.type for sheet in spec.sheets for v in sheet.visuals}
        return assets.url(plotly.bundle_for(types, bundles))

    console.env.globals["plotly_url"] = plotly_url

    @app.get(f"{PREFIX}/assets/{{digest}}/{{name:path}}", include_in_schema=False)
    def asset(request: Request, digest: str, name: str) -> Response:
        if name.startswith("topojson/") and not assets.known(name):
            raise ResourceNotFound(
                f"no world topology {name[len('topojson/') :]}; ./dev.sh install puts it in "
                f"{TOPOJSON.name}/"
            )
        return assets.response(request, digest, name)

    app.mount(f"{PREFIX}/static", StaticFiles(directory=STATIC), name="console-static")

    # Console pages answer errors with a page (or a redirect to sign in), the rest as before.
    json_handler = app.exception_handlers.get(LakewardError)
    json_invalid = app.exception_handlers.get(RequestValidationError)

    async def on_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, LakewardError)
        if request.url.path.startswith(PREFIX + "/") or json_handler is None:
            return console.error_page(request, exc)
        response = json_handler(request, exc)
        return await response if inspect.isawaitable(response) else response

    app.add_exception_handler(LakewardError, on_error)

    async def on_invalid(request: Request, exc: Exception) -> Response:
        """A form field the route's own checks refused (too long, missing): a page."""
        assert isinstance(exc, RequestValidationError)
        if not request.url.path.startswith(PREFIX + "/") or wants_json(request):
            if json_invalid is None:
                return error_response(invalid_request(exc), 422)
            response = json_invalid(request, exc)
            return await response if inspect.isawaitable(response) else response
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'][1:]) or 'form'}: {e['msg']}" for e in exc.errors()
        )
        return console.error_page(request, InvalidRequest(f"not a valid form: {problems}"))

    app.add_exception_handler(RequestValidationError, on_invalid)
    json_http = app.exception_handlers.get(HTTPException)

    async def on_http(request: Request, exc: Exception) -> Response:
        """An unknown console URL: the console's "not found" page, not raw JSON."""
        assert isinstance(exc, HTTPException)
        path = request.url.path
        if exc.status_code == 404 and (path == PREFIX or path.startswith(PREFIX + "/")):
            return console.error_page(request, ResourceNotFound(f"there is no page at {path}"))
        if json_http is None:
            return error_response(ResourceNotFound(str(exc.detail)), exc.status_code)
        response = json_http(request, exc)
        return await response if inspect.isawaitable(response) else response

    app.add_exception_handler(HTTPException, on_http)
    return console
