#!/usr/bin/env bash
# PyAthena's own test suite, unchanged, against a running lakeward stack.
#
#   bash bench/pyathena_suite.sh <PyAthena checkout> [data dir] [test paths and pytest options]
#
# The suite runs in its own environment (.venv-pyathena-suite): the checkout's PyAthena
# with the test dependencies its pyproject.toml lists (polars, Jinja2, pytest...), at the
# versions its uv.lock holds where it has one.
# The suite reaches the stack as it reaches AWS: AWS_ENDPOINT_URL and the stack's key pair
# (lakeward credentials), its tables created under the lake's s3:// staging place. Its
# Spark tests need Athena for Spark's sessions, which is not offered: they are not run.
# Its SQLAlchemy compliance suite (tests/sqlalchemy, Iceberg tables) is run as its own
# project runs it, with pytest-xdist (e.g. `tests/sqlalchemy -n 3`): each xdist worker
# makes its own <ident>_test_schema databases, which a run without -n expects to exist.
# A JUnit report goes to pyathena-suite.xml in the current directory.
set -euo pipefail
suite=$(cd "$1" && pwd)
data_dir=${2:-.lakeward}
shift $(( $# >= 2 ? 2 : 1 ))
root=$(cd "$(dirname "$0")/.." && pwd)
report=$PWD/pyathena-suite.xml
env=$root/.venv-pyathena-suite
if [ ! -x "$env/bin/pytest" ]; then
  python3 -m venv "$env"
  # PyAthena takes its version from git; a checkout without its history gets a stand-in.
  git -C "$suite" rev-parse -q HEAD >/dev/null 2>&1 || export SETUPTOOLS_SCM_PRETEND_VERSION=0.0.0
  if [ -f "$suite/uv.lock" ]; then
    # The client libraries at the versions the checkout's suite was last run with: a newer
    # pandas or SQLAlchemy changes what the suite's assertions expect of PyAthena itself.
    "$env/bin/pip" install -q uv
    (cd "$suite" && "$env/bin/uv" export --frozen --no-hashes --all-extras --no-emit-project -q) \
      > "$env/locked.txt"
    "$env/bin/pip" install -q -r "$env/locked.txt"
  fi
  "$env/bin/pip" install -q "$suite[sqlalchemy,pandas,arrow,polars]" s3fs Jinja2 pytest \
    pytest-dependency pytest-xdist
fi
eval "$("$root/.venv/bin/lakeward" credentials --data-dir "$data_dir")"
bucket=$("$root/.venv/bin/python" -c "
from pathlib import Path; from lakeward.config import load_settings
print(load_settings(data_dir=Path('$data_dir'), env={}).lake.data_bucket)")
export AWS_DEFAULT_REGION=us-east-1
export AWS_ATHENA_S3_STAGING_DIR="s3://$bucket/pyathena-suite/"
# The suite's default workgroup takes the client's result place, as AWS's primary does; the
# stack's primary enforces its own, which the suite uses where it names a workgroup.
"$env/bin/python" - <<EOF
import boto3
athena = boto3.client("athena")
names = [w["Name"] for w in athena.list_work_groups()["WorkGroups"]]
if "pyathena-suite" not in names:
    athena.create_work_group(Name="pyathena-suite", Configuration={
        "ResultConfiguration": {"OutputLocation": "$AWS_ATHENA_S3_STAGING_DIR"},
        "EnforceWorkGroupConfiguration": False})
EOF
export AWS_ATHENA_WORKGROUP=primary
export AWS_ATHENA_DEFAULT_WORKGROUP=pyathena-suite
export AWS_ATHENA_SPARK_WORKGROUP=athena-for-spark-is-not-offered
cd "$suite"
[ $# -gt 0 ] || set -- tests/pyathena
exec "$env/bin/python" -m pytest -p no:cacheprovider -q -rfE \
  --ignore=tests/pyathena/spark --junitxml="$report" "$@"
