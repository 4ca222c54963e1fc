"""The ``lakeward`` command: thin Typer commands over the service core.

Every command takes ``--data-dir`` and works on the stack in that dir.
Errors are printed as one plain sentence; there are no stack traces unless
``LAKEWARD_DEBUG=1``.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer
from rich.table import Table

from lakeward.cli._common import ConfigFile, DataDir, err, out, print_pairs, settings_for
from lakeward.cli.bi import bi_app
from lakeward.cli.db import db_app
from lakeward.cli.erasure import demo_app, erasure_app
from lakeward.cli.iam import audit, iam_app, secrets_app
from lakeward.cli.metastore import metastore_app
from lakeward.cli.tables import table_app
from lakeward.cli.workgroups import workgroup_app
from lakeward.errors import LakewardError, StackError

app = typer.Typer(
    help="lakeward: a self-hosted data lake (Spark ETL, Hive Metastore, Athena-style SQL).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
etl_app = typer.Typer(help="Data pipelines.", no_args_is_help=True)
app.add_typer(metastore_app, name="metastore")
app.add_typer(etl_app, name="etl")
app.add_typer(iam_app, name="iam")
app.add_typer(secrets_app, name="secrets")
app.add_typer(db_app, name="db")
app.command("audit")(audit)
app.add_typer(erasure_app, name="erasure")
app.add_typer(demo_app, name="demo-data")
app.add_typer(bi_app, name="bi")
app.add_typer(workgroup_app, name="workgroup")
app.add_typer(table_app, name="table")

CovidSource = Annotated[
    str | None,
    typer.Option(
        "--covid-source",
        "--source",
        help="Directory or URL of the JHU CSSE time series",
        show_default="JHU on GitHub, or LAKEWARD_COVID_SOURCE",
    ),
]


@app.command()
def up(
    data_dir: DataDir = None,
    config: ConfigFile = None,
    covid_source: CovidSource = None,
    reload: Annotated[bool, typer.Option(help="Run the covid ETL even if loaded")] = False,
) -> None:
    """Start the metastore and the server, load the covid tables, print the stack outputs."""
    from lakeward.progress import RichProgress
    from lakeward.stack import Stack

    settings = settings_for(data_dir, config, overrides={"covid.source": covid_source})
    with RichProgress() as progress:
        outputs = Stack(settings, progress).up(reload=reload)
    print_pairs(outputs)
    err.print(
        "AWS clients (boto3, the aws CLI, PyAthena, pyarrow) reach Athena and S3 at "
        f"AWS_ENDPOINT_URL={outputs['aws_endpoint_url']}: "
        f'eval "$(lakeward credentials --data-dir {settings.data_dir})"',
        highlight=False,
    )


@app.command()
def down(
    data_dir: DataDir = None,
    retain_data: Annotated[
        bool, typer.Option("--retain-data", help="Keep the data dir and the lake")
    ] = False,
) -> None:
    """Stop the stack and, without --retain-data, delete its data."""
    from lakeward.stack import Stack

    settings = settings_for(data_dir)
    Stack(settings).down(retain_data=retain_data)
    kept = "data kept in" if retain_data else "data deleted:"
    out.print(f"stack stopped; {kept} {settings.data_dir}")


@app.command()
def status(data_dir: DataDir = None) -> None:
    """Show each component of the stack and whether it is healthy."""
    from lakeward.stack import Stack

    components = Stack(settings_for(data_dir)).status()
    table = Table("component", "state", "detail")
    for component in components:
        colour = {"running": "green", "stopped": "dim", "unhealthy": "red"}[component.state]
        table.add_row(component.name, f"[{colour}]{component.state}[/]", component.detail)
    out.print(table)
    if any(c.state != "running" for c in components):
        raise typer.Exit(1)


@app.command()
def serve(
    data_dir: DataDir = None,
    host: Annotated[str | None, typer.Option(help="Address to bind")] = None,
    port: Annotated[int | None, typer.Option(help="Port to bind")] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Worker processes (server.workers)", show_default="one per CPU core"),
    ] = None,
) -> None:
    """Run the HTTP server in the foreground (`up` runs it in the background)."""
    import logging

    from lakeward.http.keeper import Keeper
    from lakeward.stack import SERVER_PORT

    settings = settings_for(
        data_dir,
        overrides={"server.host": host, "server.port": port, "server.workers": workers},
    )
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    Keeper(settings, settings.server.port or SERVER_PORT).run()


@etl_app.command("covid")
def etl_covid(data_dir: DataDir = None, covid_source: CovidSource = None) -> None:
    """Load the JHU CSSE COVID-19 time series into the lake and the metastore."""
    from lakeward.ingest.covid import CovidEtl
    from lakeward.progress import RichProgress

    settings = settings_for(data_dir, overrides={"covid.source": covid_source})
    with RichProgress() as progress:
        report = CovidEtl(settings, progress).run()
    table = Table("measure", "rows", "loaded", "quarantined", "no lat/long", "output rows")
    for m in report.measures:
        table.add_row(
            m.measure, str(m.rows_read), str(m.rows_loaded),
            str(m.rows_quarantined), str(m.rows_without_coordinates), f"{m.output_rows:,}",
        )  # fmt: skip
    out.print(table)
    bad_columns = sum(len(m.bad_date_columns) for m in report.measures)
    if report.quarantined:
        out.print(
            f"[yellow]{report.quarantined} rows/columns quarantined ({bad_columns} columns) "
            f"in {settings.covid.database}.covid_quarantine[/]"
        )
    timings = ", ".join(f"{k} {v:.1f}s" for k, v in report.timings.items())
    out.print(f"run {report.run_id}: {timings}")


@app.command()
def query(
    sql: Annotated[str, typer.Argument(help="Athena (Trino) SQL")],
    data_dir: DataDir = None,
    catalog: Annotated[str | None, typer.Option(help="Default catalog")] = None,
    database: Annotated[str | None, typer.Option(help="Default database")] = None,
    workgroup: Annotated[str | None, typer.Option(help="Workgroup", show_default="primary")] = None,
    output: Annotated[str, typer.Option(help="table, csv or json")] = "table",
    endpoint: Annotated[
        str | None, typer.Option(help="API endpoint", show_default="the stack's server")
    ] = None,
) -> None:
    """Run a query through the Athena-compatible API and print its result."""
    from rich.status import Status

    from lakeward.cli.sql import athena_client, print_result, run_query

    if output not in ("table", "csv", "json"):
        raise typer.BadParameter("must be table, csv or json", param_hint="--output")
    client = athena_client(settings_for(data_dir), endpoint)
    with Status("running query", console=err):
        names, rows, execution = run_query(client, sql, catalog, database, workgroup)
    print_result(names, rows, output)
    stats = execution.get("Statistics", {})
    err.print(
        f"{len(rows)} rows, {stats.get('TotalExecutionTimeInMillis', 0)} ms, "
        f"{stats.get('DataScannedInBytes', 0):,} bytes scanned",
        highlight=False,
    )


@app.command()
def credentials(data_dir: DataDir = None) -> None:
    """Print the API's access key pair as environment variables for AWS clients."""
    settings = settings_for(data_dir)
    if settings.api.access_key_id is None:
        raise StackError("the stack has no API credentials yet; start it with: lakeward up")
    out.print(f"export AWS_ACCESS_KEY_ID={settings.api.access_key_id}", highlight=False)
    out.print(f"export AWS_SECRET_ACCESS_KEY={settings.api.secret_access_key}", highlight=False)
    out.print(f"export AWS_DEFAULT_REGION={settings.api.region}", highlight=False)
    if settings.server.port is not None:
        url = settings.server_url
        # Every AWS SDK and the aws CLI send all services (Athena, S3) here.
        out.print(f"export AWS_ENDPOINT_URL={url}", highlight=False)


@app.command("spark-conf")
def spark_conf(data_dir: DataDir = None) -> None:
    """Print the stack's Spark settings as a properties file, for any Spark of your own:
    spark-sql --properties-file <(lakeward spark-conf). It holds the stack's key pair."""
    from lakeward.spark import spark_conf as stack_spark_conf

    settings = settings_for(data_dir)
    if settings.server.port is None:
        raise StackError("the stack has not been started yet; start it with: lakeward up")
    for key, value in stack_spark_conf(settings, "lakeward-spark").items():
        out.print(f"{key} {value}", highlight=False, soft_wrap=True)


def main() -> None:
    try:
        code = app(standalone_mode=False)
    except (typer.Abort, KeyboardInterrupt):
        err.print("aborted")
        sys.exit(130)
    except typer.TyperException as exc:  # usage errors: wrong option, missing argument
        exc.show()  # type: ignore[attr-defined]
        sys.exit(getattr(exc, "exit_code", 2))
    except LakewardError as exc:
        err.print(f"[red]error:[/] {exc.message}", highlight=False)
        sys.exit(exc.exit_code)
    except Exception as exc:  # a bug: say so plainly, without a trace unless asked
        if os.environ.get("LAKEWARD_DEBUG"):
            raise
        err.print(
            f"[red]unexpected error:[/] {type(exc).__name__}: {exc} "
            "(set LAKEWARD_DEBUG=1 for the details)",
            highlight=False,
        )
        sys.exit(70)
    sys.exit(code if isinstance(code, int) else 0)
