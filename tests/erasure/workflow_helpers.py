"""Shared by the purge workflow tests: a real SMTP server, a demo lake, lake fingerprints."""

from __future__ import annotations

import csv
import email
import gzip
import hashlib
import io
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import sqlalchemy as sa
from aiosmtpd.controller import Controller

from lakeward.config import Settings, load_settings
from lakeward.erasure.demo import create_demo
from lakeward.erasure.service import ErasureIndexService
from lakeward.process import free_port
from lakeward.storage import Storage

APPROVERS = ["approver@example.com", "dpo@example.com"]
LINK = re.compile(r"(https?://\S+/erasure/approval/\S+)")


@dataclass
class Mailbox:
    """What a real SMTP server on 127.0.0.1 received."""

    messages: list[Message] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        message = email.message_from_bytes(envelope.content)
        message["X-Rcpt"] = ", ".join(envelope.rcpt_tos)
        with self.arrived:
            self.messages.append(message)
            self.arrived.notify_all()
        return "250 OK"

    def wait_for(self, count: int, timeout: float = 10) -> list[Message]:
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.messages) >= count, timeout)
        assert len(self.messages) >= count, f"{len(self.messages)} messages, wanted {count}"
        return self.messages

    def links(self, message: Message) -> dict[str, str]:
        text = body_of(message)
        found = LINK.findall(text)
        return {"approve": found[0], "reject": found[1]}


def body_of(message: Message) -> str:
    for part in message.walk():
        if part.get_content_type() == "text/plain":
            payload = part.get_payload(decode=True)
            assert isinstance(payload, bytes)
            return payload.decode()
    raise AssertionError("no text part")


@contextmanager
def smtp_server() -> Iterator[tuple[Mailbox, int]]:
    mailbox = Mailbox()
    port = free_port("127.0.0.1", 8025)
    controller = Controller(mailbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield mailbox, port
    finally:
        controller.stop()


def workflow_settings(data_dir: Path, smtp_port: int, database_url: str | None = None) -> Settings:
    """Settings with approval email through the test's SMTP server, in a stack file
    (``<data dir>/lakeward.toml``) so that worker processes read the same."""
    data_dir.mkdir(parents=True, exist_ok=True)
    lines = [
        "[erasure]",
        'smtp_host = "127.0.0.1"',
        f"smtp_port = {smtp_port}",
        f"approvers = {json.dumps(APPROVERS)}",
        'public_url = "http://lakeward.test"',
        "purge_workers = 2",
        # Tests take the steps themselves; one that wants the server's worker turns it on.
        "run_worker = false",
    ]
    if database_url:
        lines.append(f"database_url = {json.dumps(database_url)}")
    (data_dir / "lakeward.toml").write_text("\n".join(lines) + "\n")
    return load_settings(data_dir=data_dir, config_file=data_dir / "lakeward.toml", env={})


def make_lake(settings: Settings, records: int = 1500, database_url: str | None = None) -> str:
    """Generate and index the demo lake (all formats, gzip too, a relational database)."""
    service = ErasureIndexService(settings)
    try:
        report = create_demo(service, records=records, seed=7, gzipped=True,
                             database_url=database_url)  # fmt: skip
        return str(report.database_url)
    finally:
        service.close()


def busiest_users(settings: Settings, count: int) -> list[str]:
    """Users with data in the most places (the interesting ones to erase)."""
    service = ErasureIndexService(settings)
    try:
        users = service.store.users()
    finally:
        service.close()
    return [u for u, _ in users.most_common(count)]


def _id(record: Any) -> str | None:
    value = record.get("user_id") if isinstance(record, dict) else None
    return value if isinstance(value, str) else None


def fingerprint(storage: Storage, bucket: str, database_url: str,
                gone: set[str]) -> dict[str, Any]:  # fmt: skip
    """Every record of every user but ``gone``, object by object and table by table.

    JSON lines keep line numbers and exact bytes; CSV the exact record texts;
    Parquet the rows; other objects their SHA-256. Objects that are wholly a
    gone user's are left out (they are to be deleted).
    """
    prints: dict[str, Any] = {}
    keys = storage.keys(bucket, "gdpr/")
    whole = set()  # objects a sidecar gives wholly to users, some of them gone
    for key in keys:
        sidecar = key.endswith(".meta.json")
        if sidecar and set(json.loads(storage.get(bucket, key))["user_ids"]) & gone:
            whole |= {key, key.removesuffix(".meta.json")}
    for key in keys:
        if key in whole:
            continue
        data = storage.get(bucket, key)
        if key.endswith(".gz"):
            data = gzip.decompress(data)
        name = key.rpartition("/")[2]
        if "/jsonl" in key:
            kept = []
            for number, line in enumerate(data.split(b"\n"), 1):
                if line and line != b"{}" and _id(json.loads(line)) not in gone:
                    kept.append((number, hashlib.sha256(line).hexdigest()))
            prints[key] = kept
        elif "/reviews/csv" in key:
            rows = list(csv.reader(io.StringIO(data.decode(), newline="")))
            prints[key] = [r for r in rows if r and r[0] not in gone]
        elif key.endswith(".parquet"):
            table = pq.read_table(pa.BufferReader(data))
            mask = pc.invert(
                pc.fill_null(pc.is_in(table["user_id"], pa.array(sorted(gone), pa.string())), False)
            )
            prints[key] = table.filter(mask).to_pylist()
        elif any(name.startswith(g + "-") for g in gone):
            continue
        else:
            prints[key] = hashlib.sha256(data).hexdigest()
    engine = sa.create_engine(database_url)
    with engine.connect() as conn:
        for table in ("user_profiles", "orders"):
            rows = conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY 1")).fetchall()
            prints[table] = [tuple(r) for r in rows if r._mapping.get("user_id") not in gone]
    engine.dispose()
    return prints


def remaining(storage: Storage, bucket: str, database_url: str, gone: set[str]) -> int:
    """Records of the gone users found by brute force anywhere in the lake and database."""
    found = 0
    for key in storage.keys(bucket, "gdpr/"):
        data = storage.get(bucket, key)
        if key.endswith(".gz"):
            data = gzip.decompress(data)
        found += sum(1 for g in gone if g.encode() in data)
        name = key.rpartition("/")[2]
        found += sum(1 for g in gone if name.startswith(g + "-"))
    engine = sa.create_engine(database_url)
    with engine.connect() as conn:
        for table in ("user_profiles", "orders"):
            query = sa.text(f"SELECT count(*) FROM {table} WHERE user_id IN :ids").bindparams(
                sa.bindparam("ids", expanding=True)
            )
            found += conn.scalar(query, {"ids": sorted(gone)}) or 0
    engine.dispose()
    return found
