"""Settings: defaults, layers, and errors that name the key and where it came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakeward.config import JHU_TIME_SERIES_URL, load_settings
from lakeward.errors import ConfigError


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_defaults_give_the_embedded_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings(env={})
    assert settings.data_dir == tmp_path / ".lakeward"
    assert settings.lake_root == f"file://{tmp_path}/.lakeward/lake"
    assert settings.metastore.backend == "derby"
    assert settings.spark.master == "local[*]"
    assert settings.server.host == "127.0.0.1"
    assert settings.covid.source == JHU_TIME_SERIES_URL


def test_layers_file_then_env_then_flags(tmp_path: Path) -> None:
    stack_file = write(
        tmp_path / "lakeward.toml",
        '[spark]\nmaster = "local[2]"\ndriver_memory = "3g"\n'
        '[spark.conf]\n"spark.sql.shuffle.partitions" = "8"\n'
        '[covid]\nsource = "/from/file"\n',
    )
    env = {"LAKEWARD_DATA_DIR": str(tmp_path / "d"), "LAKEWARD_SPARK__DRIVER_MEMORY": "5g"}
    settings = load_settings(
        config_file=stack_file, env=env, overrides={"covid.source": "/from/flag"}
    )
    assert settings.data_dir == tmp_path / "d"
    assert settings.spark.master == "local[2]"
    assert settings.spark.driver_memory == "5g"  # env beats file
    assert settings.spark.conf == {"spark.sql.shuffle.partitions": "8"}
    assert settings.covid.source == "/from/flag"  # flag beats file


def test_commands_find_the_running_stacks_settings(tmp_path: Path) -> None:
    data_dir = tmp_path / "stack"
    data_dir.mkdir()
    state = {"settings": {"metastore": {"port": 9999}, "lake": {"data_bucket": "my-data"}}}
    (data_dir / "stack.json").write_text(json.dumps(state))
    settings = load_settings(data_dir=data_dir, env={})
    assert settings.metastore.port == 9999
    assert settings.lake.data_bucket == "my-data"


def test_bad_values_name_the_key_and_the_file_line(tmp_path: Path) -> None:
    stack_file = write(
        tmp_path / "lakeward.toml",
        '[lake]\ndata_bucket = "lakeward-data"\n\n[metastore]\nport = "abc"\ncolour = 1\n',
    )
    with pytest.raises(ConfigError) as failure:
        load_settings(data_dir=tmp_path, config_file=stack_file, env={})
    message = str(failure.value)
    assert "metastore.port: Input should be a valid integer" in message
    assert f"(from {stack_file} line 5)" in message
    assert f"metastore.colour: unknown setting (from {stack_file} line 6)" in message


def test_bad_environment_variable_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"spark.master: 'nowhere' is not a Spark master .*"
                       r"environment variable LAKEWARD_SPARK__MASTER"):  # fmt: skip
        load_settings(data_dir=tmp_path, env={"LAKEWARD_SPARK__MASTER": "nowhere"})
    with pytest.raises(ConfigError, match="LAKEWARD_SPRAK__MASTER: unknown section 'sprak'"):
        load_settings(data_dir=tmp_path, env={"LAKEWARD_SPRAK__MASTER": "local"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[lake]\nroot = "hdfs://x"\n', "lake.root: must be a file:// or s3:// URI"),
        ('[lake]\ndata_bucket = "Bad_Bucket"\n', "lake.data_bucket: 'Bad_Bucket' is not a valid"),
        ("[metastore]\nport = 70000\n", "metastore.port: Input should be less than or equal"),
        ('[metastore]\nbackend = "oracle"\n', "metastore.backend: Input should be 'derby'"),
        ("[spark\n", "not valid TOML"),
    ],
)
def test_each_kind_of_bad_value(tmp_path: Path, text: str, expected: str) -> None:
    stack_file = write(tmp_path / "lakeward.toml", text)
    with pytest.raises(ConfigError, match=expected.replace("[", r"\[").replace("(", r"\(")):
        load_settings(data_dir=tmp_path, config_file=stack_file, env={})


def test_missing_stack_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the stack file .*nowhere.toml"):
        load_settings(data_dir=tmp_path, config_file=tmp_path / "nowhere.toml", env={})
