#!/usr/bin/env bash
# The side environment bench/tpc_data.py runs in: DuckDB 1.5.5 with its tpch and tpcds
# extensions from PyPI (built for that DuckDB only; lakeward itself does not need them).
set -euo pipefail
cd "$(dirname "$0")/.."
ENV=${TPC_ENV:-.venv-tpc}
[ -x "$ENV/bin/python" ] || python3 -m venv "$ENV"
"$ENV/bin/pip" install -q duckdb==1.5.5 duckdb-extension-tpch==1.5.5 duckdb-extension-tpcds==1.5.5
echo "$ENV/bin/python"
