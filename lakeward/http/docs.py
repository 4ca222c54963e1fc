"""The API's interactive documentation at ``/docs``, offline.

FastAPI's own ``/docs`` page loads Swagger UI from a CDN, so it is blank on a
server without internet access. Here the page loads Swagger UI from the
``swagger-ui-py`` package (Swagger UI 5, which reads the OpenAPI 3.1 that
FastAPI writes), served by lakeward itself as plotly.js is for the console.
``/redoc`` would need a CDN too and is not offered.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse, HTMLResponse

from lakeward.errors import ResourceNotFound

DOCS = "/docs"
ASSETS = f"{DOCS}/assets"
# The files the page needs, by name: nothing else under the package's folder is served.
_TYPES = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}
_CACHED = {"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"}


def swagger_ui_dir() -> Path | None:
    """Swagger UI's folder in the installed package (found without importing it)."""
    spec = find_spec("swagger_ui")
    if spec is None or spec.origin is None:
        return None
    static = Path(spec.origin).parent / "static"
    return static if static.is_dir() else None


def install_docs(app: FastAPI) -> None:
    """``/docs`` with Swagger UI served from ``/docs/assets``; create the app with docs_url=None."""
    folder = swagger_ui_dir()
    redirect_path = f"{DOCS}/oauth2-redirect"

    @app.get(DOCS, include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
            oauth2_redirect_url=redirect_path,
        )

    @app.get(redirect_path, include_in_schema=False)
    def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(f"{ASSETS}/{{name}}", include_in_schema=False)
    def asset(name: str) -> FileResponse:
        if name not in _TYPES:
            raise ResourceNotFound(f"no documentation asset {name!r}")
        if folder is None:
            raise ResourceNotFound(
                "Swagger UI is not installed: pip install swagger-ui-py (a lakeward dependency)"
            )
        return FileResponse(folder / name, media_type=_TYPES[name], headers=_CACHED)
