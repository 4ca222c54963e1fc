"""The JSON shapes of the erasure core, and what a request's page shows.

The REST API, ``lakeward erasure ... --output json`` and the console render
the same records, so their shapes are made once, here, from the core's
objects.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakeward.erasure.requests import Request, Transition
    from lakeward.erasure.service import UserFindings
    from lakeward.erasure.workflow import ErasureWorkflow


def findings_json(found: UserFindings) -> dict[str, Any]:
    """The JSON shape of one user's locations (``GET /erasure/users/<id>``, ``erasure find``)."""
    return {
        "user_id": found.user_id,
        "records": found.records,
        "locations": [
            {
                "layer": h.layer,
                "dataset": h.dataset,
                "location": h.location,
                "records": h.records,
                "whole_object": h.records is None,
                "positions": list(h.positions),
                "etag": h.etag,
            }
            for h in found.holdings
        ],
    }


def request_json(flow: ErasureWorkflow, current: Request, full: bool = False) -> dict[str, Any]:
    """The JSON shape of a request; ``full`` adds its history and targets."""
    data = current.as_dict()
    if full:
        data["history"] = [
            {
                "from": t.from_state,
                "to": t.to_state,
                "at": t.at.isoformat(),
                "by": t.actor,
                "note": t.note,
            }  # fmt: skip
            for t in flow.store.history(current.id)
        ]
        data["targets"] = [
            {"target": row.target, "status": row.status, "outcome": row.outcome}
            for row in flow.store.targets(current.id)
        ]
    return data


@dataclass(frozen=True)
class RequestView:
    """A request with its history, report and whether it is certified, as its console page
    shows it."""

    request: Request
    history: list[Transition]
    report: dict[str, Any] | None  # report.json; None while it is not made
    certified: bool


def view_request(flow: ErasureWorkflow, request_id: str) -> RequestView:
    """One request for a caller who may read it (``erasure:GetRequest``, as the API asks)."""
    current = flow.get_request(request_id)
    saved = flow.saved_file(request_id, "report.json")
    return RequestView(
        current,
        flow.store.history(request_id),
        json.loads(saved) if saved else None,
        flow.saved_file(request_id, "certificate.json") is not None,
    )
