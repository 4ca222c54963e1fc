"""The HTTP server: thin routes over the service core."""

from lakeward.http.app import create_app

__all__ = ["create_app"]
