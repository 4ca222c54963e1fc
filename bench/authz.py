"""Benchmark of access control: policy decisions, and what auth costs an Athena API call.

    .venv/bin/python bench/authz.py [--decisions 20000] [--components 3000]
        [--requests 3000] [--database-url postgresql://...] [--snapshot REV]
        [--json FILE] [--keep]

In one run it

1. waits until no other benchmark runs (``bench/etl.py``, ``bench/query.py``);
2. builds a throw-away IAM store (``AccessControl`` over a temporary data dir; SQLite
   files, or the empty database of ``--database-url``): one user,
   ``analyst``, in 10 groups; 100 managed policies (Allow and Deny statements, wildcard
   actions and resources, ``${aws:username}`` resources; 40 of them with conditions),
   10 attached to each group; an access key for the user;
3. measures, in this process, each call timed on its own (``perf_counter_ns``), the
   kinds of call interleaved in blocks so that noise from the shared machine falls on
   all of them alike:
   * ``evaluate()`` over the user's 100 parsed policies, for four requests: allowed,
     allowed through a ``${aws:username}`` resource, implicitly denied, explicitly
     denied;
   * ``AccessControl.decide`` (decisions cached per principal, action, resource and the
     context keys the policies read, for the store's generation) and
     ``AccessControl.authorize`` (identify + decide + audit append) for the allowed one,
     each call as one API request (its own request id: the generation read once), with
     the decision cache and without it (``AccessControl(cache_decisions=False)``);
   * what those are made of: ``Principals.generation()``, ``lookup_key``, ``identify``,
     ``AuditLog.append``; SigV4 ``verify()`` with the store as credentials and with a
     dict; and the Athena request handler (``lakeward.http.athena._handle``, what the
     server runs per request after reading the body) in three set-ups:
       - ``full``: ``AccessControl`` as credentials and authorizer, as the server has it;
       - ``nocache``: the same without the decision cache (over HTTP only);
       - ``baseline``: a dict of key pairs and ``AllowAll`` (SigV4 still checked);
       - ``noauth``: as ``baseline``, with ``verify`` replaced by a stub that only reads
         the key id (no signature check);
   * the cold costs: a decision right after an IAM change (the 100 policies re-read and
     re-parsed), and the first decision of each action on freshly parsed policies;
4. serves the Athena API four times with uvicorn on 127.0.0.1, one process per set-up
   above (``full`` is ``lakeward.http.app.create_app`` itself), and sends
   ``GetWorkGroup`` and ``ListQueryExecutions`` signed by botocore over keep-alive httpx
   connections, the three servers in a shuffled order each round: per set-up the round
   trip, and per round the paired differences. ``GetWorkGroup`` authenticates but
   asks no policy (the service does not call ``authorize`` for it);
   ``ListQueryExecutions`` authenticates and authorizes (one audit record each).
   The servers also time their handler per request (the same ``_handle``, wrapped in
   the server process), which leaves HTTP out;
5. prints the figures against the targets (decision p50 <= 50 us; auth overhead per
   request <= 2 ms p99) and deletes what it wrote (unless ``--keep``).

CPU use of the rest of the machine is printed per phase: the machine is shared.
``--snapshot REV`` measures lakeward/ as committed at REV (exported to a temporary
dir), not the working tree that others may be editing.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import hashlib
import json
import os
import platform
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import (  # noqa: E402 - beside this script
    HEADER,
    TICK,
    Summary,
    machine_busy,
    say,
)

# lakeward is imported inside functions only: with --snapshot this process re-executes
# itself on a snapshot of the code before importing any of it.

REPO = Path(__file__).resolve().parent.parent
SNAPSHOT_ENV = "LAKEWARD_BENCH_SNAPSHOT"
KEY_ENV, SECRET_ENV = "LAKEWARD_BENCH_KEY_ID", "LAKEWARD_BENCH_SECRET"
DATABASE_ENV = "LAKEWARD_BENCH_DATABASE_URL"
# Matches the other benchmarks' command lines, not the pgrep that looks for them.
OTHER_BENCHMARKS = r"bench/[e]tl\.py|bench/[q]uery\.py"
MEASURED_CODE = ("lakeward/access", "lakeward/http", "lakeward/query/service.py")

USER = "analyst"
GROUPS = 10
POLICIES = 100
CONDITIONED = 40  # policies with at least one Condition
SEED = 20240501
BUCKET = "lakeward-data"
SOURCE_IP = "10.20.30.40"

TARGET_DECISION_P50_US = 50.0
TARGET_OVERHEAD_P99_US = 2000.0

VARIANTS = ("full", "nocache", "baseline", "noauth")
PAIRS = ("full - noauth", "nocache - noauth", "full - baseline", "baseline - noauth")
OPERATIONS = (("GetWorkGroup", {"WorkGroup": "primary"}), ("ListQueryExecutions", {}))
MEASURE_HEADER = "x-bench-measure"


def table(title: str, rows: dict[str, list[float]], width: int = 44) -> dict[str, Summary]:
    say(f"\n{title} (us)")
    say(f"  {'':<{width}} {HEADER}")
    summaries = {}
    for name, values in rows.items():
        summaries[name] = Summary.of(values)
        say(f"  {name:<{width}} {summaries[name].cells()}")
    return summaries


# --- CPU used by this benchmark, its servers and the rest of the machine ------------------


def _ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            rest = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(rest[11]) + int(rest[12])


@dataclass
class Load:
    wall: float = 0.0
    ours: float = 0.0  # cores used by this process and its servers, on average
    others: float = 0.0  # cores used by everything else

    def __str__(self) -> str:
        return f"{self.wall:.1f} s; cores used: benchmark {self.ours:.2f}, others {self.others:.2f}"


@contextlib.contextmanager
def load_meter(pids: list[int]) -> Iterator[Load]:
    load = Load()
    mine = [os.getpid(), *pids]
    start, busy, ours = time.monotonic(), machine_busy(), sum(map(_ticks, mine))
    try:
        yield load
    finally:
        load.wall = time.monotonic() - start
        ticks = TICK * max(load.wall, 1e-9)
        load.ours = (sum(map(_ticks, mine)) - ours) / ticks
        load.others = max(0.0, (machine_busy() - busy) / ticks - load.ours)


def machine_load(seconds: float = 2.0) -> float:
    """Cores the rest of the machine uses, over ``seconds``."""
    with load_meter([]) as load:
        time.sleep(seconds)
    return load.others


def wait_for_other_benchmarks(limit: float) -> None:
    deadline = time.monotonic() + limit
    while True:
        found = subprocess.run(
            ["pgrep", "-af", OTHER_BENCHMARKS], capture_output=True, text=True
        ).stdout.strip()
        if not found:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"another benchmark is still running after {limit:.0f} s:\n{found}")
        say(f"waiting for another benchmark to finish:\n  {found}")
        time.sleep(30)


# --- the policies ---------------------------------------------------------------------------


def workgroup(name: str) -> str:
    return f"arn:lakeward:athena:::workgroup/{name}"


def s3(key: str) -> str:
    return f"arn:lakeward:s3:::{BUCKET}/{key}" if key else f"arn:lakeward:s3:::{BUCKET}"


# Conditions that hold for the benchmark's requests (Allow) or do not (Deny), whether or
# not the request carries aws:SourceIp: the Athena API passes no such key (see README).
ALLOW_CONDITIONS: list[dict[str, Any]] = [
    {"DateLessThan": {"aws:CurrentTime": "2031-01-01T00:00:00Z"}},
    {"StringEquals": {"aws:username": [USER, "etl"]}},
    {"StringLike": {"aws:username": ["ana*", "team-*"]}},
    {"BoolIfExists": {"aws:SecureTransport": "true"}},
    {"NumericLessThanIfExists": {"aws:MultiFactorAuthAge": "3600"}},
    {
        "DateGreaterThan": {"aws:CurrentTime": "2020-01-01T00:00:00Z"},
        "StringNotEquals": {"aws:username": "intern"},
    },
    {"IpAddress": {"aws:SourceIp": ["10.0.0.0/8", "192.168.0.0/16"]}},
    {"ForAnyValue:StringLike": {"aws:PrincipalTag/team": ["data-*", "bi"]}},
]
DENY_CONDITIONS: list[dict[str, Any]] = [
    {"DateGreaterThan": {"aws:CurrentTime": "2031-01-01T00:00:00Z"}},
    {"StringLike": {"aws:username": ["contractor-*", "guest-*"]}},
    {"Bool": {"aws:MultiFactorAuthPresent": "false"}},
    {"NumericGreaterThan": {"aws:MultiFactorAuthAge": "86400"}},
    {"ForAnyValue:StringEquals": {"aws:TagKeys": ["pii", "restricted"]}},
]


def allow_statement(rng: random.Random) -> dict[str, Any]:
    g = rng.randrange(20)
    kind = rng.randrange(7)
    if kind == 0:
        actions: Any = [
            "athena:StartQueryExecution",
            "athena:GetQueryExecution",
            "athena:GetQueryResults",
            "athena:StopQueryExecution",
        ]
        resources: Any = [workgroup("primary"), workgroup(f"team-{g:02d}")]
    elif kind == 1:
        actions = rng.choice([["athena:Get*", "athena:List*"], "athena:*", ["athena:*Query*"]])
        resources = rng.choice([workgroup("*"), workgroup(f"team-{g:02d}"), "*"])
    elif kind == 2:
        actions = ["lakeward:UseCatalog", "athena:GetDataCatalog"]
        resources = rng.choice(
            ["arn:lakeward:athena:::datacatalog/*", f"arn:lakeward:athena:::datacatalog/c{g}"]
        )
    elif kind == 3:
        actions = rng.choice([["s3:GetObject", "s3:ListBucket"], "s3:Get*"])
        resources = [s3(""), s3(f"zone-{g:02d}/*"), s3("curated/*")]
    elif kind == 4:
        actions = ["s3:GetObject", "s3:PutObject"]
        resources = s3("home/${aws:username}/*")
    elif kind == 5:
        actions = ["secretsmanager:GetSecretValue", "secretsmanager:ListSecrets"]
        resources = f"arn:lakeward:secretsmanager:::secret/team-{g:02d}/*"
    else:
        actions = rng.choice([["quicksight:Describe*", "quicksight:List*"], "quicksight:*"])
        resources = "arn:lakeward:quicksight:::dashboard/*"
    return {"Effect": "Allow", "Action": actions, "Resource": resources}


def deny_statement(rng: random.Random) -> dict[str, Any]:
    g = rng.randrange(20)
    kind = rng.randrange(5)
    if kind == 0:
        return {"Effect": "Deny", "Action": "athena:*", "Resource": workgroup(f"restricted-{g}")}
    if kind == 1:
        return {
            "Effect": "Deny",
            "Action": ["s3:DeleteObject", "s3:PutObject"],
            "Resource": [s3("raw/*"), s3(f"zone-{g:02d}/archive/*")],
        }
    if kind == 2:
        return {"Effect": "Deny", "Action": "iam:*", "Resource": "*"}
    if kind == 3:
        return {
            "Effect": "Deny",
            "NotAction": ["athena:Get*", "athena:List*", "s3:Get*"],
            "Resource": workgroup(f"archive-{g}"),
        }
    return {
        "Effect": "Deny",
        "Action": ["athena:StartQueryExecution", "athena:StopQueryExecution"],
        "Resource": [workgroup(f"restricted-{g}"), workgroup("admin-*")],
    }


def make_policies() -> list[tuple[str, dict[str, Any]]]:
    """100 policies, deterministic. 40 have conditions; about a quarter of statements deny."""
    rng = random.Random(SEED)
    conditioned = set(rng.sample(range(POLICIES), CONDITIONED))
    policies = []
    for i in range(POLICIES):
        statements = []
        for j in range(rng.choice([1, 2, 2, 3, 3, 4])):
            deny = rng.random() < 0.25
            statement = deny_statement(rng) if deny else allow_statement(rng)
            # A conditioned Deny may name the whole service: it is its condition that
            # keeps it from applying, and evaluate must check it on every such request.
            if i in conditioned and (j == 0 or rng.random() < 0.5):
                if deny:
                    statement["Action"] = rng.choice(["athena:*", "*", ["s3:*", "athena:*"]])
                    statement.pop("NotAction", None)
                    statement["Resource"] = "*"
                pool = DENY_CONDITIONS if deny else ALLOW_CONDITIONS
                statement["Condition"] = rng.choice(pool)
            statements.append({"Sid": f"S{j}", **statement})
        policies.append((f"bench-{i:03d}", {"Version": "2012-10-17", "Statement": statements}))
    # The explicit-deny case: a protected zone nobody may delete from.
    policies[-1][1]["Statement"].append(
        {"Sid": "Protect", "Effect": "Deny", "Action": "s3:Delete*", "Resource": s3("gold/*")}
    )
    return policies


@dataclass(frozen=True)
class Case:
    name: str
    action: str
    resource: str
    expect: str  # the Decision.decision


CASES = [
    Case("allowed", "athena:StartQueryExecution", workgroup("team-03"), "allowed"),
    Case("allowed via ${aws:username}", "s3:GetObject", s3(f"home/{USER}/q.csv"), "allowed"),
    Case(
        "implicit deny",
        "secretsmanager:DeleteSecret",
        "arn:lakeward:secretsmanager:::secret/team-03/warehouse",
        "implicitDeny",
    ),
    Case("explicit deny", "s3:DeleteObject", s3("gold/covid/part-0.parquet"), "explicitDeny"),
]

# The context a server that knows the connection would add to decide()'s own keys.
EXTRA_CONTEXT: dict[str, object] = {"aws:SourceIp": SOURCE_IP, "aws:SecureTransport": True}


# --- set-up ---------------------------------------------------------------------------------


@dataclass
class Stack:
    data_dir: Path
    settings: Any
    access: Any  # AccessControl
    key_id: str
    secret: str
    policy_bytes: list[int] = field(default_factory=list)


def full_settings(data_dir: Path, database_url: str | None) -> Any:
    """The settings of the ``full`` set-up: the access state in SQLite files or ``database_url``."""
    from lakeward.config import Settings

    if database_url:
        return Settings(data_dir=data_dir, access={"database_url": database_url})
    return Settings(data_dir=data_dir)


def build_stack(data_dir: Path, database_url: str | None) -> Stack:
    from lakeward.access.control import AccessControl

    settings = full_settings(data_dir, database_url)
    access = AccessControl(settings)
    principals = access.principals
    principals.create_user(USER)
    for other in range(20):  # other users share the groups, as on a real stack
        principals.create_user(f"user-{other:02d}")
    for g in range(GROUPS):
        principals.create_group(f"team-{g:02d}")
        principals.add_user_to_group(USER, f"team-{g:02d}")
        for other in range(g, 20, GROUPS):
            principals.add_user_to_group(f"user-{other:02d}", f"team-{g:02d}")
    sizes = []
    for i, (name, document) in enumerate(make_policies()):
        principals.create_policy(name, document)
        principals.attach_group_policy(f"team-{i % GROUPS:02d}", name)
        sizes.append(len(json.dumps(document, separators=(",", ":"))))
    key_id, secret = principals.create_access_key(USER)
    for other in range(20):
        principals.create_access_key(f"user-{other:02d}")
    return Stack(data_dir, settings, access, key_id, secret, sizes)


# --- in-process measurements ------------------------------------------------------------------


def interleaved(
    calls: dict[str, Callable[[], object]], samples: int, block: int = 50
) -> dict[str, list[float]]:
    """Each call ``samples`` times, in blocks taken in turn; microseconds per call."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    clock = time.perf_counter_ns
    for round_ in range(-(-samples // block)):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            call, out = calls[name], times[name]
            for _ in range(min(block, samples - len(out))):
                start = clock()
                call()
                out.append((clock() - start) / 1000)
    return times


def signed(key_id: str, secret: str, host: str, operation: str, body: bytes) -> dict[str, str]:
    """Lower-cased headers of a POST / signed by botocore now, Host included."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    headers = {
        "Content-Type": "application/x-amz-json-1.1",
        "X-Amz-Target": f"AmazonAthena.{operation}",
    }
    request = AWSRequest(method="POST", url=f"http://{host}/", data=body, headers=headers)
    SigV4Auth(Credentials(key_id, secret), "athena", "us-east-1").add_auth(request)
    lower = {name.lower(): value for name, value in request.headers.items()}
    lower["host"] = host
    lower["content-length"] = str(len(body))
    return lower


class KeyPairs:
    def __init__(self, pairs: dict[str, str]) -> None:
        self.pairs = pairs

    def secret_for(self, access_key_id: str, session_token: str | None = None) -> str | None:
        return self.pairs.get(access_key_id)  # long-term keys only: no session token


def no_verify(
    method: str,
    path: str,
    query: str,
    headers: Any,
    body: bytes,
    credentials: Any,
    **_: object,
) -> str:
    """verify() without the checking: the key id, read from the Authorization header."""
    authorization = {k.lower(): v for k, v in headers.items()}["authorization"]
    return authorization.split("Credential=", 1)[1].split("/", 1)[0]


_requests = iter(range(1 << 62))


@contextlib.contextmanager
def one_request() -> Iterator[None]:
    """What follows is one API request: its own request id, as the server gives each."""
    from lakeward.access import current_request_id

    token = current_request_id.set(f"bench-{next(_requests)}")
    try:
        yield
    finally:
        current_request_id.reset(token)


def uncached_access(stack: Stack) -> Any:
    """An ``AccessControl`` over the same store without the decision cache (None before it)."""
    from lakeward.access.control import AccessControl

    try:
        return AccessControl(stack.settings, cache_decisions=False)  # type: ignore[call-arg]
    except TypeError:
        return None  # a snapshot of the code from before the cache


def measure_decisions(stack: Stack, samples: int) -> dict[str, Any]:
    from lakeward.access.control import Identity
    from lakeward.access.policy import Request, evaluate, parse_policy

    access = stack.access
    uncached = uncached_access(stack)
    documents = [
        (name, parse_policy(doc)) for name, doc in access.principals.policies_for_user(USER)
    ]
    statements = sum(len(d.statements) for _, d in documents)
    conditioned = sum(any(s.conditions for s in d.statements) for _, d in documents)
    say(
        f"\n{len(documents)} policies for {USER} ({statements} statements, {conditioned} "
        f"with conditions; {min(stack.policy_bytes)} to {max(stack.policy_bytes)} bytes "
        f"of JSON each)"
    )
    identity = Identity(USER)
    context = {
        "aws:username": USER,
        "aws:CurrentTime": datetime.now(UTC),
        **EXTRA_CONTEXT,
    }
    requests = {
        c.name: Request(identity.arn, c.action, c.resource, context=dict(context)) for c in CASES
    }

    # Cold: the first decision of each action fills each document's per-action index.
    cold: dict[str, float] = {}
    fresh = [(name, parse_policy(doc.source)) for name, doc in documents]
    for case in CASES:
        start = time.perf_counter_ns()
        evaluate(fresh, requests[case.name])
        cold[case.name] = (time.perf_counter_ns() - start) / 1000

    for case in CASES:
        decision = evaluate(documents, requests[case.name])
        action = case.action.lower()
        naming = [s for _, d in documents for s in d._naming(action)]
        denies = sum(s.effect == "Deny" for s in naming)
        say(
            f"  {case.name:<28} {case.action} on {case.resource}: {decision.decision} by "
            f"{decision.statement}; {len(naming)} statements name the action ({denies} Deny)"
        )
        if decision.decision != case.expect:
            raise SystemExit(f"{case.name}: expected {case.expect}, got {decision.decision}")
        with_context = access.decide(identity, case.action, case.resource, EXTRA_CONTEXT)
        if with_context.decision != case.expect:
            raise SystemExit(f"decide {case.name}: {with_context.decision}")
        if uncached is not None:
            fresh = uncached.decide(identity, case.action, case.resource, EXTRA_CONTEXT)
            if fresh != with_context:
                raise SystemExit(f"decide {case.name}: cached {with_context}, fresh {fresh}")

    allowed = CASES[0]
    calls: dict[str, Callable[[], object]] = {"(empty call: timer overhead)": lambda: None}
    for case in CASES:
        request = requests[case.name]
        calls[f"evaluate: {case.name}"] = lambda r=request: evaluate(documents, r)

    def decide(control: Any = access) -> object:
        with one_request():
            return control.decide(identity, allowed.action, allowed.resource, EXTRA_CONTEXT)

    def authorize(control: Any = access) -> object:
        with one_request():
            return control.authorize(
                allowed.action, allowed.resource, principal=stack.key_id, context=EXTRA_CONTEXT
            )

    calls["AccessControl.decide: allowed"] = decide
    calls["AccessControl.authorize: allowed (key id)"] = authorize
    if uncached is not None:
        calls["AccessControl.decide: allowed, no decision cache"] = lambda: decide(uncached)
        calls["AccessControl.authorize: allowed, no decision cache"] = lambda: authorize(uncached)
    times = interleaved(calls, samples)
    with_load = {"times": times}

    # After an IAM change every user's next decision re-reads and re-parses its policies.
    principals = access.principals
    reload_times = []
    for i in range(20):
        principals.create_group(f"churn-{i}")  # bumps the generation
        start = time.perf_counter_ns()
        decide()
        reload_times.append((time.perf_counter_ns() - start) / 1000)
    with_load["reload"] = reload_times
    with_load["cold"] = cold
    return with_load


def measure_components(stack: Stack, samples: int) -> dict[str, list[float]]:
    import lakeward.http.athena as athena
    from lakeward.access import AllowAll
    from lakeward.access.audit import AuditRecord
    from lakeward.config import Settings
    from lakeward.http.sigv4 import ReplayGuard, verify
    from lakeward.query.service import QueryService

    access = stack.access
    principals = access.principals
    full_api = QueryService(stack.settings, access=access)
    base_dir = stack.data_dir.parent / "baseline-inprocess"
    base_api = QueryService(Settings(data_dir=base_dir), access=AllowAll())
    pairs = KeyPairs({stack.key_id: stack.secret})
    guard = ReplayGuard()
    host = "127.0.0.1:8950"
    real_verify = athena.verify

    requests: dict[str, tuple[bytes, dict[str, str]]] = {}

    def sign_all() -> None:  # a signature is good for 5 minutes: renewed every round
        for operation, payload in OPERATIONS:
            body = json.dumps(payload).encode()
            requests[operation] = (body, signed(stack.key_id, stack.secret, host, operation, body))

    sign_all()

    def handle(api: Any, credentials: Any, operation: str, stub: bool = False) -> object:
        body, headers = requests[operation]
        if stub:
            athena.verify = no_verify
        try:
            return contextvars.copy_context().run(
                athena._handle, api, credentials, guard, headers, "/", "", body, "req-1"
            )
        finally:
            athena.verify = real_verify

    for operation, _ in OPERATIONS:  # all three answer, and alike
        answers = [
            handle(full_api, access, operation),
            handle(base_api, pairs, operation),
            handle(base_api, pairs, operation, stub=True),
        ]
        if operation == "ListQueryExecutions" and not all(a == answers[0] for a in answers):
            raise SystemExit(f"{operation}: the set-ups answer differently: {answers}")

    record = AuditRecord(
        principal="arn:lakeward:iam:::user/analyst",
        action="athena:ListQueryExecutions",
        resource=workgroup("primary"),
        decision="allowed",
        statement="bench-001/S0",
        request_id=str(uuid.uuid4()),
        source="athena-api",
    )
    list_body = requests["ListQueryExecutions"][0]
    calls: dict[str, Callable[[], object]] = {
        "Principals.generation()": principals.generation,
        "Principals.lookup_key(key id)": lambda: principals.lookup_key(stack.key_id),
        "AccessControl.identify(key id)": lambda: access.identify(stack.key_id),
        "AuditLog.append(record)": lambda: access.audit.append(record),
        "AccessControl.authorize: ListQueryExecutions": lambda: access.authorize(
            "athena:ListQueryExecutions", workgroup("primary"), principal=stack.key_id
        ),
        "sigv4.verify, AccessControl as credentials": lambda: verify(
            "POST", "/", "", requests["ListQueryExecutions"][1], list_body, access
        ),
        "sigv4.verify, dict of key pairs": lambda: verify(
            "POST", "/", "", requests["ListQueryExecutions"][1], list_body, pairs
        ),
    }
    for operation, _ in OPERATIONS:
        calls[f"_handle {operation}: full"] = lambda o=operation: handle(full_api, access, o)
        calls[f"_handle {operation}: baseline"] = lambda o=operation: handle(base_api, pairs, o)
        calls[f"_handle {operation}: noauth"] = lambda o=operation: handle(
            base_api, pairs, o, stub=True
        )
    times: dict[str, list[float]] = {name: [] for name in calls}
    chunk = max(200, samples // 10)
    while (done := len(next(iter(times.values())))) < samples:
        sign_all()
        for name, values in interleaved(calls, min(chunk, samples - done)).items():
            times[name].extend(values)
    full_api.close()
    base_api.close()
    return times


# --- over HTTP ----------------------------------------------------------------------------------


def serve(variant: str, data_dir: Path) -> None:
    """The server of one set-up (run in a child process); prints its port, then serves."""
    import uvicorn
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    import lakeward.http.athena as athena
    from lakeward.access import AllowAll
    from lakeward.config import Settings
    from lakeward.errors import LakewardError
    from lakeward.http.app import create_app
    from lakeward.http.errors import error_body
    from lakeward.query.service import QueryService

    settings = Settings(data_dir=data_dir)
    if variant == "nocache":
        import functools

        import lakeward.http.app as app_module

        try:
            uncached = functools.partial(app_module.AccessControl, cache_decisions=False)
            uncached(full_settings(data_dir, os.environ.get(DATABASE_ENV)))
            app_module.AccessControl = uncached  # type: ignore[misc]
        except TypeError:
            pass  # a snapshot of the code from before the cache: it has none to turn off
    if variant in ("full", "nocache"):
        app = create_app(full_settings(data_dir, os.environ.get(DATABASE_ENV)))
    else:
        if variant == "noauth":
            athena.verify = no_verify
        service = QueryService(settings, access=AllowAll())
        app = FastAPI()
        app.router.add_event_handler("shutdown", service.close)

        @app.exception_handler(LakewardError)
        async def _error(_request: Request, exc: LakewardError) -> JSONResponse:
            return JSONResponse(error_body(exc), status_code=exc.http_status)

        pairs = KeyPairs({os.environ[KEY_ENV]: os.environ[SECRET_ENV]})
        app.include_router(athena.athena_router(service, pairs))
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY on accepted sockets only when the
    # listening socket says TCP (as uvicorn.run(host=, port=), lakeward serve's way, does).
    # Without it the response's body waits for the client's delayed ACK, about 40 ms.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    # The handler's own time per measured request (the client marks those with an unsigned
    # header), from the thread that runs it: what auth adds inside the server.
    times: list[tuple[str, float]] = []
    handle = athena._handle

    def timed_handle(api: Any, credentials: Any, guard: Any, headers: Any, *rest: Any) -> Any:
        if MEASURE_HEADER not in headers:
            return handle(api, credentials, guard, headers, *rest)
        start = time.perf_counter_ns()
        try:
            return handle(api, credentials, guard, headers, *rest)
        finally:
            elapsed = (time.perf_counter_ns() - start) / 1000
            times.append((headers.get("x-amz-target", "").rpartition(".")[2], elapsed))

    athena._handle = timed_handle
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass  # uvicorn re-raises the SIGINT it stopped on
    finally:
        server_times_file(data_dir, variant).write_text(json.dumps(times))


def server_times_file(data_dir: Path, variant: str) -> Path:
    return data_dir.parent / f"server-{variant}-times.json"


@dataclass
class Server:
    variant: str
    process: subprocess.Popen[str]
    port: int
    log: Path


def start_server(variant: str, data_dir: Path, stack: Stack, log_dir: Path) -> Server:
    env = {**os.environ, KEY_ENV: stack.key_id, SECRET_ENV: stack.secret}
    database_url = getattr(getattr(stack.settings, "access", None), "database_url", None)
    if database_url:
        env[DATABASE_ENV] = database_url
    log = log_dir / f"server-{variant}.log"
    with open(log, "w") as err:
        process = subprocess.Popen(
            [sys.executable, __file__, "--serve", variant, "--data-dir", str(data_dir)],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
            cwd=REPO,
        )
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], 60)
    line = process.stdout.readline() if ready else ""
    if not line.startswith("PORT "):
        process.kill()
        raise SystemExit(f"server {variant} did not start:\n{log.read_text()[-3000:]}")
    return Server(variant, process, int(line.split()[1]), log)


def stop_server(server: Server) -> None:
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGINT)
        try:
            server.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


def measure_http(
    stack: Stack, servers: dict[str, Server], requests: int, warmup: int
) -> dict[str, Any]:
    import boto3
    import httpx
    from botocore.config import Config

    # The real SDK first: the full server must accept what boto3 signs.
    athena = boto3.client(
        "athena",
        endpoint_url=f"http://127.0.0.1:{servers['full'].port}",
        region_name="us-east-1",
        aws_access_key_id=stack.key_id,
        aws_secret_access_key=stack.secret,
        config=Config(retries={"max_attempts": 1}),
    )
    athena.list_query_executions()
    athena.get_work_group(WorkGroup="primary")

    # TCP_NODELAY, as botocore's urllib3 sets it: without it the body, sent after the
    # headers, waits for the server's delayed ACK (about 40 ms) now and then.
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    clients = {
        v: httpx.Client(
            base_url=f"http://127.0.0.1:{s.port}",
            timeout=30,
            transport=httpx.HTTPTransport(socket_options=nodelay),
        )
        for v, s in servers.items()
    }
    rng = random.Random(SEED)
    times = {(op, v): [] for op, _ in OPERATIONS for v in VARIANTS}
    paired = {(op, pair): [] for op, _ in OPERATIONS for pair in PAIRS}
    errors: list[str] = []
    clock = time.perf_counter_ns
    for i in range(warmup + requests):
        for operation, payload in OPERATIONS:
            body = json.dumps(payload).encode()
            order = list(VARIANTS)
            rng.shuffle(order)
            this_round = {}
            for variant in order:
                host = f"127.0.0.1:{servers[variant].port}"
                headers = signed(stack.key_id, stack.secret, host, operation, body)
                headers.pop("host")
                headers.pop("content-length")
                if i >= warmup:
                    headers[MEASURE_HEADER] = "1"  # not signed: SigV4 allows that
                start = clock()
                response = clients[variant].post("/", content=body, headers=headers)
                elapsed = (clock() - start) / 1000
                if response.status_code != 200:
                    errors.append(f"{variant} {operation}: {response.status_code} {response.text}")
                    continue
                this_round[variant] = elapsed
            if i < warmup or len(this_round) < len(VARIANTS):
                continue
            for variant, elapsed in this_round.items():
                times[(operation, variant)].append(elapsed)
            for pair in PAIRS:
                one, _, other = pair.partition(" - ")
                paired[(operation, pair)].append(this_round[one] - this_round[other])
    for client in clients.values():
        client.close()
    return {"times": times, "paired": paired, "errors": errors}


def audit_counts(stack: Stack) -> dict[str, int]:
    from sqlalchemy import func, select

    from lakeward.access.audit_tables import audit_log

    query = (
        select(audit_log.c.action, func.count())
        .where(audit_log.c.source == "athena-api")
        .group_by(audit_log.c.action)
    )
    with stack.access.audit.engine.connect() as conn:
        return {action: count for action, count in conn.execute(query)}


# --- the run --------------------------------------------------------------------------------------


def code_digest() -> tuple[str, str, bool]:
    """(commit, digest of the measured code, whether it differs from the commit)."""
    import lakeward

    root = Path(lakeward.__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for part in MEASURED_CODE:
        path = root / part
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes())
    commit = (
        os.environ.get(SNAPSHOT_ENV)
        or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
        ).stdout.strip()
    )
    dirty = not os.environ.get(SNAPSHOT_ENV) and bool(
        subprocess.run(
            ["git", "status", "--porcelain", "--", *MEASURED_CODE],
            capture_output=True,
            text=True,
            cwd=REPO,
        ).stdout.strip()
    )
    return commit, digest.hexdigest()[:12], dirty


def reexec_on_snapshot(rev: str) -> None:
    target = Path(tempfile.mkdtemp(prefix="lakeward-authz-snapshot-"))
    archive = subprocess.run(
        ["git", "archive", rev, "lakeward"], capture_output=True, check=True, cwd=REPO
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", rev], capture_output=True, text=True, cwd=REPO
    ).stdout.strip()
    env = {**os.environ, "PYTHONPATH": str(target), SNAPSHOT_ENV: commit}
    code = subprocess.run([sys.executable, __file__, *sys.argv[1:]], env=env).returncode
    shutil.rmtree(target, ignore_errors=True)
    raise SystemExit(code)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=20000, help="samples per decision call")
    parser.add_argument("--components", type=int, default=3000, help="samples per component")
    parser.add_argument("--requests", type=int, default=3000, help="HTTP rounds per operation")
    parser.add_argument("--warmup", type=int, default=200, help="HTTP rounds not counted")
    parser.add_argument("--snapshot", metavar="REV", help="measure lakeward/ as committed at REV")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    parser.add_argument(
        "--database-url",
        help="keep the access state in this (empty) database, e.g. postgresql://host/db; "
        "default: SQLite files in the temporary data dir",
    )
    parser.add_argument("--wait", type=float, default=1200, help="s to wait for other benchmarks")
    parser.add_argument("--serve", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.data_dir)
        return
    if args.snapshot and not os.environ.get(SNAPSHOT_ENV):
        reexec_on_snapshot(args.snapshot)
    wait_for_other_benchmarks(args.wait)

    import lakeward

    commit, digest, dirty = code_digest()
    say(f"lakeward {commit} (measured code digest {digest}{', MODIFIED' if dirty else ''})")
    say(f"  from {Path(lakeward.__file__).parent}")
    say(
        f"machine: {os.cpu_count()} cores, {platform.machine()}, Python "
        f"{platform.python_version()}; others using {machine_load():.2f} cores before start"
    )
    if os.environ.get("LAKEWARD_MASTER_KEY"):
        say("note: LAKEWARD_MASTER_KEY is set; the servers share it")

    root = Path(tempfile.mkdtemp(prefix="lakeward-authz-"))
    servers: dict[str, Server] = {}
    results: dict[str, Any] = {"commit": commit, "digest": digest, "dirty": dirty}
    backend = "PostgreSQL" if (args.database_url or "").startswith("postgres") else "SQLite"
    say(f"access state (IAM store, audit log) in {backend}")
    results["backend"] = backend
    try:
        with load_meter([]) as load:
            stack = build_stack(root / "full", args.database_url)
        say(f"IAM store built in {load}")

        with load_meter([]) as load:
            decisions = measure_decisions(stack, args.decisions)
        summary = table(
            "1. Decision latency, 100 policies in 10 groups, warm caches", decisions["times"]
        )
        say(f"   phase: {load}")
        cold = decisions["cold"]
        say("   first decision of each action on freshly parsed policies: ")
        say("     " + ", ".join(f"{name} {us:.0f} us" for name, us in cold.items()))
        reload = Summary.of(decisions["reload"])
        say(
            f"   decide right after an IAM change (policies re-read and re-parsed): "
            f"p50 {reload.p50:.0f} us, max {reload.max:.0f} us (n={reload.n})"
        )
        results["decisions"] = {k: v.__dict__ for k, v in summary.items()}
        results["decisions_cold_us"] = cold
        results["decide_after_change_us"] = reload.__dict__

        with load_meter([]) as load:
            components = measure_components(stack, args.components)
        summary = table("2a. In process: what a request's auth is made of", components)
        say(f"   phase: {load}")
        results["components"] = {k: v.__dict__ for k, v in summary.items()}
        for operation, _ in OPERATIONS:
            full = Summary.of(components[f"_handle {operation}: full"])
            base = Summary.of(components[f"_handle {operation}: baseline"])
            none = Summary.of(components[f"_handle {operation}: noauth"])
            say(
                f"   {operation}: handler overhead full - noauth: p50 {full.p50 - none.p50:.0f} "
                f"us, p99 {full.p99 - none.p99:.0f} us; full - baseline: p50 "
                f"{full.p50 - base.p50:.0f} us, p99 {full.p99 - base.p99:.0f} us"
            )

        before = audit_counts(stack)
        base_dirs = {v: root / v for v in VARIANTS if v not in ("full", "nocache")}
        with load_meter([]) as load:
            for variant in VARIANTS:
                servers[variant] = start_server(
                    variant, base_dirs.get(variant, stack.data_dir), stack, root
                )
        say(f"\nservers up in {load}: " + ", ".join(f"{v} :{s.port}" for v, s in servers.items()))
        pids = [s.process.pid for s in servers.values()]
        with load_meter(pids) as load:
            http = measure_http(stack, servers, args.requests, args.warmup)
        after = audit_counts(stack)
        out: dict[str, Any] = {}
        for operation, _ in OPERATIONS:
            rows = {v: http["times"][(operation, v)] for v in VARIANTS}
            rows |= {f"paired {pair}": http["paired"][(operation, pair)] for pair in PAIRS}
            s = table(f"3. Over HTTP: {operation}, round trip per set-up", rows, width=26)
            say(
                f"   difference of percentiles full - noauth: p50 "
                f"{s['full'].p50 - s['noauth'].p50:.0f} us, "
                f"p99 {s['full'].p99 - s['noauth'].p99:.0f} us; full - baseline: p50 "
                f"{s['full'].p50 - s['baseline'].p50:.0f} us, "
                f"p99 {s['full'].p99 - s['baseline'].p99:.0f} us; nocache - noauth: p50 "
                f"{s['nocache'].p50 - s['noauth'].p50:.0f} us, "
                f"p99 {s['nocache'].p99 - s['noauth'].p99:.0f} us"
            )
            out[operation] = {k: v.__dict__ for k, v in s.items()}
            audited = after.get(f"athena:{operation}", 0) - before.get(f"athena:{operation}", 0)
            say(f"   audit records written by the full server for {operation}: {audited}")
            out[operation]["audited"] = audited
        say(f"   phase: {load}")
        for server in servers.values():
            stop_server(server)
        handled: dict[tuple[str, str], list[float]] = {}
        for variant in VARIANTS:
            data_dir = base_dirs.get(variant, stack.data_dir)
            for operation, us in json.loads(server_times_file(data_dir, variant).read_text()):
                handled.setdefault((operation, variant), []).append(us)
        for operation, _ in OPERATIONS:
            rows = {v: handled.get((operation, v), []) for v in VARIANTS}
            s = table(f"3b. Inside the servers: {operation}, the handler's time", rows, width=26)
            say(
                f"   full - noauth: p50 {s['full'].p50 - s['noauth'].p50:.0f} us, p99 "
                f"{s['full'].p99 - s['noauth'].p99:.0f} us; full - baseline: p50 "
                f"{s['full'].p50 - s['baseline'].p50:.0f} us, p99 "
                f"{s['full'].p99 - s['baseline'].p99:.0f} us; nocache - noauth: p50 "
                f"{s['nocache'].p50 - s['noauth'].p50:.0f} us, p99 "
                f"{s['nocache'].p99 - s['noauth'].p99:.0f} us"
            )
            out[operation]["server"] = {k: v.__dict__ for k, v in s.items()}
        if http["errors"]:
            say(f"   {len(http['errors'])} errors, first: {http['errors'][0]}")
        results["http"] = out
        results["http_errors"] = len(http["errors"])
        results["http_load"] = load.__dict__

        decision_p50 = results["decisions"]["evaluate: allowed"]["p50"]
        decide_p50 = results["decisions"]["AccessControl.decide: allowed"]["p50"]
        authorize_p50 = results["decisions"]["AccessControl.authorize: allowed (key id)"]["p50"]
        overhead = out["ListQueryExecutions"]["paired full - noauth"]["p99"]
        inside = out["ListQueryExecutions"]["server"]
        inside_p99 = inside["full"]["p99"] - inside["noauth"]["p99"]
        uncached_p99 = out["ListQueryExecutions"]["paired nocache - noauth"]["p99"]
        say("\nTargets")
        for label, value, target in [
            ("decision p50, evaluate()", decision_p50, TARGET_DECISION_P50_US),
            ("decision p50, AccessControl.decide", decide_p50, TARGET_DECISION_P50_US),
            ("decision p50, AccessControl.authorize", authorize_p50, TARGET_DECISION_P50_US),
            ("auth overhead p99 over HTTP (paired)", overhead, TARGET_OVERHEAD_P99_US),
            ("auth overhead p99 inside the server", inside_p99, TARGET_OVERHEAD_P99_US),
            ("the same over HTTP, no decision cache", uncached_p99, TARGET_OVERHEAD_P99_US),
        ]:
            verdict = "met" if value <= target else "MISSED"
            say(f"  {label:<40} {value:9.1f} us  target {target:6.0f} us  {verdict}")
    finally:
        for server in servers.values():
            stop_server(server)
        if "stack" in locals():
            stack.access.principals.close()
            stack.access.audit.close()
        if args.json:
            args.json.write_text(json.dumps(results, indent=2, default=str))
        if args.keep:
            say(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
