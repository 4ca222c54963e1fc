"""One worker of ``lakeward serve`` (started by supervisor.py, not by hand).

It reads its configuration from stdin (the settings hold the API's secret, so
not from argv), builds the application, waits for the word ``serve`` (a spare
waits until a worker dies), serves the application on the listening socket it inherited,
and answers with its pid in ``X-Lakeward-Worker`` so that a client (or a test)
can tell which process answered.

A worker whose supervisor dies (killed, say) hands over instead of stopping at once:
it keeps serving until the supervisor the keeper starts in its place has its own
workers serving, then stops as it would at ``lakeward down``. So the server answers
throughout. It stops at once if the keeper is gone too (nothing will replace it), and
after ``HANDOVER_LIMIT`` s in any case, so that a worker never serves on its own for long.
Before it serves, a worker still dies with its supervisor; one whose supervisor died
before the worker could ask to die with it (a kill just after the start) does not start.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from lakeward.config import Settings
from lakeward.http import create_app
from lakeward.http.relay import RelayClient
from lakeward.http.supervisor import read_record
from lakeward.process import ManagedProcess, die_with_parent

WORKER_HEADER = "x-lakeward-worker"

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]


def tag_responses(app: Asgi, pid: int) -> Asgi:
    """The application, answering every HTTP request with ``X-Lakeward-Worker: <pid>``.

    A response's head is held until its first body part, so that both reach the
    connection in one turn of the event loop and ``OneSendTransport`` sends them in one
    write: a worker killed then sends neither, and the client retries, instead of a head
    with a Content-Length and no body, which botocore reads as an empty answer.
    """
    value = str(pid).encode()

    async def tagged(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        head: MutableMapping[str, Any] | None = None

        async def send_tagged(message: MutableMapping[str, Any]) -> None:
            nonlocal head
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (WORKER_HEADER.encode(), value)]
                head = message
                return
            if head is not None:
                held, head = head, None
                await send(held)
            await send(message)

        await app(scope, receive, send_tagged)

    return tagged


def close_after_unread_body(app: Asgi) -> Asgi:
    """The application, closing the connection of a request sent with ``Expect:
    100-continue`` and answered before its body was asked for (a refusal).

    Its client never sends that body, so the connection cannot carry another request:
    uvicorn would read the next one as this one's body and answer a bare 400.
    """

    async def closing(scope: Scope, receive: Receive, send: Send) -> None:
        unread = scope["type"] == "http" and any(
            k.lower() == b"expect" and v.lower() == b"100-continue"
            for k, v in scope.get("headers", ())
        )
        if not unread:
            await app(scope, receive, send)
            return

        async def receive_noted() -> MutableMapping[str, Any]:
            nonlocal unread
            unread = False  # uvicorn asks for the body with "100 Continue"
            return await receive()

        async def send_closing(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start" and unread:
                message["headers"] = [*message.get("headers", []), (b"connection", b"close")]
            await send(message)

        await app(scope, receive_noted, send_closing)

    return closing


class OneSendTransport:
    """A connection's transport whose writes of one turn of the event loop leave in one send.

    uvicorn writes a response's head and its body in two writes, and asyncio sends each
    at once; a worker killed between the two sends (on a busy machine the kernel often
    runs the woken client there) leaves the client a head without its body.
    """

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self._transport = transport
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._pending:
            asyncio.get_running_loop().call_soon(self.flush)
        self._pending.append(bytes(data))

    def writelines(self, lines: Any) -> None:
        self.write(b"".join(lines))

    def flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            self._transport.write(data)

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


# h11's, even where httptools is installed (uvicorn would pick it then): the close after an
# unread body and the one-send transport are built and tested on h11's cycle; on httptools'
# a refused S3 call and a supervisor's replacement went otherwise (a HEAD answered 400 instead
# of 403, connections reset).
_HttpProtocol: Any = H11Protocol


class OneSendProtocol(_HttpProtocol):  # type: ignore[misc]
    """uvicorn's HTTP protocol over a ``OneSendTransport``."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(OneSendTransport(transport))  # type: ignore[arg-type]


ACCEPTED_GRACE = 0.5
"""Seconds a stopping worker, no longer accepting, gives the connections it accepted last
to send their request before uvicorn closes the silent ones."""


class DrainingServer(uvicorn.Server):
    """uvicorn's server, which stops taking connections before it closes the idle ones.

    uvicorn closes, at once, every connection that has no request in progress, one
    accepted a moment before included: its client, whose request was on its way, is
    left without an answer. Listening stops first here, then the last connections get
    ``ACCEPTED_GRACE`` seconds to be read.
    """

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        await asyncio.sleep(ACCEPTED_GRACE)
        await super().shutdown(sockets)


HANDOVER_LIMIT = 60.0
"""Seconds a worker whose supervisor died serves at most, waiting for its successors."""
LOOK_EVERY = 0.1
STOP_GRACE = 30.0
"""Seconds an orphaned worker told to stop has to finish its calls before it exits anyway."""


def hand_over_when_orphaned(server: uvicorn.Server, settings: Settings, supervisor: int) -> None:
    """Once the supervisor is gone, stop ``server`` when a new supervisor's workers serve."""
    while os.getppid() == supervisor:
        if server.should_exit:
            return
        time.sleep(LOOK_EVERY)
    log.warning("worker %d: its supervisor died; it serves until its successors do", os.getpid())
    keeper = ManagedProcess("server", settings.data_dir / "run")
    deadline = time.monotonic() + HANDOVER_LIMIT
    while time.monotonic() < deadline and keeper.pid() is not None:
        record = read_record(settings)
        workers = record.get("workers") or []
        if (
            record.get("supervisor") not in (None, supervisor)
            and workers
            and all(w.get("state") == "running" for w in workers)
        ):
            break
        time.sleep(LOOK_EVERY)
    server.should_exit = True
    # The process ends with uvicorn's shutdown (this thread is a daemon); one that waits on
    # a call or a connection that never ends must not outlive its successors for good.
    time.sleep(STOP_GRACE)
    log.error("worker %d: not stopped %g s after its hand-over; it exits", os.getpid(), STOP_GRACE)
    os._exit(1)


def main() -> None:
    die_with_parent()
    config = json.loads(sys.stdin.readline())
    supervisor = config["supervisor"]
    if os.getppid() != supervisor:
        # It died before this process asked to die with it: nothing will manage this
        # worker (and a later look would take init for its supervisor), so it goes.
        return
    settings = Settings.model_validate({**config["settings"], "data_dir": Path(config["data_dir"])})
    relay = RelayClient(config["relay"], bytes.fromhex(config["key"]))
    app = create_app(settings, process=config["process"], relay=relay)
    listener = socket.socket(fileno=config["fd"])
    # Built and ready; a spare waits here until the supervisor gives it a place.
    if sys.stdin.readline().strip() != "serve":
        return  # the supervisor went away or stopped the spare
    server = DrainingServer(
        uvicorn.Config(
            tag_responses(close_after_unread_body(app), os.getpid()),
            http=OneSendProtocol,
            log_level="warning",
            lifespan="on",
        )
    )
    die_with_parent(False)  # it serves: a supervisor that dies is handed over to
    watch = threading.Thread(
        target=hand_over_when_orphaned, args=(server, settings, supervisor), daemon=True
    )
    watch.start()
    server.run(sockets=[listener])


if __name__ == "__main__":
    main()
