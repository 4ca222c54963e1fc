"""The stack as a user drives it: commands, the metastore process, the server, errors."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from lakeward.config import Settings, load_settings
from lakeward.errors import MetastoreError
from lakeward.metastore import MetastoreClient
from lakeward.metastore.uris import metastore_uris
from lakeward.process import free_port, port_frees_within, port_is_free
from lakeward.stack import COVID_TABLES
from tests.helpers import lakeward, need_java, parse_outputs


def assert_plain_error(stderr: str, *fragments: str) -> None:
    assert "Traceback" not in stderr
    for fragment in fragments:
        assert fragment in stderr, stderr


def test_a_bad_stack_file_stops_the_command_naming_key_and_line(tmp_path: Path) -> None:
    stack_file = tmp_path / "lakeward.toml"
    stack_file.write_text('[spark]\nmaster = "local[*]"\ndriver_memory = "lots"\n')
    result = lakeward("up", "--config", str(stack_file), data_dir=tmp_path / "d", check=False)
    assert result.returncode == 2
    assert_plain_error(result.stderr, "spark.driver_memory", f"{stack_file} line 3")
    assert not (tmp_path / "d").exists()  # nothing was started or created


def test_status_of_a_stack_never_started(tmp_path: Path) -> None:
    result = lakeward("status", data_dir=tmp_path / "none", check=False)
    assert result.returncode == 1
    assert "server" in result.stdout and "stopped" in result.stdout
    assert "Traceback" not in result.stderr


def test_unknown_option_is_a_usage_error(tmp_path: Path) -> None:
    result = lakeward("up", "--colour", "blue", data_dir=tmp_path, check=False)
    assert result.returncode == 2
    assert_plain_error(result.stderr, "No such option: --colour")


@pytest.mark.spark
def test_status_and_health_of_the_running_stack(stack: Settings, stack_dir: Path) -> None:
    result = lakeward("status", data_dir=stack.data_dir)
    assert "server worker 1" in result.stdout and "restarts 0" in result.stdout
    assert "unhealthy" not in result.stdout and "stopped" not in result.stdout
    result = lakeward("metastore", "status", data_dir=stack.data_dir)
    assert "yes" in result.stdout
    url = f"http://{stack.server.host}:{stack.server.port}"
    health = httpx.get(f"{url}/health", timeout=10).json()
    assert health["status"] == "ok" and health["metastore"] is True
    assert "/health" in httpx.get(f"{url}/openapi.json", timeout=10).json()["paths"]
    assert httpx.get(f"{url}/docs", timeout=10).status_code == 200
    console_url = parse_outputs((stack_dir / "up.stdout").read_text())["console_url"]
    sign_in = httpx.get(console_url, timeout=10, follow_redirects=True)
    assert sign_in.url.path == "/console/login" and 'name="password"' in sign_in.text


@pytest.mark.spark
def test_up_again_is_idempotent(stack: Settings, stack_dir: Path) -> None:
    def loaded() -> dict[str, tuple[str, str]]:
        with MetastoreClient(metastore_uris(stack)) as client:
            tables = {name: client.table("default", name) for name in COVID_TABLES}
        return {n: (t.location, t.parameters.get("lakeward.run_id", "")) for n, t in tables.items()}

    before = loaded()
    result = lakeward("up", data_dir=stack.data_dir)
    again = parse_outputs(result.stdout)
    # Tables that tests before this one registered with file: locations get s3:// names
    # (and a line saying so); the stack's own tables are left as they were.
    again.pop("renamed_to_s3_names", None)
    assert again == parse_outputs((stack_dir / "up.stdout").read_text())
    assert loaded() == before  # the same places, and no second ETL


@pytest.mark.spark
def test_client_fails_over_past_a_dead_node(stack: Settings) -> None:
    dead = f"thrift://127.0.0.1:{free_port('127.0.0.1', 19500)}"
    with MetastoreClient([dead, *metastore_uris(stack)], timeout=2, retry_delay=0.1) as client:
        assert "default" in client.databases()
        assert "covid_deaths" in client.tables("default")
    with (
        MetastoreClient([dead], timeout=1, rounds=2, retry_delay=0.1) as client,
        pytest.raises(MetastoreError, match="no metastore node answered"),
    ):
        client.databases()


@pytest.mark.spark
def test_a_taken_port_is_reported(stack: Settings, tmp_path: Path) -> None:
    env = {"LAKEWARD_METASTORE__PORT": str(stack.metastore.port)}
    result = lakeward("metastore", "start", data_dir=tmp_path / "d", env=env, check=False)
    assert result.returncode == 3
    assert_plain_error(result.stderr, f"port {stack.metastore.port} on 127.0.0.1 is taken")


def test_missing_java_is_reported(tmp_path: Path) -> None:
    env = {"LAKEWARD_METASTORE__JAVA_HOME": str(tmp_path / "no-jdk")}
    result = lakeward("metastore", "start", data_dir=tmp_path / "d", env=env, check=False)
    assert result.returncode == 3
    assert_plain_error(result.stderr, "metastore.java_home", "openjdk-17-jre-headless")


@pytest.mark.spark
def test_a_second_stack_side_by_side_then_down(stack: Settings, tmp_path: Path) -> None:
    need_java()
    data_dir = tmp_path / "second"
    lakeward("metastore", "start", data_dir=data_dir, timeout=300)
    second = load_settings(data_dir=data_dir, env={})
    assert second.metastore.port != stack.metastore.port
    with MetastoreClient(metastore_uris(second)) as client:
        assert client.databases() == ["default"]
        assert client.tables("default") == []  # its own catalog, not the session stack's

    lakeward("down", "--retain-data", data_dir=data_dir)
    assert (data_dir / "metastore" / "derby").is_dir()
    assert not MetastoreClient(metastore_uris(second), timeout=1, rounds=1).ping()
    state = json.loads((data_dir / "stack.json").read_text())
    assert state["settings"]["metastore"]["port"] == second.metastore.port

    lakeward("down", data_dir=data_dir)
    assert not data_dir.exists()
    # The session stack is untouched.
    assert MetastoreClient(metastore_uris(stack)).ping()


def test_a_port_released_moments_later_counts_as_free() -> None:
    """A node killed a moment ago holds its port until its last thread exits; a
    restart waits for it, and still refuses a port that stays taken."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    assert not port_frees_within("127.0.0.1", port, 0.5)
    threading.Timer(0.5, holder.close).start()
    assert port_frees_within("127.0.0.1", port, 10.0)


def test_a_port_another_process_chose_is_not_chosen_until_it_exits() -> None:
    """Two stacks started at once: the port the first chose (and has not bound yet) is
    not the second's choice; it is free to choose again once the first has gone."""
    chooser = subprocess.Popen(
        [sys.executable, "-c", CHOOSE_AND_WAIT, "23900"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert chooser.stdout is not None and chooser.stdin is not None
    chosen = int(chooser.stdout.readline())
    assert port_is_free("127.0.0.1", chosen)  # chosen, not bound
    assert free_port("127.0.0.1", chosen) != chosen
    chooser.stdin.close()  # the first process exits
    assert chooser.wait(timeout=30) == 0
    again = subprocess.run(
        [sys.executable, "-c", CHOOSE_AND_WAIT, str(chosen)],
        input="",
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert int(again.stdout) == chosen


CHOOSE_AND_WAIT = """
import sys
from lakeward.process import free_port
print(free_port("127.0.0.1", int(sys.argv[1])), flush=True)
sys.stdin.read()
"""
