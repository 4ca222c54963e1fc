"""One worker of ``lakeward serve`` (started by supervisor.py, not by hand).

It reads its configuration from stdin (the settings hold the API's secret, so
not from argv), builds the application, waits for the word ``serve`` (a spare
waits until a worker dies), serves the application on the listening socket it inherited,
and answers with its pid in ``X-Lakeward-Worker`` so that a client (or a test)
can tell which process answered. It stops when the supervisor dies, so a
killed supervisor never leaves workers serving on their own.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import uvicorn

from lakeward.config import Settings
from lakeward.http import create_app
from lakeward.http.relay import RelayClient
from lakeward.process import die_with_parent

WORKER_HEADER = "x-lakeward-worker"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]


def tag_responses(app: Asgi, pid: int) -> Asgi:
    """The application, answering every HTTP request with ``X-Lakeward-Worker: <pid>``."""
    value = str(pid).encode()

    async def tagged(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_tagged(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (WORKER_HEADER.encode(), value)]
            await send(message)

        await app(scope, receive, send_tagged)

    return tagged


def main() -> None:
    die_with_parent()
    config = json.loads(sys.stdin.readline())
    settings = Settings.model_validate({**config["settings"], "data_dir": Path(config["data_dir"])})
    relay = RelayClient(config["relay"], bytes.fromhex(config["key"]))
    app = create_app(settings, process=config["process"], relay=relay)
    listener = socket.socket(fileno=config["fd"])
    # Built and ready; a spare waits here until the supervisor gives it a place.
    if sys.stdin.readline().strip() != "serve":
        return  # the supervisor went away or stopped the spare
    server = uvicorn.Server(
        uvicorn.Config(tag_responses(app, os.getpid()), log_level="warning", lifespan="on")
    )
    server.run(sockets=[listener])


if __name__ == "__main__":
    main()
