"""The index's maintenance commands are authorized and audited like ``erasure find``."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeward.access.control import AccessControl
from lakeward.config import load_settings
from tests.helpers import lakeward, parse_outputs


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("index-access") / "data"


def user_env(data_dir: Path, name: str, actions: list[str]) -> dict[str, str]:
    """Keys of a new IAM user whose one policy allows ``actions`` (none: no policy)."""
    access = AccessControl(load_settings(data_dir=data_dir, env={}))
    access.principals.create_user(name)
    if actions:
        document = {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": actions, "Resource": "arn:lakeward:erasure:::*"},
        ]}  # fmt: skip
        access.principals.create_policy(f"{name}-policy", document)
        access.principals.attach_user_policy(name, f"{name}-policy")
    key_id, secret = access.principals.create_access_key(name)
    return {"AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret}


def test_build_needs_erasure_build_index(data_dir: Path) -> None:
    outsider = user_env(data_dir, "outsider", [])
    denied = lakeward("erasure", "index", "build", data_dir=data_dir, env=outsider, check=False)
    assert denied.returncode == 1
    assert "not authorized to perform: erasure:BuildIndex" in denied.stderr
    assert "arn:lakeward:erasure:::index" in denied.stderr
    assert "Traceback" not in denied.stderr

    builder = user_env(data_dir, "builder", ["erasure:BuildIndex"])
    built = lakeward("erasure", "index", "build", data_dir=data_dir, env=builder)
    assert "0 objects: 0 indexed" in built.stdout
    assert "0 objects: 0 indexed" in lakeward("erasure", "index", "build", data_dir=data_dir).stdout

    audit = lakeward("audit", data_dir=data_dir).stdout
    lines = [line for line in audit.splitlines() if "erasure:BuildIndex" in line]
    assert any("outsider" in line and "implicitDeny" in line for line in lines), audit
    assert any("builder" in line and "allowed" in line for line in lines), audit


def test_webhook_token_needs_its_own_permissions(data_dir: Path) -> None:
    as_root = lakeward("erasure", "index", "webhook", data_dir=data_dir)
    token = parse_outputs(as_root.stdout)["token"]
    assert len(token) >= 32

    outsider = user_env(data_dir, "stranger", ["erasure:Find"])
    denied = lakeward("erasure", "index", "webhook", data_dir=data_dir, env=outsider, check=False)
    assert denied.returncode == 1
    assert "not authorized to perform: erasure:GetWebhookToken" in denied.stderr
    assert token not in denied.stdout + denied.stderr

    reader = user_env(data_dir, "reader", ["erasure:GetWebhookToken"])
    read = lakeward("erasure", "index", "webhook", data_dir=data_dir, env=reader)
    assert parse_outputs(read.stdout)["token"] == token
    refused = lakeward("erasure", "index", "webhook", "--rotate", data_dir=data_dir, env=reader,
                       check=False)  # fmt: skip
    assert refused.returncode == 1
    assert "not authorized to perform: erasure:RotateWebhookToken" in refused.stderr
    unchanged = lakeward("erasure", "index", "webhook", data_dir=data_dir, env=reader)
    assert parse_outputs(unchanged.stdout)["token"] == token

    rotator = user_env(data_dir, "rotator", ["erasure:RotateWebhookToken", "erasure:GetWebhook*"])
    rotated = lakeward("erasure", "index", "webhook", "--rotate", data_dir=data_dir, env=rotator)
    new_token = parse_outputs(rotated.stdout)["token"]
    assert new_token != token
    again = lakeward("erasure", "index", "webhook", data_dir=data_dir, env=reader)
    assert parse_outputs(again.stdout)["token"] == new_token

    audit = lakeward("audit", data_dir=data_dir).stdout
    assert any(
        "stranger" in line and "erasure:GetWebhookToken" in line and "implicitDeny" in line
        for line in audit.splitlines()
    ), audit
    assert any(
        "reader" in line and "erasure:RotateWebhookToken" in line and "implicitDeny" in line
        for line in audit.splitlines()
    ), audit
