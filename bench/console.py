"""Benchmark of the web console: the COVID-19 dashboard and a 200-point world map in
Chromium, and the extract refresh.

    .venv/bin/python bench/console.py [--data-dir DIR] [--runs 15] [--refreshes 5] [--keep]

In one run it

1. brings up a throw-away stack (``lakeward up`` on the JHU files in a temporary data
   dir, on ports the OS picks), or uses the running stack of ``--data-dir``;
2. signs in as de_user in Chromium (Debian's, through Playwright) with the network
   closed to anything but 127.0.0.1;
3. loads the seed's "COVID-19 cases" dashboard ``--runs`` times reading the extract
   (``?mode=extract``) and ``--runs`` times querying live through the SQL service
   (``?mode=live``), alternating, after one warm-up load of each. Load time is measured
   in the browser: from the first byte of the page (``responseStart`` of the navigation)
   to the moment the last chart's ``Plotly.react`` promise resolved (plotly's afterplot:
   both charts drawn, map outline included), as ``charts.js`` records it in
   ``window.lakewardCharts.readyAt``; and as many times, in the same rotation, a dashboard
   of one map of 200 places (every JHU location's confirmed cases on 2021-01-01, the 200
   largest: a size legend, colours by place) read from its extract, which the benchmark
   makes as root beforehand and deletes afterwards;
   Then ``--runs`` times, a new browser profile (signed in, its cache empty) opens the
   seed's dashboard from its extract, timed from the navigation's start ("cold"), and
   opens it again with its assets cached ("revisit");
4. refreshes the covid dataset's extract ``--refreshes`` times as the stack's
   administrator, through ``BiService`` in this process (what "Refresh now" and the
   scheduled refresh run: the dataset's SQL through the SQL service as
   bi-service-role, the field operations, the Parquet file written to the lake),
   timing the call and reading the service's own ``duration_ms``;
5. prints the figures side by side with the targets (dashboard ≤ 1 s with the extract,
   ≤ 2 s live, the 200-point map ≤ 1 s) and the live/extract ratio, then stops the stack
   it started (unless ``--keep``).

The machine is shared with other work: read the figures with that in mind (the
median is the figure to compare; p90 shows the noise).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
JHU_DIR = ROOT.parent / "shared" / "data" / "jhu_csse"
CHROMIUM = "/usr/bin/chromium"
DASHBOARD = "/console/dashboards/covid-19-cases"
DATASET = "covid-19"
WORLD = "bench-world-map"
# Seconds to the dashboard rendered; "cold": a new browser profile, from the navigation's start.
TARGETS = {"extract": 1.0, "live": 2.0, "map200": 1.0, "cold": 1.5, "revisit": 1.0}
WORLD_SQL = """SELECT concat(coalesce(province_state || ', ', ''), country) AS place,
       lat, lon, CAST(confirmed AS bigint) AS confirmed
FROM covid_cases WHERE "date" = DATE '2021-01-01' AND lat IS NOT NULL"""

LOAD_TIME = """() => {
  const navigation = performance.getEntriesByType('navigation')[0];
  const ends = (part) => Math.max(0, ...performance.getEntriesByType('resource')
    .filter(e => e.name.includes(part)).map(e => e.responseEnd));
  return {firstByte: navigation.responseStart, ready: window.lakewardCharts.readyAt,
          rendered: window.lakewardCharts.rendered, errors: window.lakewardCharts.errors,
          plotly: window.lakewardCharts.plotlyAt, series: ends('/series'),
          topojson: ends('/topojson/')};
}"""


def lakeward(*args: str, data_dir: Path, timeout: float = 1200) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "lakeward", *args, "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=timeout, check=False, cwd=ROOT,
    )  # fmt: skip
    if result.returncode != 0:
        raise SystemExit(f"lakeward {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def outputs(stdout: str) -> dict[str, str]:
    pairs = (line.partition(" = ") for line in stdout.splitlines())
    return {k.strip(): v.strip() for k, sep, v in pairs if sep}


def sign_in(page: Any, base: str, user: str, password: str) -> None:
    page.goto(f"{base}/console/login")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("form button[type=submit]")
    page.wait_for_load_state()
    if page.locator(".flash.error").count():
        raise SystemExit(f"sign-in failed: {page.locator('.flash.error').inner_text()}")


PHASES = ("series", "plotly", "topojson")


def load_dashboard(page: Any, base: str, mode: str, phases: dict[str, list[float]]) -> float:
    """Seconds from the page's first byte to every chart drawn.

    ``mode``: ``extract`` or ``live`` (the seed's dashboard), or ``map200`` (the 200-point
    map, from its extract). ``phases`` gets, per phase, the seconds from the first byte
    until: the last series arrived, plotly.js was loaded and run, the world topology arrived.
    """
    path, charts = (f"/console/dashboards/{WORLD}?mode=extract", 1) if mode == "map200" else (
        f"{DASHBOARD}?mode={mode}", 2)  # fmt: skip
    page.goto(f"{base}{path}")
    page.wait_for_selector("body[data-charts=ready], body[data-charts=failed]", timeout=120_000)
    timing = page.evaluate(LOAD_TIME)
    if timing["errors"] or timing["rendered"] != charts:
        raise SystemExit(f"the dashboard did not render ({mode}): {timing}")
    if mode == "map200":
        points = page.evaluate("document.querySelector('.visual .chart').data[0].lat.length")
        circles = page.locator(".size-legend figure").count()
        if points != 200 or circles < 2:
            raise SystemExit(f"the map drew {points} points and {circles} legend circles")
    for phase in PHASES:
        phases.setdefault(f"{mode} {phase}", []).append(
            max(0.0, timing[phase] - timing["firstByte"]) / 1000 if timing[phase] else 0.0
        )
    return float(timing["ready"] - timing["firstByte"]) / 1000


def world_map(data_dir: Path, make: bool) -> None:
    """Make (or delete) the 200-point map's dataset and dashboard, as root, shared with
    the data engineers."""
    from lakeward.access import ROOT
    from lakeward.access.control import AccessControl
    from lakeward.bi.service import BiService
    from lakeward.config import load_settings
    from lakeward.query.service import QueryService

    settings = load_settings(data_dir=data_dir, env={})
    access = AccessControl(settings)
    queries = QueryService(settings, access=access)
    bi = BiService(settings, access, queries)
    try:
        if not make:
            bi.delete_dashboard(ROOT, WORLD)
            bi.delete_analysis(ROOT, WORLD)
            bi.delete_dataset(ROOT, WORLD)
            return
        bi.create_dataset(ROOT, WORLD, {
            "name": "Places", "data_source_id": "demo_hive_metastore",
            "database": settings.covid.database, "sql": WORLD_SQL,
            "fields": [{"op": "geo", "name": "location", "latitude": "lat", "longitude": "lon"}],
        })  # fmt: skip
        visual = {"id": "world", "type": "map", "geo": "location", "size": "confirmed",
                  "color": "place", "top_n": 200, "tooltips": ["confirmed"]}  # fmt: skip
        bi.create_analysis(ROOT, WORLD, {"name": "200 places", "dataset_id": WORLD,
                                         "sheets": [{"id": "s", "visuals": [visual]}]})  # fmt: skip
        bi.publish_dashboard(ROOT, WORLD)
        viewers = [{"principal": "group/DataEngineerGroup", "role": "viewer"}]
        bi.set_permissions(ROOT, "dataset", WORLD, viewers)
        bi.set_permissions(ROOT, "dashboard", WORLD, viewers)
    finally:
        bi.close()
        queries.close()


def refresh_extracts(data_dir: Path, times: int) -> list[tuple[float, float, int]]:
    """Refreshes of the covid extract: (seconds around the call, service's duration, rows).

    As the stack's administrator (root), through ``BiService`` in this process over
    the stack's state, as the server's scheduled refresh runs it: the seed shares
    the dataset with the data engineers as viewers, who may not refresh it.
    """
    from lakeward.access import ROOT
    from lakeward.access.control import AccessControl
    from lakeward.bi.service import BiService
    from lakeward.config import load_settings
    from lakeward.query.service import QueryService

    settings = load_settings(data_dir=data_dir, env={})
    access = AccessControl(settings)
    queries = QueryService(settings, access=access)
    bi = BiService(settings, access, queries)
    found = []
    try:
        for _ in range(times):
            started = time.perf_counter()
            extract = bi.refresh_extract(ROOT, DATASET)
            elapsed = time.perf_counter() - started
            found.append((elapsed, extract.duration_ms / 1000, extract.row_count))
    finally:
        bi.close()
        queries.close()
    return found


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {"median": statistics.median(ordered), "p90": p90, "min": ordered[0],
            "max": ordered[-1]}  # fmt: skip


def run(data_dir: Path, runs: int, refreshes: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    from lakeward.config import load_settings

    settings = load_settings(data_dir=data_dir, env={})
    base = f"http://{settings.server.host}:{settings.server.port}"
    creds = json.loads(lakeward("secrets", "get", "DataEngineerUserCreds", data_dir=data_dir))
    blocked: list[str] = []

    def offline(route: Any) -> None:
        if re.match(r"^https?://127\.0\.0\.1(:\d+)?/", route.request.url):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    loads: dict[str, list[float]] = {"extract": [], "live": [], "map200": []}
    phases: dict[str, list[float]] = {}
    world_map(data_dir, make=True)
    try:
        with sync_playwright() as playwright:
            warm = browse(playwright, base, creds["password"], offline, loads, phases, runs)
    finally:
        world_map(data_dir, make=False)
    if blocked:
        raise SystemExit(f"the page asked for outside addresses: {blocked}")
    refresh = refresh_extracts(data_dir, refreshes)
    return {"warm_up": warm, "loads": loads, "phases": phases, "refresh": refresh}


def browse(
    playwright: Any, base: str, password: str, offline: Any, loads: dict[str, list[float]],
    phases: dict[str, list[float]], runs: int,
) -> dict[str, float]:  # fmt: skip
    """The loads, in rotation after one warm-up of each; the warm-up times."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM)
    context = browser.new_context(viewport={"width": 1400, "height": 950})
    page = context.new_page()
    page.route("**/*", offline)
    sign_in(page, base, "de_user", password)
    warm = {mode: load_dashboard(page, base, mode, {}) for mode in loads}
    for _ in range(runs):
        for mode, times in loads.items():
            times.append(load_dashboard(page, base, mode, phases))
    signed_in = context.storage_state()
    for _ in range(runs):
        cold, revisit = cold_load(browser, base, signed_in)
        loads.setdefault("cold", []).append(cold)
        loads.setdefault("revisit", []).append(revisit)
    browser.close()
    return warm


def cold_load(browser: Any, base: str, signed_in: Any) -> tuple[float, float]:
    """The seed dashboard (extract) in a new browser profile, signed in but with an empty
    cache, from the navigation's start to both charts drawn; then the same page again in
    that profile, its assets now cached. No request is routed here: Playwright's routing
    turns the browser's cache off. The machine has no way out, so nothing leaves it."""
    context = browser.new_context(viewport={"width": 1400, "height": 950}, storage_state=signed_in)
    outside: list[str] = []
    page = context.new_page()
    page.on("request", lambda r: None if r.url.startswith(base) else outside.append(r.url))
    times = []
    for _ in range(2):
        page.goto(f"{base}{DASHBOARD}?mode=extract")
        page.wait_for_selector("body[data-charts=ready], body[data-charts=failed]", timeout=120_000)
        timing = page.evaluate(LOAD_TIME)
        if timing["errors"] or timing["rendered"] != 2:
            raise SystemExit(f"the dashboard did not render from a cold cache: {timing}")
        times.append(float(timing["ready"]) / 1000)  # performance.now() counts from navigation
    context.close()
    if outside:
        raise SystemExit(f"the page asked for outside addresses: {outside}")
    return times[0], times[1]


def report(result: dict[str, Any]) -> None:
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, Chromium {CHROMIUM}")  # fmt: skip
    print("\ndashboard load, first byte → both charts drawn (s)")
    print(f"{'mode':<9}{'first load':>11}{'median':>9}{'p90':>8}{'min':>8}{'max':>8}"
          f"{'target':>8}{'median/target':>15}")  # fmt: skip
    medians = {}
    for mode, times in result["loads"].items():
        s = summary(times)
        medians[mode] = s["median"]
        first = result["warm_up"].get(mode, times[0])
        print(f"{mode:<9}{first:>11.3f}{s['median']:>9.3f}{s['p90']:>8.3f}"
              f"{s['min']:>8.3f}{s['max']:>8.3f}{TARGETS[mode]:>8.1f}"
              f"{s['median'] / TARGETS[mode]:>15.2f}")  # fmt: skip
    print(f"live / extract (median): {medians['live'] / medians['extract']:.2f}x")
    print(f"cold profile / same page again (median): "
          f"{medians['cold'] / medians['revisit']:.2f}x")  # fmt: skip
    print(f"200-point map / seed dashboard, both from extracts (median): "
          f"{medians['map200'] / medians['extract']:.2f}x")  # fmt: skip
    print("\nwhere the time goes: first byte → (median s)")
    for name, times in result["phases"].items():
        print(f"  {name:<18}{statistics.median(times):>7.3f}")
    client = summary([r[0] for r in result["refresh"]])
    service = summary([r[1] for r in result["refresh"]])
    rows = result["refresh"][0][2]
    print(f"\nextract refresh of dataset {DATASET} ({rows:,} rows), "
          f"{len(result['refresh'])} runs (s)")  # fmt: skip
    print(f"{'':<22}{'median':>9}{'p90':>8}{'min':>8}{'max':>8}")
    for name, s in (("refresh_extract call", client), ("service (duration_ms)", service)):
        print(f"{name:<22}{s['median']:>9.3f}{s['p90']:>8.3f}{s['min']:>8.3f}{s['max']:>8.3f}")
    print(f"refresh / dashboard load with the extract (medians): "
          f"{client['median'] / medians['extract']:.1f}x")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="use this running stack")
    parser.add_argument("--runs", type=int, default=15, help="loads per mode")
    parser.add_argument("--refreshes", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="leave the stack it started")
    args = parser.parse_args()
    if not Path(CHROMIUM).is_file():
        raise SystemExit(f"Chromium is not at {CHROMIUM} (apt install chromium)")
    started_here = args.data_dir is None
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="lakeward-bench-console-")) / "data"
    if started_here:
        print(f"bringing up a stack in {data_dir} (ETL of the JHU files) ...", flush=True)
        began = time.monotonic()
        lakeward("up", "--covid-source", str(JHU_DIR), data_dir=data_dir)
        print(f"stack up in {time.monotonic() - began:.0f} s", flush=True)
    try:
        report(run(data_dir, args.runs, args.refreshes))
    finally:
        if started_here and not args.keep:
            lakeward("down", data_dir=data_dir, timeout=300)
            shutil.rmtree(data_dir.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
