"""Glue's Data Catalog API (JSON 1.1, ``X-Amz-Target: AWSGlue.<Operation>``) at the
server's one address, beside Athena's: requests are checked against Glue's model as
botocore ships it, then answered by ``GlueService``. Errors carry Glue's names in
``__type`` so botocore raises ``EntityNotFoundException`` and the others."""

from __future__ import annotations

import json
import logging
from typing import Any

from lakeward.errors import InvalidRequest, LakewardError
from lakeward.glue import GlueService
from lakeward.glue.base import error_code
from lakeward.http.athena.validation import checked, model
from lakeward.http.sigv4 import json_signing_error

TARGET_PREFIX = "AWSGlue."
_log = logging.getLogger(__name__)


def handle_glue(glue: GlueService, operation: str, body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"Could not parse request body into JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidRequest("Could not parse request body into JSON: expected an object")
    service_model = model("glue")
    if operation not in service_model.operation_names:
        raise InvalidRequest(f"Unknown operation AWSGlue.{operation}")
    shape = service_model.operation_model(operation).input_shape
    request = checked(shape, data, "") if shape is not None else {}
    return glue.call(operation, request)


def glue_error(exc: Exception, operation: str, request_id: str) -> tuple[int, dict[str, str]]:
    """(status, body) of a failed Glue call."""
    code = json_signing_error(exc) or error_code(exc)
    if code == "InternalServiceException":
        _log.error("Glue API %s failed (request %s)", operation, request_id, exc_info=exc)
        message = exc.message if isinstance(exc, LakewardError) else "Internal server error"
        return 500, {"__type": code, "Message": message}
    message = exc.message if isinstance(exc, LakewardError) else str(exc)
    return 400, {"__type": code, "Message": message}
