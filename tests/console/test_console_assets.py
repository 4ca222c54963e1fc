"""The console's assets: addressed by their content, compressed, cached for a year."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from lakeward.config import load_settings
from lakeward.http.app import create_app
from lakeward.http.console import PLOTLY_JS, plotly
from lakeward.http.console.assets import Assets


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = load_settings(data_dir=tmp_path_factory.mktemp("assets") / "data", env={})
    with TestClient(create_app(settings)) as client:
        yield client


def test_pages_name_assets_by_content_and_browsers_keep_them(client: TestClient) -> None:
    page = client.get("/console/login").text
    found = re.search(r'href="(/console/assets/([0-9a-f]{16})/console\.css)"', page)
    assert found is not None, page
    css = client.get(found[1], headers={"Accept-Encoding": "gzip"})
    assert css.status_code == 200
    assert css.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert css.headers["content-type"].startswith("text/css")
    again = client.get(found[1], headers={"If-None-Match": css.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    # An address of an earlier release still answers, with today's file, not kept.
    old = client.get(f"/console/assets/{'0' * 16}/console.css")
    assert old.status_code == 200 and old.headers["cache-control"] == "no-cache"


def test_plotly_goes_compressed_to_a_browser_that_takes_gzip(client: TestClient) -> None:
    shipped = Path(PLOTLY_JS).read_bytes()
    # The address a dashboard's page gives: the digest of the file as the plotly package ships it.
    url = Assets("/console", {"plotly.min.js": Path(PLOTLY_JS)}, {}).url("plotly.min.js")
    raw = client.get(url, headers={"Accept-Encoding": "gzip"})
    assert raw.headers["content-encoding"] == "gzip"
    assert raw.headers["vary"] == "Accept-Encoding"
    assert raw.headers["cache-control"].endswith("immutable")
    assert raw.content == shipped  # the client undid the compression
    assert int(raw.headers["content-length"]) < len(shipped) / 3
    plain = client.get(url, headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.content == shipped


def test_an_unknown_asset_or_a_topology_not_installed_is_named(client: TestClient) -> None:
    missing = client.get("/console/assets/missing/nothing.js")
    assert missing.status_code == 404 and "no asset nothing.js" in missing.text
    topology = client.get("/console/assets/missing/topojson/mars_10m.json")
    assert topology.status_code == 404 and "no world topology mars_10m.json" in topology.text


def test_a_sheet_loads_the_smallest_plotly_that_draws_its_charts() -> None:
    installed = [plotly.FULL, *plotly.PARTS]
    assert plotly.bundle_for({"map", "line"}, installed) == "plotly-geo.min.js"
    assert plotly.bundle_for({"bar", "line", "table"}, installed) == "plotly-basic.min.js"
    assert plotly.bundle_for({"map", "bar"}, installed) == plotly.FULL
    assert plotly.bundle_for({"map"}, [plotly.FULL]) == plotly.FULL  # none installed
    assert re.fullmatch(r"\d+\.\d+\.\d+", plotly.shipped_version())
