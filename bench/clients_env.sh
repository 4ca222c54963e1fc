#!/usr/bin/env bash
# The side environment the client tests run the AWS tools in, unchanged: dbt-athena and
# awswrangler pin versions of pyarrow and PyAthena other than lakeward's own.
set -euo pipefail
cd "$(dirname "$0")/.."
ENV=${CLIENTS_ENV:-.venv-clients}
[ -x "$ENV/bin/python" ] || python3 -m venv "$ENV"
"$ENV/bin/pip" install -q dbt-core==1.11.* dbt-athena==1.11.1 awswrangler==3.17.1
echo "$ENV/bin/python"
