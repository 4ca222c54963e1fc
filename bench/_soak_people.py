"""The soak's erasure workload: people's records put through S3, erasures through approval.

Clients put JSON Lines objects of people's records (``user_id``, ``n``) through
lakeward's S3 endpoint, under a prefix registered as an erasure dataset, so the
server's real-time indexer indexes them. An erasure thread picks a person every few
seconds, stops putting their records, waits until the index holds every record of
theirs that was acknowledged, then asks for their erasure over the REST API, approves
it, and waits for the purge to end. The invariants (``check``):

* every erasure asked for ended COMPLETED;
* no record of an erased person is left, and every other record is as it was put;
* the index equals a brute-force scan of the objects, for every person.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from lakeward.config import Settings

if TYPE_CHECKING:
    from bench._soak import Soak

PEOPLE = 24
"""People whose records the clients put at any one time (each erased one is replaced)."""
INDEX_PATIENCE = 60.0
"""Seconds the index may take to hold an acknowledged object's records."""
ERASURE_PATIENCE = 240.0
"""Seconds an erasure may take from its request to its end."""
FINAL = ("COMPLETED", "FAILED", "STOPPED", "REJECTED", "EXPIRED")


@dataclass
class Erasure:
    user: str
    request_id: str | None = None
    state: str | None = None
    error: str | None = None
    seconds: float | None = None


@dataclass
class PeopleObject:
    key: str
    records: list[dict[str, Any]]
    acknowledged: bool = False


@dataclass
class PeopleReport:
    objects: list[PeopleObject] = field(default_factory=list)
    erasures: list[Erasure] = field(default_factory=list)


class Rest:
    """Signed calls to lakeward's REST routes, retried while the server does not answer."""

    def __init__(self, settings: Settings, patience: float = 90.0) -> None:
        import httpx

        self.settings, self.patience = settings, patience
        self.base = settings.server_url.rstrip("/")
        self.client = httpx.Client(timeout=30)

    def __call__(self, method: str, path: str, body: Any = None) -> Any:
        import httpx
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        data = json.dumps(body).encode() if body is not None else b""
        credentials = Credentials(
            self.settings.api.access_key_id, self.settings.api.secret_access_key
        )
        deadline = time.monotonic() + self.patience
        while True:
            request = AWSRequest(
                method=method,
                url=self.base + path,
                data=data,
                headers={"Content-Type": "application/json"} if data else {},
            )
            SigV4Auth(credentials, "athena", self.settings.api.region).add_auth(request)
            try:
                response = self.client.request(
                    method, self.base + path, content=data, headers=dict(request.headers.items())
                )
            except httpx.HTTPError:
                response = None  # no answer: the process that had the call died
            if response is not None and response.status_code < 500:
                if response.status_code >= 400:
                    raise RuntimeError(f"{method} {path}: {response.status_code} {response.text}")
                return response.json()
            if time.monotonic() > deadline:
                status = response.status_code if response is not None else "no answer"
                raise RuntimeError(f"{method} {path}: {status} for {self.patience:g} s")
            time.sleep(0.2)


class People:
    def __init__(self, soak: Soak) -> None:
        self.soak = soak
        self.settings = soak.settings
        self.bucket = soak.settings.lake.data_bucket
        self.key_prefix = f"soak-people/{soak.run_id}/"
        self.users = [f"{soak.run_id}-person-{k:02d}" for k in range(PEOPLE)]
        self.report = PeopleReport()
        self.lock = threading.Lock()
        self.retired: set[str] = set()  # their erasure is asked for: no new records
        self.in_flight: Counter[str] = Counter()  # puts under way, per person

    def prepare(self) -> None:
        """Register the people's prefix as an erasure dataset of the server's index."""
        from lakeward.erasure.mappers import DatasetMapper
        from lakeward.erasure.service import ErasureIndexService

        service = ErasureIndexService(self.settings)
        try:
            service.register(
                DatasetMapper(
                    name=self.soak.run_id,
                    bucket=self.bucket,
                    key_prefix=self.key_prefix,
                    format="jsonl",
                    compression="none",
                    id_columns=("user_id",),
                )
            )
        finally:
            service.close()

    # -- the workload -------------------------------------------------------

    def put(self, s3: Any, key: str, rng: random.Random) -> None:
        """Put an object of 1-12 records of people whose erasure is not asked for."""
        with self.lock:
            alive = [u for u in self.users if u not in self.retired]
            if not alive:
                return
            records = [
                {"user_id": rng.choice(alive), "n": n, "note": rng.choice(["a", "b c", "é"])}
                for n in range(rng.randint(1, 12))
            ]
            users = {r["user_id"] for r in records}
            self.in_flight.update(users)
            put = PeopleObject(self.key_prefix + key + ".jsonl", records)
            self.report.objects.append(put)
        body = b"".join(json.dumps(r).encode() + b"\n" for r in records)
        try:
            s3("put_object", Bucket=self.bucket, Key=put.key, Body=body)
            put.acknowledged = True
        except Exception:  # botocore's: no answer within the patience; checked as unsure
            pass
        finally:
            with self.lock:
                self.in_flight.subtract(users)

    def erase_loop(self, seed: int) -> None:
        """Every few seconds, one person's erasure, from request to its end."""
        rng = random.Random(seed)
        rest = Rest(self.settings)
        while not self.soak.stopping.wait(rng.uniform(3.0, 6.0)):
            with self.lock:
                having = sorted(
                    {
                        r["user_id"]
                        for o in self.report.objects
                        if o.acknowledged
                        for r in o.records
                        if r["user_id"] not in self.retired
                    }
                )
                if len(having) < 2:
                    continue
                user = rng.choice(having)
                self.retired.add(user)
                # Someone new takes their place: erasures go on for as long as the run.
                self.users.append(f"{self.soak.run_id}-person-{len(self.users):02d}")
            erasure = Erasure(user)
            with self.lock:
                self.report.erasures.append(erasure)
            try:
                self._erase(rest, erasure)
            except Exception as exc:
                erasure.error = str(exc)

    def _erase(self, rest: Rest, erasure: Erasure) -> None:
        started = time.monotonic()
        while True:  # no put of theirs under way
            with self.lock:
                if not self.in_flight[erasure.user]:
                    break
            time.sleep(0.05)
        # Objects put whose answer was lost may be there too: at least the acknowledged.
        expected = self._expected_records(erasure.user)
        deadline = time.monotonic() + INDEX_PATIENCE
        while (found := self._indexed(rest, erasure.user)) < expected:
            if time.monotonic() > deadline:
                erasure.error = f"the index held {found} of their {expected} records"
                return
            time.sleep(0.2)
        body = {"user_ids": [erasure.user], "reason": f"soak {self.soak.run_id}"}
        created = rest("POST", "/erasure/requests", body)
        erasure.request_id = request_id = created["id"]
        deadline = started + ERASURE_PATIENCE
        approved = False
        while time.monotonic() < deadline:
            state = rest("GET", f"/erasure/requests/{request_id}")["state"]
            erasure.state = state
            if state in FINAL:
                erasure.seconds = time.monotonic() - started
                return
            if state == "AWAITING_APPROVAL" and not approved:
                # Refused if approved already (an answer lost to a fault): the state says.
                with contextlib.suppress(RuntimeError):
                    rest("POST", f"/erasure/requests/{request_id}/approve")
                approved = True
            time.sleep(0.3)
        erasure.error = f"still {erasure.state} after {ERASURE_PATIENCE:g} s"

    def _expected_records(self, user: str) -> int:
        with self.lock:
            return sum(
                1
                for o in self.report.objects
                if o.acknowledged
                for r in o.records
                if r["user_id"] == user
            )

    def _indexed(self, rest: Rest, user: str) -> int:
        found = rest("GET", f"/erasure/users/{quote(user, safe='')}")
        return sum(
            loc["records"] or 0 for loc in found["locations"] if loc["dataset"] == self.soak.run_id
        )

    # -- the invariants -----------------------------------------------------

    def check(self, s3: Any, verdict: Any, settle: float = 60.0) -> None:
        erasures = self.report.erasures
        verdict(
            "every erasure asked for ended COMPLETED",
            [
                f"{e.user}: {e.state or 'not asked'} {e.error or ''}".strip()
                for e in erasures
                if e.state != "COMPLETED"
            ],
        )
        erased = {e.user for e in erasures if e.state == "COMPLETED"}
        contents = self._contents(s3)
        verdict("no erased person's record is left, every other one is as put",
                self._records_kept(contents, erased))  # fmt: skip
        rest = Rest(self.settings)
        deadline = time.monotonic() + settle
        while (broken := self._index_differences(rest, contents)) and time.monotonic() < deadline:
            time.sleep(1.0)  # the index may still be applying the last changes
        verdict("the erasure index equals a brute-force scan", broken)

    def _contents(self, s3: Any) -> dict[str, list[dict[str, Any] | None]]:
        """Each object under the prefix: its lines, parsed (None: blank or a placeholder)."""
        contents: dict[str, list[dict[str, Any] | None]] = {}
        token: dict[str, str] = {}
        while True:
            page = s3("list_objects_v2", Bucket=self.bucket, Prefix=self.key_prefix, **token)
            for item in page.get("Contents", []):
                body = s3("get_object", Bucket=self.bucket, Key=item["Key"])["Body"].read()
                lines: list[dict[str, Any] | None] = []
                for line in body.decode().split("\n")[: -1 if body.endswith(b"\n") else None]:
                    record = json.loads(line) if line.strip() else None
                    lines.append(record if record else None)
                contents[item["Key"]] = lines
            if not page.get("IsTruncated"):
                return contents
            token = {"ContinuationToken": page["NextContinuationToken"]}

    def _records_kept(
        self, contents: dict[str, list[dict[str, Any] | None]], erased: set[str]
    ) -> list[str]:
        broken = []
        put = {o.key: o for o in self.report.objects}
        for key, lines in contents.items():
            records = [r for r in lines if r is not None]
            if key not in put:
                broken.append(f"{key}: never put")
                continue
            left = [r for r in put[key].records if r["user_id"] not in erased]
            if records != left:
                broken.append(f"{key}: {len(records)} records, not the {len(left)} expected")
        for o in self.report.objects:
            if o.acknowledged and o.key not in contents:
                broken.append(f"{o.key}: acknowledged, absent")
        return broken

    def _index_differences(
        self, rest: Rest, contents: dict[str, list[dict[str, Any] | None]]
    ) -> list[str]:
        scanned: dict[str, dict[str, list[int]]] = {u: {} for u in self.users}
        for key, lines in contents.items():
            for position, record in enumerate(lines, start=1):
                if record is not None and record.get("user_id") in scanned:
                    scanned[record["user_id"]].setdefault(key, []).append(position)
        broken = []
        for user in self.users:
            found = rest("GET", f"/erasure/users/{quote(user, safe='')}")
            indexed = {
                loc["location"].split(f"/{self.bucket}/", 1)[-1]: sorted(loc["positions"])
                for loc in found["locations"]
                if loc["dataset"] == self.soak.run_id
            }
            if indexed != scanned[user]:
                missing = sorted(set(scanned[user]) - set(indexed))
                extra = sorted(set(indexed) - set(scanned[user]))
                broken.append(f"{user}: not indexed {missing[:3]}, indexed but not so {extra[:3]}")
        return broken

    def clean_up(self, s3: Any) -> None:
        for o in self.report.objects:
            s3("delete_object", Bucket=self.bucket, Key=o.key)
