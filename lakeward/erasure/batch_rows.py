"""The Spark side of the batch index build: every record of a dataset's objects as a row.

``record_rows`` builds the job's DataFrame of (file_path, position, user_id, kind);
its expressions and the JSON lines UDF run on the executors, with the real-time
indexer's own rules for ids and positions (see batch.py for the whole build).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakeward.erasure.indexers import id_path
from lakeward.erasure.mappers import COMPOSITE_SEPARATOR, DatasetMapper

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# Row kinds the Spark job keeps (blank lines and placeholders are dropped there).
RECORD, NOT_JSON = 1, 2


def record_rows(
    spark: SparkSession, mapper: DatasetMapper, paths: list[str], header: tuple[str, ...]
) -> DataFrame:
    """(file_path, position, user_id, kind) of every record of the objects at ``paths``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    reader = spark.read
    if mapper.format == "jsonl":
        frame = reader.option("lineSep", "\n").text(paths)
    elif mapper.format == "csv":
        schema = StructType([StructField(name, StringType()) for name in header])
        frame = (
            reader.schema(schema)
            .options(header=True, multiLine=True, escape='"', mode="PERMISSIVE")
            .csv(paths)
        )
    else:
        frame = reader.parquet(*paths)
    frame = frame.select(
        "*",
        F.col("_metadata.file_path").alias("file_path"),
        (
            F.col("_metadata.row_index")
            if mapper.format == "parquet"
            else F.col("_metadata.file_block_start")
        ).alias("_block"),
        F.monotonically_increasing_id().alias("_seq"),
    )
    if mapper.format == "parquet":
        position = F.col("_block")  # the row index itself
    else:
        # Numbered before anything is dropped: a blank line keeps its number.
        position = F.row_number().over(Window.partitionBy("file_path").orderBy("_block", "_seq"))
    frame = frame.withColumn("position", position)
    if mapper.format == "jsonl":
        classified = _json_lines_udf(mapper.id_columns)(F.col("value"))
        frame = frame.select(
            "file_path", "position",
            classified.getField("user_id").alias("user_id"),
            classified.getField("kind").alias("kind"),
        ).where(F.col("kind") > 0)  # fmt: skip
    else:
        frame = frame.select(
            "file_path", "position",
            _id_column(mapper, frame).alias("user_id"), F.lit(RECORD).alias("kind"),
        )  # fmt: skip
    return frame


def _id_column(mapper: DatasetMapper, frame: DataFrame) -> Column:
    """The user id of a CSV or Parquet row, as the indexer reads it (None: no id)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegralType, StringType, StructType

    parts = []
    for spec in mapper.id_columns:
        path = id_path(spec) if mapper.format == "parquet" else (spec.removeprefix("$."),)
        column = F.col(f"`{path[0]}`")
        data_type: Any = frame.schema[path[0]].dataType
        for name in path[1:]:
            column = column.getField(name)
            data_type = data_type[name].dataType if isinstance(data_type, StructType) else None
        if isinstance(data_type, StringType):
            parts.append(F.when(column != "", column))
        elif isinstance(data_type, IntegralType):
            parts.append(column.cast("string"))
        else:
            parts.append(F.lit(None).cast("string"))  # the indexer takes no other type as an id
    if len(parts) == 1:
        return parts[0]
    missing = parts[0].isNull()
    for part in parts[1:]:
        missing = missing | part.isNull()
    return F.when(~missing, F.concat_ws(COMPOSITE_SEPARATOR, *parts))


def _json_lines_udf(id_columns: tuple[str, ...]) -> Any:
    """A vectorised UDF: line -> (kind, user id), with the indexer's own JSON id getter."""
    import pandas as pd  # type: ignore[import-untyped]
    from pyspark.sql.pandas.functions import pandas_udf

    def classify(lines: pd.Series) -> pd.DataFrame:
        import json

        from lakeward.erasure.indexers import _json_getter

        get_id = _json_getter(id_columns)
        kinds: list[int] = []
        users: list[str | None] = []
        for line in lines:
            # bytes.strip()'s whitespace, as the indexer tests lines for blankness.
            if line is None or not line.strip(" \t\n\r\x0b\x0c"):
                kinds.append(0)
                users.append(None)
                continue
            try:
                record = json.loads(line)
            except ValueError:
                kinds.append(NOT_JSON)
                users.append(None)
                continue
            kinds.append(0 if record == {} else RECORD)
            users.append(None if record == {} else get_id(record))
        return pd.DataFrame({"kind": kinds, "user_id": users})

    # Spark reads the UDF's kind from its annotations, which this module's
    # ``from __future__ import annotations`` turned into strings.
    classify.__annotations__ = {"lines": pd.Series, "return": pd.DataFrame}
    return pandas_udf("kind int, user_id string")(classify)  # type: ignore[call-overload]
