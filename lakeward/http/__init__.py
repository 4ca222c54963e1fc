"""The HTTP server: thin routes over the service core.

``create_app`` is imported on first use: the server's keeper and supervisor import
modules of this package and must not pay for loading the whole application.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakeward.http.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from lakeward.http.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
