"""The soak's IAM workload: users and policies changed while the server is faulted.

A thread changes IAM as ``lakeward iam`` does (authorized and audited, as root) every
few seconds: a new user with an access key, a managed policy attached, then detached,
then the key and the user deleted. After each change it calls Athena with the user's
key; the decision must follow the change before it, in whichever worker answers, the
moment the change is made (the invariant: every decision follows the IAM change
before it).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from bench._soak import Soak

T = TypeVar("T")

CALL_PATIENCE = 90.0
"""Seconds a call is retried while the server does not answer."""


@dataclass
class IamReport:
    users: int = 0  # users taken through every step
    decisions: int = 0  # calls whose decision was checked
    wrong: list[str] = field(default_factory=list)  # decisions that did not follow
    errors: list[str] = field(default_factory=list)  # changes or calls that failed


def patiently(change: Callable[[], T]) -> T:
    """``change()``, again while its database turns it away (its disk full for a while:
    the IAM write itself, or the audit record it must have first), as an operator would;
    not done meanwhile, so trying again is safe."""
    from sqlalchemy.exc import OperationalError

    from lakeward.errors import Unavailable

    deadline = time.monotonic() + CALL_PATIENCE
    while True:
        try:
            return change()
        except (OperationalError, Unavailable):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class IamChanges:
    def __init__(self, soak: Soak) -> None:
        self.soak = soak
        self.settings = soak.settings
        self.policy = f"{soak.run_id}-get-workgroup"
        self.report = IamReport()
        self.lock = threading.Lock()

    def loop(self, seed: int) -> None:
        from lakeward.access import ROOT, current_principal, current_source
        from lakeward.access.control import AccessControl
        from lakeward.access.iam import IamService

        current_principal.set(ROOT)
        current_source.set("cli")
        rng = random.Random(seed)
        access = AccessControl(self.settings)
        iam = IamService(access)
        try:
            iam.create_policy(self.policy, {"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": "athena:GetWorkGroup", "Resource": "*"},
            ]})  # fmt: skip
            number = 0
            while not self.soak.stopping.wait(rng.uniform(2.0, 4.0)):
                number += 1
                try:
                    self._one_user(iam, f"{self.soak.run_id}-iam-{number}")
                except Exception as exc:  # a change refused: the workload's own error
                    self.report.errors.append(f"user {number}: {type(exc).__name__}: {exc}")
            iam.delete_policy(self.policy)
        finally:
            access.audit.close()

    def _one_user(self, iam: Any, user: str) -> None:
        patiently(lambda: iam.create_user(user))
        key_id, secret = patiently(lambda: iam.create_access_key(user))
        client = self._client(key_id, secret)
        self._expect(client, "denied", f"{user}, no policy")
        patiently(lambda: iam.attach_policy("user", user, self.policy))
        self._expect(client, "allowed", f"{user}, its policy attached")
        patiently(lambda: iam.detach_policy("user", user, self.policy))
        self._expect(client, "denied", f"{user}, its policy detached")
        patiently(lambda: iam.delete_access_key(user, key_id))
        self._expect(client, "refused", f"{user}, its key deleted")
        patiently(lambda: iam.delete_user(user))
        self.report.users += 1

    def _client(self, key_id: str, secret: str) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "athena",
            endpoint_url=self.settings.server_url,
            region_name=self.settings.api.region,
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            config=Config(retries={"max_attempts": 1}, connect_timeout=3, read_timeout=30),
        )

    def _expect(self, client: Any, expected: str, after: str) -> None:
        """Call with the user's key; ``expected``: allowed, denied (by policy) or
        refused (the key is unknown)."""
        from botocore.exceptions import BotoCoreError, ClientError

        deadline = time.monotonic() + CALL_PATIENCE
        while True:
            try:
                client.get_work_group(WorkGroup="primary")
                got = "allowed"
            except ClientError as exc:
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
                if status >= 500 and time.monotonic() < deadline:
                    time.sleep(0.1)  # the server's failure (its disk full): try again
                    continue
                error = exc.response.get("Error", {})
                got = {
                    "AccessDeniedException": "denied",
                    "UnrecognizedClientException": "refused",
                }.get(error.get("Code", ""), error.get("Code", ""))
            except BotoCoreError as exc:  # no answer: the process that had the call died
                if time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                got = f"no answer ({exc})"
            break
        with self.lock:
            self.report.decisions += 1
            if got != expected:
                self.report.wrong.append(f"after {after}: {got}, not {expected}")
