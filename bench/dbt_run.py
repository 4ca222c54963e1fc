"""Benchmark of a 20-model dbt-athena project's ``dbt run`` against a running stack.

    .venv/bin/python bench/dbt_run.py --data-dir <a running stack's data dir> [--runs 2]

The project is generated in a temporary directory: 10 table models over the seed's
``covid_deaths`` (one per country group), 5 views over them, and 5 incremental models
(append), on the stack's ``awsdatacatalog`` through ``AWS_ENDPOINT_URL``. It runs
``dbt run`` ``--runs`` times (the first creates everything, the later ones replace the
tables and append to the incrementals) and prints, for each run, the wall time and the
part of it spent inside lakeward's SQL service: the sum of the run's queries'
``TotalExecutionTimeInMillis`` (they run one at a time: ``threads: 1``). What remains is
dbt itself (parsing, compiling, its Glue and S3 calls) and its polling: dbt-athena asks
for a query's state every ``poll_interval`` (1 s unless ``--poll-interval`` says).

dbt-athena runs from the side environment ``bench/clients_env.sh`` makes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import say  # noqa: E402

from lakeward.config import load_settings  # noqa: E402

GROUPS = [
    ("US", "Canada"), ("Brazil", "Argentina"), ("India", "Pakistan"), ("France", "Spain"),
    ("Italy", "Germany"), ("Russia", "Ukraine"), ("Mexico", "Peru"), ("Iran", "Iraq"),
    ("Japan", "Korea, South"), ("South Africa", "Egypt"),
]  # fmt: skip


def write_project(project: Path, bucket: str, poll_interval: float | None) -> None:
    models = project / "models"
    models.mkdir(parents=True)
    (project / "dbt_project.yml").write_text(
        "name: bench\nversion: '1.0'\nprofile: lakeward\nmodel-paths: ['models']\n"
    )
    (project / "profiles.yml").write_text(
        "lakeward:\n  target: dev\n  outputs:\n    dev:\n      type: athena\n"
        f"      s3_staging_dir: s3://{bucket}/dbt-bench-staging/\n"
        f"      s3_data_dir: s3://{bucket}/dbt-bench-data/\n"
        "      region_name: us-east-1\n      database: awsdatacatalog\n"
        "      schema: \"{{ env_var('DBT_SCHEMA') }}\"\n      work_group: primary\n"
        "      threads: 1\n"
        + (f"      poll_interval: {poll_interval}\n" if poll_interval is not None else "")
    )
    (models / "sources.yml").write_text(
        "version: 2\nsources:\n  - name: covid\n    schema: default\n"
        "    tables:\n      - name: covid_deaths\n"
    )
    for i, countries in enumerate(GROUPS):
        listed = ", ".join("'" + c.replace("'", "''") + "'" for c in countries)
        (models / f"deaths_{i}.sql").write_text(
            "{{ config(materialized='table') }}\n"
            "select country, date, sum(deaths) as deaths "
            "from {{ source('covid', 'covid_deaths') }} "
            f"where country in ({listed}) group by country, date\n"
        )
    for i in range(5):
        (models / f"peaks_{i}.sql").write_text(
            "{{ config(materialized='view') }}\n"
            f"select country, max(deaths) as peak from {{{{ ref('deaths_{i}') }}}}\n"
            "group by country\n"
        )
        (models / f"daily_{i}.sql").write_text(
            "{{ config(materialized='incremental', incremental_strategy='append') }}\n"
            f"select country, date, deaths from {{{{ ref('deaths_{i + 5}') }}}}\n"
            "{% if is_incremental() %} where date > (select max(date) from {{ this }}) "
            "{% endif %}\n"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument(
        "--poll-interval", type=float, default=None, help="dbt-athena's (default: its own, 1 s)"
    )
    args = parser.parse_args()
    dbt = ROOT / ".venv-clients" / "bin" / "dbt"
    if not dbt.is_file():
        sys.exit("dbt-athena is not installed: bash bench/clients_env.sh")

    import boto3

    settings = load_settings(data_dir=args.data_dir, env={})
    keys = {
        "AWS_ACCESS_KEY_ID": settings.api.access_key_id or "",
        "AWS_SECRET_ACCESS_KEY": settings.api.secret_access_key or "",
    }
    athena = boto3.client(
        "athena",
        endpoint_url=settings.server_url,
        region_name="us-east-1",
        aws_access_key_id=keys["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=keys["AWS_SECRET_ACCESS_KEY"],
    )
    schema = f"dbt_bench_{uuid.uuid4().hex[:6]}"
    env = {
        **os.environ,
        **keys,
        "AWS_ENDPOINT_URL": settings.server_url,
        "AWS_DEFAULT_REGION": "us-east-1",
        "DBT_SCHEMA": schema,
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
    }
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        write_project(project, settings.lake.data_bucket, args.poll_interval)
        say(f"{'run':<6}{'wall':>10}{'queries':>10}{'in lakeward':>14}{'share':>8}")
        for run in range(1, args.runs + 1):
            before = set(athena.list_query_executions(MaxResults=50)["QueryExecutionIds"])
            started = time.perf_counter()
            result = subprocess.run(
                [str(dbt), "run", "--project-dir", str(project), "--profiles-dir", str(project)],
                env=env,
                cwd=project,
                capture_output=True,
                text=True,
            )
            wall = time.perf_counter() - started
            if result.returncode != 0:
                sys.exit(result.stdout[-3000:])
            spent, count, token = 0.0, 0, None
            while True:
                page = athena.list_query_executions(
                    MaxResults=50, **({"NextToken": token} if token else {})
                )
                fresh = [i for i in page["QueryExecutionIds"] if i not in before]
                for start in range(0, len(fresh), 50):
                    found = athena.batch_get_query_execution(
                        QueryExecutionIds=fresh[start : start + 50]
                    )["QueryExecutions"]
                    for execution in found:
                        submitted = execution["Status"]["SubmissionDateTime"].timestamp()
                        if submitted >= time.time() - wall - 1:
                            count += 1
                            spent += execution["Statistics"]["TotalExecutionTimeInMillis"] / 1000
                token = page.get("NextToken")
                if not token or len(fresh) < len(page["QueryExecutionIds"]):
                    break
            say(f"{run:<6}{wall:>9.1f}s{count:>10}{spent:>13.1f}s{spent / wall:>8.0%}")


if __name__ == "__main__":
    main()
