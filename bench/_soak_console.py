"""The soak's console sessions: the data engineer signed in to the web console in a few
browsers' stead, opening the seed's dashboard again and again (its page, then every
visual's data, as charts.js fetches it, live through the SQL service or from the extract)
while the server's processes are killed.

What must hold: every render shows the numbers the first render of its mode showed, and
a session, once signed in, outlives every fault (sessions are kept in the IAM database,
signed with a key on disk: a new worker or supervisor knows them).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

    from bench._soak import Soak

SESSIONS = 2
DASHBOARD = "covid-19-cases"
VISUALS = ("map", "mortality")
MODES = ("live", "extract")
USER, USER_SECRET = "de_user", "DataEngineerUserCreds"
CALL_PATIENCE = 90.0
"""Seconds a page or a visual's data is asked for again while the server does not answer."""


@dataclass
class ConsoleReport:
    renders: int = 0  # the dashboard opened with every visual's data
    wrong: list[str] = field(default_factory=list)  # renders unlike the first of their mode
    signed_out: list[str] = field(default_factory=list)  # sessions the server forgot
    errors: list[str] = field(default_factory=list)  # pages or data never answered


class SignedOut(Exception):
    """The server asked for the sign-in again."""


class ConsoleSessions:
    def __init__(self, soak: Soak) -> None:
        self.soak = soak
        self.settings = soak.settings
        self.report = ConsoleReport()
        self.lock = threading.Lock()
        self.first: dict[tuple[str, str], str] = {}  # (visual, mode) -> digest of its data
        self.password = ""

    def prepare(self) -> None:
        """The seed's users, BI data source, dataset and dashboard in the server's own
        state, as ``lakeward up`` makes them; the data engineer's console password."""
        from lakeward.access.control import AccessControl
        from lakeward.access.seed import seed_identities
        from lakeward.bi.seed import seed_bi

        access = AccessControl(self.settings)
        try:
            seed_identities(self.settings, access)
            seed_bi(self.settings, access)
            self.password = access.secrets.get(USER_SECRET).value["password"]
        finally:
            access.audit.close()

    def loop(self, index: int, seed: int) -> None:
        rng = random.Random(seed * 100 + index)
        client: httpx.Client | None = None
        while not self.soak.stopping.wait(rng.uniform(1.0, 3.0)):
            mode = rng.choice(MODES)
            try:
                if client is None:
                    client = self._signed_in()
                self._render(client, mode)
            except SignedOut as exc:
                with self.lock:
                    self.report.signed_out.append(f"session {index}: {exc}")
                client = None
            except RuntimeError as exc:
                with self.lock:
                    self.report.errors.append(f"session {index}: {exc}")

    def check(self, verdict: Callable[[str, list[str]], None]) -> None:
        report = self.report
        verdict(
            "every dashboard render shows the numbers of its mode's first",
            report.wrong + report.errors,
        )
        verdict("every console session outlives every fault", report.signed_out)

    # -- one browser's part --------------------------------------------------

    def _signed_in(self) -> httpx.Client:
        """A client signed in through the console's form, as a browser is."""
        import httpx

        client = httpx.Client(base_url=self.settings.server_url, timeout=30)
        form = self._get(client, "/console/login")
        found = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
        if found is None:
            raise RuntimeError("the sign-in form has no csrf_token")
        fields = {"username": USER, "password": self.password, "csrf_token": found.group(1)}
        answer = self._patiently(lambda: client.post("/console/login", data=fields))
        if answer.status_code != 303:
            raise RuntimeError(f"sign-in: {answer.status_code} {answer.text[:200]}")
        return client

    def _render(self, client: httpx.Client, mode: str) -> None:
        """The dashboard's page, then each visual's data; every one compared with the
        first of its mode."""
        page = self._get(client, f"/console/dashboards/{DASHBOARD}?mode={mode}")
        if 'data-visual="' not in page.text:
            raise RuntimeError(f"the dashboard's page has no visuals: {page.text[:200]}")
        for visual in VISUALS:
            path = f"/api/bi/dashboards/{DASHBOARD}/visuals/{visual}/series?mode={mode}"
            series = self._get(client, path).json()
            digest = hashlib.sha256(json.dumps(series["data"], sort_keys=True).encode())
            with self.lock:
                first = self.first.setdefault((visual, mode), digest.hexdigest())
                if first != digest.hexdigest():
                    self.report.wrong.append(f"{visual} ({mode}): not the first render's data")
        with self.lock:
            self.report.renders += 1

    def _get(self, client: httpx.Client, path: str) -> httpx.Response:
        answer = self._patiently(lambda: client.get(path))
        to_sign_in = answer.status_code == 303 and "/login" in answer.headers.get("location", "")
        if answer.status_code == 401 or to_sign_in:
            raise SignedOut(f"GET {path}: {answer.status_code} {answer.text[:200]}")
        if answer.status_code != 200:
            raise RuntimeError(f"GET {path}: {answer.status_code} {answer.text[:200]}")
        return answer

    @staticmethod
    def _patiently(call: Callable[[], httpx.Response]) -> httpx.Response:
        """``call()``, again while no process answers it or the server fails it."""
        import httpx

        deadline = time.monotonic() + CALL_PATIENCE
        while True:
            try:
                answer: Any = call()
            except httpx.HTTPError as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no answer for {CALL_PATIENCE:g} s: {exc}") from None
                time.sleep(0.1)
                continue
            if answer.status_code < 500 or time.monotonic() > deadline:
                return answer  # type: ignore[no-any-return]
            time.sleep(0.2)
