"""The tools Athena users run, unchanged, against the stack: dbt-athena, awswrangler, and
PyAthena's SQLAlchemy dialect and parameters. dbt-athena and awswrangler run in their own
environment (they pin other pyarrow and PyAthena versions), reached as AWS is: through
``AWS_ENDPOINT_URL`` and a key pair, with the catalog every Athena tool assumes
(``awsdatacatalog``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

from lakeward.config import Settings
from tests.helpers import need
from tests.query.support import api_ok, api_run, credentials, endpoint

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ROOT / ".venv-clients" / "bin"
DBT_PROJECT = Path(__file__).parent / "dbt_project"


def aws_environment(stack: Settings, tmp_path: Path) -> dict[str, str]:
    given = credentials(stack)
    return {
        **os.environ,
        "AWS_ENDPOINT_URL": endpoint(stack),
        "AWS_ACCESS_KEY_ID": given["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": given["aws_secret_access_key"],
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
    }


def clients_installed() -> None:
    need(
        (CLIENTS / "dbt").is_file() and (CLIENTS / "python").is_file(),
        "dbt-athena and awswrangler are not installed (bash bench/clients_env.sh)",
    )


def athena(stack: Settings) -> Any:
    return boto3.client("athena", endpoint_url=endpoint(stack), **credentials(stack))


def rows(stack: Settings, sql: str) -> list[list[str | None]]:
    return api_ok(athena(stack), sql)["rows"][1:]  # after Athena's labels row


# -- dbt-athena -----------------------------------------------------------------------------


def dbt(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(CLIENTS / "dbt"), *args, "--project-dir", str(project)]
    command += ["--profiles-dir", str(project)]
    return subprocess.run(
        command, env=env, cwd=project, capture_output=True, text=True, timeout=600
    )


def test_a_dbt_athena_project_runs_twice_tests_and_documents(
    stack: Settings, tmp_path: Path
) -> None:
    clients_installed()
    project = tmp_path / "project"
    shutil.copytree(DBT_PROJECT, project)
    schema = f"dbt_{uuid.uuid4().hex[:8]}"
    env = aws_environment(stack, tmp_path) | {"DBT_SCHEMA": schema}

    seeded = dbt(project, env, "seed")
    assert seeded.returncode == 0, seeded.stdout[-3000:]
    first = dbt(project, env, "run")
    assert first.returncode == 0, first.stdout[-3000:]
    assert rows(stack, f"SELECT count(*), max(date) FROM {schema}.daily_append") == [
        ["345", "2020-12-31"]  # the series starts on 2020-01-22
    ]
    second = dbt(project, env, "run")
    assert second.returncode == 0, second.stdout[-3000:]
    # append: the days after the newest loaded were added, nothing twice
    assert rows(
        stack, f"SELECT count(*), count(DISTINCT date), max(date) FROM {schema}.daily_append"
    ) == [["376", "376", "2021-01-31"]]
    # insert_overwrite: the partitions were rewritten, not added to
    assert rows(
        stack, f"SELECT country, count(*) FROM {schema}.daily_overwrite GROUP BY 1 ORDER BY 1"
    ) == [["France", "7"], ["Italy", "7"]]
    expected = rows(
        stack,
        "SELECT sum(d) FROM (SELECT max(deaths) d FROM default.covid_deaths "
        "WHERE country IN ('US', 'Brazil') GROUP BY country)",
    )
    # the view over the table model and the seed
    assert (
        rows(stack, f"SELECT deaths FROM {schema}.deaths_by_region WHERE region = 'Americas'")
        == expected
    )

    tested = dbt(project, env, "test")
    assert tested.returncode == 0 and "PASS=2" in tested.stdout, tested.stdout[-3000:]
    docs = dbt(project, env, "docs", "generate")
    assert docs.returncode == 0, docs.stdout[-3000:]
    catalog = json.loads((project / "target" / "catalog.json").read_text())
    nodes = {n.split(".")[-1]: v for n, v in catalog["nodes"].items()}
    assert set(nodes["deaths_by_country"]["columns"]) == {"country", "deaths"}
    assert nodes["deaths_by_region"]["metadata"]["type"] == "view"

    # A model that fails halfway leaves no table behind.
    broken = dbt(project, env, "run", "--select", "broken_model", "--vars", "{with_broken: true}")
    assert broken.returncode != 0
    assert "no_such_column" in broken.stdout
    glue = boto3.client("glue", endpoint_url=endpoint(stack), **credentials(stack))
    names = {t["Name"] for t in glue.get_tables(DatabaseName=schema)["TableList"]}
    assert not {n for n in names if n.startswith("broken_model")}, names


# -- awswrangler ----------------------------------------------------------------------------

WRANGLER = """
import json, sys, uuid
import awswrangler as wr
import pandas as pd

bucket, database = sys.argv[1], sys.argv[2]
top = "SELECT country, max(deaths) AS d FROM covid_deaths GROUP BY 1 ORDER BY 2 DESC LIMIT 3"
out = {}
out["ctas"] = wr.athena.read_sql_query(top, database="default").values.tolist()
plain = wr.athena.read_sql_query(top, database="default", ctas_approach=False)
out["plain"] = plain.values.tolist()
out["unload"] = wr.athena.read_sql_query(
    top, database="default", ctas_approach=False, unload_approach=True,
    s3_output=f"s3://{bucket}/wrangler-unload/{uuid.uuid4().hex}/",
).values.tolist()
wr.catalog.create_database(database)
people = pd.DataFrame(
    {"id": [1, 2, 3], "name": ["ada", "grace", "alan"], "year": [2020, 2020, 2021]}
)
place = f"s3://{bucket}/wrangler/{database}/people/"
table = {"database": database, "table": "people", "partition_cols": ["year"]}
wr.s3.to_parquet(people, path=place, dataset=True, mode="overwrite", **table)
later = people.iloc[:1].assign(id=4, year=2022)
wr.s3.to_parquet(later, path=place, dataset=True, mode="append", **table)
out["people"] = wr.athena.read_sql_query(
    "SELECT id, name, year FROM people ORDER BY id", database=database).values.tolist()
out["qmark"] = wr.athena.read_sql_query(
    "SELECT name FROM people WHERE year = ? AND name <> ?", database=database,
    params=["2020", "'ada'"], paramstyle="qmark", ctas_approach=False).values.tolist()
out["databases"] = wr.catalog.databases()["Database"].tolist()
out["tables"] = wr.catalog.tables(database=database)["Table"].tolist()
out["columns"] = wr.catalog.table(database=database, table="people")["Column Name"].tolist()
partitions = wr.catalog.get_parquet_partitions(database=database, table="people")
out["partitions"] = sorted(partitions.values())
print(json.dumps(out, default=str))
"""


def test_awswrangler_reads_writes_and_catalogs(stack: Settings, tmp_path: Path) -> None:
    clients_installed()
    script = tmp_path / "wrangler.py"
    script.write_text(textwrap.dedent(WRANGLER))
    database = f"wr_{uuid.uuid4().hex[:8]}"
    ran = subprocess.run(
        [str(CLIENTS / "python"), str(script), stack.lake.data_bucket, database],
        env=aws_environment(stack, tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    out = json.loads(ran.stdout.strip().splitlines()[-1])
    top = [[c, int(d)] for c, d in rows(stack, (
        "SELECT country, max(deaths) FROM default.covid_deaths GROUP BY 1 ORDER BY 2 DESC LIMIT 3"
    ))]  # fmt: skip
    # Each approach returns the rows (ctas_approach reads the CTAS's data manifest).
    assert out["ctas"] == out["plain"] == out["unload"] == top
    assert out["people"] == [
        [1, "ada", 2020],
        [2, "grace", 2020],
        [3, "alan", 2021],
        [4, "ada", 2022],
    ]
    assert out["qmark"] == [["grace"]]
    assert database in out["databases"] and out["tables"] == ["people"]
    assert out["columns"] == ["id", "name", "year"]
    assert [p for [p] in out["partitions"]] == ["2020", "2021", "2022"]


# -- PyAthena: SQLAlchemy and parameters -------------------------------------------------------


def test_pyathena_has_table_reflection_and_both_paramstyles_on_its_defaults(
    stack: Settings,
) -> None:
    from pyathena import connect
    from sqlalchemy import create_engine, inspect, text

    given = credentials(stack)
    # PyAthena's defaults: catalog awsdatacatalog, schema default.
    url = (
        "awsathena+rest://{aws_access_key_id}:{aws_secret_access_key}@athena.us-east-1."
        "amazonaws.com:443/default?s3_staging_dir=s3%3A%2F%2Fstaging%2F"
        "&endpoint_url={endpoint}&poll_interval=0.05"
    ).format(endpoint=endpoint(stack), **given)
    engine = create_engine(url)
    inspector = inspect(engine)
    assert inspector.has_table("covid_deaths")
    assert not inspector.has_table("no_such_table")  # MetadataException: "no such table"
    columns = {c["name"]: str(c["type"]) for c in inspector.get_columns("covid_deaths")}
    assert columns["deaths"] == "BIGINT" and columns["country"].startswith("VARCHAR")
    with engine.connect() as conn:
        found = conn.execute(
            text("SELECT count(*) FROM covid_deaths WHERE country = :country"),
            {"country": "Iceland"},
        ).scalar()
    expected = int(rows(stack, "SELECT count(*) FROM covid_deaths WHERE country = 'Iceland'")[0][0])
    assert found == expected > 0

    options = {"s3_staging_dir": "s3://staging/", "endpoint_url": endpoint(stack), **given}
    pyformat = connect(**options, poll_interval=0.05).cursor()
    pyformat.execute(
        "SELECT max(deaths) FROM covid_deaths WHERE country = %(country)s", {"country": "Iceland"}
    )
    # qmark: the values go to the server as ExecutionParameters, bound there.
    qmark = connect(**options, poll_interval=0.05).cursor()
    qmark.execute(
        "SELECT max(deaths) FROM covid_deaths WHERE country = ?", ["'Iceland'"], paramstyle="qmark"
    )
    assert pyformat.fetchall() == qmark.fetchall()
    with pytest.raises(Exception, match="Incorrect number of parameters"):
        qmark.execute("SELECT ? + ?", ["1"], paramstyle="qmark")


def test_a_failed_query_carries_athenas_error_block(stack: Settings) -> None:
    client = athena(stack)
    typo = api_run(client, "SELECT sum(deathz) FROM covid_deaths")
    error = typo["Status"]["AthenaError"]
    assert (error["ErrorCategory"], error["Retryable"]) == (2, False)  # the user's error
    assert error["ErrorMessage"] == typo["Status"]["StateChangeReason"]
    with pytest.raises(client.exceptions.MetadataException):
        client.get_table_metadata(
            CatalogName="AwsDataCatalog", DatabaseName="default", TableName="no_such_table"
        )
    catalog = client.get_data_catalog(Name="AwsDataCatalog")["DataCatalog"]
    assert catalog["Type"] == "GLUE" and catalog["Parameters"]["catalog-id"]
