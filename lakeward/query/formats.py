"""Table formats: what a Hive storage descriptor says about a table's files, both ways.

A table's format lives in the metastore as three class names (input format, output
format, SerDe) and the SerDe's parameters; Athena users name it with ``STORED AS``,
``ROW FORMAT DELIMITED|SERDE`` or a CTAS's ``format = '...'``. This module is the one
place that turns either into the other: DDL writes the descriptor a ``StoredAs`` names,
CTAS/INSERT/UNLOAD write files of that format, and the engines' readers pick their
reader by ``TableFormat.of(table)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from lakeward.errors import InvalidRequest

if TYPE_CHECKING:
    from lakeward.metastore.tables import TableInfo

Kind = Literal["parquet", "orc", "text", "csv", "json", "avro"]
"""How files are read: text is LazySimpleSerDe (delimited, no quotes), csv is OpenCSVSerde."""

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
"""The directory value, and the partition value the metastore keeps, of a NULL partition key."""

PARQUET_INPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUTPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
ORC_INPUT = "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
ORC_OUTPUT = "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat"
ORC_SERDE = "org.apache.hadoop.hive.ql.io.orc.OrcSerde"
TEXT_INPUT = "org.apache.hadoop.mapred.TextInputFormat"
TEXT_OUTPUT = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
# What Athena records for the OpenX JSON SerDe when no STORED AS names the output format.
OLD_TEXT_OUTPUT = "org.apache.hadoop.hive.ql.io.IgnoreKeyTextOutputFormat"
LAZY_SIMPLE_SERDE = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
OPEN_CSV_SERDE = "org.apache.hadoop.hive.serde2.OpenCSVSerde"
HIVE_JSON_SERDE = "org.apache.hive.hcatalog.data.JsonSerDe"
OPENX_JSON_SERDE = "org.openx.data.jsonserde.JsonSerDe"
AVRO_INPUT = "org.apache.hadoop.hive.ql.io.avro.AvroContainerInputFormat"
AVRO_OUTPUT = "org.apache.hadoop.hive.ql.io.avro.AvroContainerOutputFormat"
AVRO_SERDE = "org.apache.hadoop.hive.serde2.avro.AvroSerDe"

_SERDE_KINDS: dict[str, Kind] = {
    PARQUET_SERDE: "parquet",
    ORC_SERDE: "orc",
    LAZY_SIMPLE_SERDE: "text",
    OPEN_CSV_SERDE: "csv",
    HIVE_JSON_SERDE: "json",
    OPENX_JSON_SERDE: "json",
    AVRO_SERDE: "avro",
}
# SerDes Athena reads and lakeward does not. A table naming one is kept in the catalog, as
# a crawler or another tool may make it, and a query that reads it is refused.
CATALOGUED_ONLY = {
    "com.amazonaws.glue.serde.GrokSerDe": "Grok patterns",
    "org.apache.hadoop.hive.serde2.RegexSerDe": "regular expressions",
    "com.amazon.emr.hive.serde.CloudTrailSerde": "CloudTrail logs",
    "com.amazon.ionhiveserde.IonHiveSerDe": "Amazon Ion",
}


@dataclass(frozen=True)
class TableFormat:
    """A table's storage descriptor: the classes Hive names and the SerDe's parameters."""

    input_format: str
    output_format: str
    serde: str
    serde_parameters: dict[str, str] = field(default_factory=dict)

    @property
    def kind(self) -> Kind:
        """How the files are read; unknown SerDes are refused, never guessed."""
        kind = _SERDE_KINDS.get(self.serde)
        if kind is None:
            what = CATALOGUED_ONLY.get(self.serde)
            if what is not None:
                raise InvalidRequest(
                    f"SerDe {self.serde} ({what}) is not supported: lakeward keeps such "
                    "a table in the catalog but does not read its files"
                )
            raise InvalidRequest(f"SerDe {self.serde} is not supported")
        return kind

    def check_known(self) -> None:
        """Refuse a SerDe that neither lakeward nor Athena reads."""
        if self.serde not in CATALOGUED_ONLY:
            self.kind  # noqa: B018 - raises for a SerDe no reader knows

    @classmethod
    def of(cls, table: TableInfo) -> TableFormat:
        """A metastore table's format (a descriptor with no SerDe is Parquet's)."""
        return cls(
            table.input_format or PARQUET_INPUT,
            table.output_format or PARQUET_OUTPUT,
            table.serde or PARQUET_SERDE,
            dict(table.serde_parameters),
        )


PARQUET = TableFormat(PARQUET_INPUT, PARQUET_OUTPUT, PARQUET_SERDE, {"serialization.format": "1"})
ORC = TableFormat(ORC_INPUT, ORC_OUTPUT, ORC_SERDE, {"serialization.format": "1"})
TEXTFILE = TableFormat(TEXT_INPUT, TEXT_OUTPUT, LAZY_SIMPLE_SERDE, {"serialization.format": "1"})
JSON = TableFormat(TEXT_INPUT, TEXT_OUTPUT, HIVE_JSON_SERDE, {"serialization.format": "1"})
AVRO = TableFormat(AVRO_INPUT, AVRO_OUTPUT, AVRO_SERDE, {"serialization.format": "1"})

STORED_AS: dict[str, TableFormat] = {
    "PARQUET": PARQUET,
    "ORC": ORC,
    "TEXTFILE": TEXTFILE,
    "JSON": JSON,
    "AVRO": AVRO,
}
"""``STORED AS <name>`` and a CTAS's ``format = '<name>'``, upper-cased."""


def stored_as(name: str) -> TableFormat:
    try:
        return STORED_AS[name.upper()]
    except KeyError:
        known = ", ".join(STORED_AS)
        raise InvalidRequest(f"format {name} is not supported (supported: {known})") from None
