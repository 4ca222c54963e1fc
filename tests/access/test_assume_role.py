"""sts:AssumeRole against the server, with boto3 and the aws CLI unchanged: temporary
credentials act with the role's policies only, name the session in the audit, end when
they expire or are revoked, and are handed out only as the role's trust policy and the
caller's own policies allow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from sqlalchemy import func, select

from lakeward.access.arns import ACCOUNT_ID, assumed_role_arn, iam_arn, s3_arn, user_arn
from lakeward.access.control import AccessControl
from lakeward.access.schema import role_sessions
from lakeward.config import Settings, load_settings
from lakeward.errors import InvalidRequest
from lakeward.http import create_app
from lakeward.storage import load_storage
from tests.helpers import lakeward, serving

BUCKET = "lakeward-data"
READER = "LakeReader"
PARTNER = "PartnerAccess"


def policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    root = {
        "LAKEWARD_API__ACCESS_KEY_ID": "AKLWROOTFORSTSTESTS",
        "LAKEWARD_API__SECRET_ACCESS_KEY": "root-secret-for-sts-tests",
    }
    settings = load_settings(data_dir=tmp_path_factory.mktemp("sts") / "data", env=root)
    storage = load_storage(settings)
    storage.ensure_bucket(BUCKET)
    storage.put(BUCKET, "covid/deaths.csv", b"country,deaths\nItaly,35724\n")
    return settings


@pytest.fixture(scope="module")
def keys(settings: Settings) -> dict[str, tuple[str, str]]:
    """analyst may assume LakeReader by its own policy; partner is trusted by name by
    PartnerAccess (with an external id); outsider has neither."""
    principals = AccessControl(settings).principals
    for user in ("analyst", "partner", "outsider"):
        principals.create_user(user)
    principals.create_role(READER)  # trusts the account: the callers' policies decide
    reads = {
        "Effect": "Allow",
        "Action": ["s3:GetObject", "s3:ListBucket"],
        "Resource": [s3_arn(BUCKET), s3_arn(BUCKET, "*")],
    }
    principals.put_role_policy(READER, "reads", policy(reads))
    may_assume = {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": iam_arn("role", "*")}
    principals.put_user_policy("analyst", "assume", policy(may_assume))
    trusted = {
        "Effect": "Allow",
        "Principal": {"AWS": user_arn("partner")},
        "Action": "sts:AssumeRole",
        "Condition": {"StringEquals": {"sts:ExternalId": "partner-7"}},
    }
    principals.create_role(PARTNER, trust_policy=policy(trusted), max_session_seconds=7200)
    principals.put_role_policy(PARTNER, "reads", policy(reads))
    return {user: principals.create_access_key(user) for user in ("analyst", "partner", "outsider")}


@pytest.fixture(scope="module")
def url(settings: Settings, keys: dict[str, tuple[str, str]]) -> Iterator[str]:
    with serving(create_app(settings)) as served:
        yield served


def client(service: str, url: str, key: tuple[str, str] | dict[str, str]) -> Any:
    if isinstance(key, dict):
        given = {
            "aws_access_key_id": key["AccessKeyId"],
            "aws_secret_access_key": key["SecretAccessKey"],
            "aws_session_token": key["SessionToken"],
        }
    else:
        given = {"aws_access_key_id": key[0], "aws_secret_access_key": key[1]}
    return boto3.client(service, endpoint_url=url, region_name="us-east-1", **given)


def code_of(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ClientError) as caught:
        call(*args, **kwargs)
    return str(caught.value.response["Error"]["Code"])


def test_an_assumed_role_acts_with_the_roles_policies_and_names_its_session(
    settings: Settings, url: str, keys: dict[str, tuple[str, str]]
) -> None:
    analyst = keys["analyst"]
    # The analyst's own policies do not read the lake.
    assert code_of(
        client("s3", url, analyst).get_object, Bucket=BUCKET, Key="covid/deaths.csv"
    ) == ("AccessDenied")
    answer = client("sts", url, analyst).assume_role(
        RoleArn=iam_arn("role", READER), RoleSessionName="nightly-report"
    )
    issued = answer["Credentials"]
    assert issued["AccessKeyId"].startswith("ASIA")
    lifetime = issued["Expiration"] - datetime.now(UTC)
    assert timedelta(minutes=59) < lifetime <= timedelta(hours=1)
    assert answer["AssumedRoleUser"]["Arn"] == assumed_role_arn(READER, "nightly-report")
    assert answer["AssumedRoleUser"]["AssumedRoleId"].endswith(":nightly-report")

    s3 = client("s3", url, issued)
    body = s3.get_object(Bucket=BUCKET, Key="covid/deaths.csv")["Body"].read()
    assert body == b"country,deaths\nItaly,35724\n"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]] == ["covid/deaths.csv"]
    # The role reads; it does not write.
    assert code_of(s3.put_object, Bucket=BUCKET, Key="covid/x.csv", Body=b"x") == "AccessDenied"
    me = client("sts", url, issued).get_caller_identity()
    assert me["Arn"] == assumed_role_arn(READER, "nightly-report")
    assert me["UserId"] == answer["AssumedRoleUser"]["AssumedRoleId"]

    # The audit names the session: who assumed what, and what the session did.
    records = AccessControl(settings).audit.query(limit=10_000)
    assumed = [r for r in records if r.action == "sts:AssumeRole"]
    assert [(r.principal, r.resource, r.decision) for r in assumed][-1] == (
        user_arn("analyst"),
        iam_arn("role", READER),
        "allowed",
    )
    by_session = {(r.action, r.decision) for r in records if r.principal == me["Arn"]}
    assert {("s3:GetObject", "allowed"), ("s3:PutObject", "implicitDeny")} <= by_session

    # Without its session token, or with another's, the key is nobody's.
    forged = {**issued, "SessionToken": issued["SessionToken"][:-8] + "AAAAAAA="}
    assert code_of(client("s3", url, forged).get_object, Bucket=BUCKET, Key="covid/deaths.csv") == (
        "InvalidAccessKeyId"
    )
    no_token = (issued["AccessKeyId"], issued["SecretAccessKey"])
    assert code_of(client("sts", url, no_token).get_caller_identity) == "InvalidClientTokenId"


def test_the_trust_policy_decides_who_may_assume(
    url: str, settings: Settings, keys: dict[str, tuple[str, str]]
) -> None:
    sts = {user: client("sts", url, key) for user, key in keys.items()}
    partner_role = iam_arn("role", PARTNER)
    # Neither trusted by the role nor allowed by its own policies.
    assert code_of(
        sts["outsider"].assume_role, RoleArn=iam_arn("role", READER), RoleSessionName="s1"
    ) == ("AccessDenied")
    # Trusted by name, with no policy of its own, but only with the external id asked for.
    assert code_of(sts["partner"].assume_role, RoleArn=partner_role, RoleSessionName="p1") == (
        "AccessDenied"
    )
    granted = sts["partner"].assume_role(
        RoleArn=partner_role, RoleSessionName="p1", ExternalId="partner-7", DurationSeconds=7200
    )
    lifetime = granted["Credentials"]["Expiration"] - datetime.now(UTC)
    assert timedelta(hours=1, minutes=59) < lifetime <= timedelta(hours=2)
    # The analyst may assume roles by its policies, but this one trusts only the partner.
    assert code_of(
        sts["analyst"].assume_role,
        RoleArn=partner_role,
        RoleSessionName="a1",
        ExternalId="partner-7",
    ) == ("AccessDenied")
    # A role nobody has is refused the same way, saying nothing of whether it exists.
    assert code_of(
        sts["analyst"].assume_role, RoleArn=iam_arn("role", "Nobody"), RoleSessionName="a1"
    ) == ("AccessDenied")
    # The account's root credential cannot assume roles, as in AWS.
    root = client("sts", url, (settings.api.access_key_id or "", settings.api.secret_access_key))
    with pytest.raises(ClientError) as caught:
        root.assume_role(RoleArn=iam_arn("role", READER), RoleSessionName="r1")
    assert "root" in caught.value.response["Error"]["Message"]


def sessions_issued(settings: Settings) -> int:
    with AccessControl(settings).principals.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(role_sessions)).scalar_one())


def test_bad_requests_name_the_parameter(
    settings: Settings, url: str, keys: dict[str, tuple[str, str]]
) -> None:
    sts = client("sts", url, keys["analyst"])
    before = sessions_issued(settings)
    role = iam_arn("role", READER)

    def error(**params: Any) -> tuple[str, str]:
        with pytest.raises(ClientError) as caught:
            sts.assume_role(**params)
        found = caught.value.response["Error"]
        return found["Code"], found["Message"]

    code, message = error(RoleArn=role, RoleSessionName="has space")
    assert code == "ValidationError" and "roleSessionName" in message
    code, message = error(RoleArn=role, RoleSessionName="a/b")
    assert code == "ValidationError" and "roleSessionName" in message
    code, message = error(RoleArn=role, RoleSessionName="ok1", DurationSeconds=7200)
    assert code == "ValidationError" and "MaxSessionDuration" in message
    code, message = error(RoleArn="arn:lakeward:iam:::user/analyst", RoleSessionName="ok1")
    assert code == "ValidationError" and "not a role ARN" in message
    code, message = error(RoleArn=role, RoleSessionName="ok1", Policy=policy())
    assert code == "InvalidParameterValue" and "Policy" in message
    assert sessions_issued(settings) == before  # no refused request issued credentials


def test_trust_policies_are_checked_field_by_field(settings: Settings) -> None:
    principals = AccessControl(settings).principals

    def refused(document: object) -> str:
        with pytest.raises(InvalidRequest) as caught:
            principals.create_role("Checked", trust_policy=json.dumps(document))
        return caught.value.message

    allow = {"Effect": "Allow", "Action": "sts:AssumeRole"}
    service = {**allow, "Principal": {"Service": "glue.amazonaws.com"}}
    assert refused({"Statement": [service]}).startswith("Statement[0].Principal.Service: ")
    assert "needs Principal" in refused({"Statement": [allow]})
    resource = {**allow, "Principal": "*", "Resource": "*"}
    assert refused({"Statement": [resource]}).startswith("Statement[0].Resource: ")
    stranger = {**allow, "Principal": {"AWS": "arn:lakeward:iam:::group/admins"}}
    assert refused({"Statement": stranger}).startswith("Statement.Principal.AWS: ")
    other_action = {**allow, "Principal": "*", "Action": "s3:GetObject"}
    assert "not an STS action" in refused({"Statement": [other_action]})
    assert "Checked" not in [r.name for r in principals.list_roles()]
    # AWS's spelling of a principal in lakeward's account is taken for lakeward's.
    aws_spelled = {**allow, "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT_ID}:user/partner"}}
    principals.create_role("AwsSpelled", trust_policy=json.dumps({"Statement": aws_spelled}))
    trust, longest = principals.role_trust("AwsSpelled")
    answer, _ = trust.decide(user_arn("partner"), iam_arn("role", "AwsSpelled"), {})
    assert (answer, longest) == ("caller", 3600)


def test_expired_and_revoked_credentials_stop_working(
    settings: Settings, url: str, keys: dict[str, tuple[str, str]]
) -> None:
    principals = AccessControl(settings).principals
    expired = principals.issue_role_session(READER, "long-gone", -1)
    creds = {
        "AccessKeyId": expired.key_id,
        "SecretAccessKey": expired.secret,
        "SessionToken": expired.token,
    }
    assert code_of(client("s3", url, creds).list_objects_v2, Bucket=BUCKET) == "ExpiredToken"
    assert code_of(client("athena", url, creds).list_work_groups) == "ExpiredTokenException"

    live = client("sts", url, keys["analyst"]).assume_role(
        RoleArn=iam_arn("role", READER), RoleSessionName="to-revoke"
    )["Credentials"]
    s3 = client("s3", url, live)
    assert s3.list_objects_v2(Bucket=BUCKET)["KeyCount"] == 1
    # A presigned URL made with them carries the session token, and lives no longer.
    presigned = s3.generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": "covid/deaths.csv"}
    )
    assert "Security-Token=" in presigned or "security-token=" in presigned
    assert urllib.request.urlopen(presigned, timeout=30).read() == b"country,deaths\nItaly,35724\n"
    assert principals.revoke_role_sessions(READER) >= 1
    assert code_of(s3.list_objects_v2, Bucket=BUCKET) == "InvalidAccessKeyId"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(presigned, timeout=30)
    assert refused.value.code == 403


def test_the_aws_cli_assumes_a_role_from_its_profile(
    url: str, keys: dict[str, tuple[str, str]], tmp_path: Path
) -> None:
    """The CLI's own assume-role provider (``role_arn`` and ``source_profile``), unchanged."""
    key_id, secret = keys["analyst"]
    (tmp_path / "credentials").write_text(
        f"[base]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\n"
    )
    (tmp_path / "config").write_text(
        "[profile base]\nregion = us-east-1\n"
        f"[profile reader]\nregion = us-east-1\nrole_arn = {iam_arn('role', READER)}\n"
        "source_profile = base\nrole_session_name = cli-session\n"
    )
    env = {
        **os.environ,
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
        "AWS_ENDPOINT_URL": url,
        "HOME": str(tmp_path),  # the CLI caches assumed-role credentials under ~/.aws/cli
    }
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        env.pop(name, None)
    aws = [str(Path(sys.executable).parent / "aws"), "--profile", "reader"]
    who = subprocess.run(
        [*aws, "sts", "get-caller-identity"], env=env, capture_output=True, text=True, timeout=60
    )
    assert who.returncode == 0, who.stderr
    assert json.loads(who.stdout)["Arn"] == assumed_role_arn(READER, "cli-session")
    copied = subprocess.run(
        [*aws, "s3", "cp", f"s3://{BUCKET}/covid/deaths.csv", "-"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert copied.returncode == 0, copied.stderr
    assert copied.stdout == "country,deaths\nItaly,35724\n"
    refused = subprocess.run(
        [*aws, "s3", "cp", "-", f"s3://{BUCKET}/covid/new.csv"],
        env=env,
        input="x\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0 and "AccessDenied" in refused.stderr


def test_the_cli_keeps_trust_policies_and_revokes_sessions(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    lakeward("iam", "create-user", "--user", "partner", data_dir=data_dir)
    trust = tmp_path / "trust.json"
    statement = {"Effect": "Allow", "Principal": {"AWS": user_arn("partner")}, "Action": "sts:*"}
    trust.write_text(policy(statement))
    lakeward(
        "iam", "create-role", "--role", "Shared", "--trust-policy", f"@{trust}",
        "--max-session", "1800", data_dir=data_dir,
    )  # fmt: skip
    shown = json.loads(lakeward("iam", "get-role", "--role", "Shared", data_dir=data_dir).stdout)
    assert shown["AssumeRolePolicyDocument"]["Statement"] == [statement]
    assert shown["MaxSessionDuration"] == 1800
    # A fault in the new document is named, and the old one stays.
    wrong = {**statement, "Principal": {"Service": "ec2.amazonaws.com"}}
    refused = lakeward(
        "iam", "update-assume-role-policy", "--role", "Shared", "--trust-policy", policy(wrong),
        data_dir=data_dir, check=False,
    )  # fmt: skip
    assert refused.returncode != 0 and "Statement[0].Principal.Service" in refused.stderr
    assert "Traceback" not in refused.stderr
    again = json.loads(lakeward("iam", "get-role", "--role", "Shared", data_dir=data_dir).stdout)
    assert again["AssumeRolePolicyDocument"]["Statement"] == [statement]
    settings = load_settings(data_dir=data_dir, env={})
    AccessControl(settings).principals.issue_role_session("Shared", "one", 900)
    revoked = lakeward("iam", "revoke-role-sessions", "--role", "Shared", data_dir=data_dir)
    assert "revoked 1 session(s)" in revoked.stdout
    assert sessions_issued(settings) == 0
