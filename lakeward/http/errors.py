"""The one error shape of lakeward's own JSON routes.

``{"error": {"type": "<LakewardError class>", "message": "<sentence for the user>"}}``
with the error's HTTP status. The Athena API answers in Athena's shape instead
(``{"__type", "Message"}``, so botocore raises its own exceptions) and console pages
with the console's error page; tests/http/test_error_shape.py pins all three.
"""

from __future__ import annotations

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from lakeward.errors import InvalidRequest, LakewardError


def error_body(exc: LakewardError) -> dict[str, object]:
    """The one shape of every error the server's JSON routes return."""
    return {"error": {"type": type(exc).__name__, "message": exc.message}}


def error_response(exc: LakewardError, status: int | None = None) -> JSONResponse:
    return JSONResponse(error_body(exc), status_code=status or exc.http_status)


def invalid_request(exc: RequestValidationError) -> InvalidRequest:
    """A request FastAPI's validation refused, named the way lakeward names fields."""
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e['msg']}" for e in exc.errors()
    )
    return InvalidRequest(f"not a valid request: {problems}")
