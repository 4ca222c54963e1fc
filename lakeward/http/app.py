"""The ASGI application. Routes stay thin; later features add routers here."""

from __future__ import annotations

from functools import partial

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from lakeward import __version__
from lakeward.access.control import AccessControl
from lakeward.bi.service import BiService
from lakeward.config import Settings
from lakeward.erasure.service import ErasureIndexService
from lakeward.erasure.workflow import ErasureWorkflow
from lakeward.errors import LakewardError
from lakeward.glue import GlueService
from lakeward.glue.versions import TableVersions
from lakeward.http.athena import AwsApiDispatch, athena_endpoint
from lakeward.http.auth import auth_router, load_sessions
from lakeward.http.background import Background
from lakeward.http.bi import bi_router
from lakeward.http.console import install_console
from lakeward.http.docs import install_docs
from lakeward.http.erasure import erasure_router
from lakeward.http.erasure_requests import erasure_requests_router
from lakeward.http.errors import error_response, invalid_request
from lakeward.http.events import EventSink, events_router
from lakeward.http.s3 import S3Dispatch, S3Endpoint
from lakeward.metastore.client import MetastoreClient
from lakeward.metastore.uris import metastore_uris
from lakeward.query.catalogs import DEFAULT_CATALOG
from lakeward.query.service import QueryService

DRAIN_SECONDS = 5.0
"""Seconds a stopping server process gives its running queries to finish."""


def create_app(
    settings: Settings, *, process: str | None = None, relay: EventSink | None = None
) -> FastAPI:
    """The server's application over the stack's state.

    Alone (tests, one process), it also runs the background services
    (background.py). A worker of ``lakeward serve`` passes ``process``, its name
    among the processes sharing the SQL service's state, and ``relay``, where
    the webhook's notifications go: the supervisor runs the background services.
    """
    alone = relay is None
    access = AccessControl(settings)
    service = QueryService(settings, access=access, owner=alone, process=process)
    app = FastAPI(
        title="lakeward",
        version=__version__,
        description="Self-hosted data lake: metastore, lake storage, SQL and access control.",
        docs_url=None,  # install_docs: Swagger UI from lakeward itself, not a CDN
        redoc_url=None,
    )
    install_docs(app)
    app.state.settings = settings
    app.state.query_service = service
    # A stopping worker lets its running queries finish first, within the supervisor's
    # patience (supervisor.STOP_TIMEOUT).
    app.router.add_event_handler("shutdown", partial(service.close, grace=DRAIN_SECONDS))

    @app.exception_handler(LakewardError)
    async def _lakeward_error(_request: Request, exc: LakewardError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(invalid_request(exc), 422)

    @app.get("/health", tags=["stack"])
    def health() -> dict[str, object]:
        """Liveness of the server, and whether the metastore answers."""
        try:
            uris = metastore_uris(settings)
        except LakewardError:
            uris = []
        metastore_ok = False
        if uris:
            with MetastoreClient(uris, timeout=3.0, rounds=1, retry_delay=0) as client:
                metastore_ok = client.ping()
        return {"status": "ok", "version": __version__, "metastore": metastore_ok}

    sessions = load_sessions(access)
    app.include_router(auth_router(access, sessions))
    install_console(app, access, service, sessions)
    bi = BiService(settings, access, service, owner=alone)
    app.state.bi_service = bi
    app.router.add_event_handler("shutdown", bi.close)
    app.include_router(bi_router(bi, sessions))
    erasure = ErasureIndexService(settings, access=access)
    app.router.add_event_handler("shutdown", erasure.close)
    app.include_router(erasure_router(erasure, access))
    erasure_flow = ErasureWorkflow(settings, index=erasure, access=access)
    app.state.erasure_workflow = erasure_flow  # the console's erasure pages use it
    if relay is None:
        background = Background(settings, access, service, bi=bi, workflow=erasure_flow)
        app.router.add_event_handler("startup", background.start)
        app.router.add_event_handler("shutdown", background.stop)
        relay = background.indexer
    app.router.add_event_handler("shutdown", erasure_flow.close)
    app.include_router(erasure_requests_router(erasure_flow, access, sessions))
    app.include_router(events_router(access, relay))
    # Athena's protocol posts every operation to "/" (Glue's and STS's too), past the routes.
    versions = TableVersions(service.store.engine)
    glue = GlueService(service.catalogs, access, DEFAULT_CATALOG, versions)
    app.add_middleware(AwsApiDispatch, endpoint=athena_endpoint(service, access, glue))
    # S3's API at the same address: requests signed for the service s3 go there first.
    app.add_middleware(S3Dispatch, s3=S3Endpoint(settings, access))
    return app
