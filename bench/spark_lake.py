"""The covid ETL with Spark reaching the lake three ways, side by side in one run.

    .venv/bin/python bench/spark_lake.py [--source DIR] [--rounds 3] [--keep]

A throw-away stack is brought up (``lakeward up`` on the JHU files, not timed), then
``lakeward etl covid`` is run ``--rounds`` times in turn with Spark:

* **s3a**: ``local[*]``, reading and writing the lake by its s3:// names through the
  stack's S3 endpoint (the default, ``spark.lake_access = "endpoint"``);
* **direct**: ``local[*]``, the same names read from the lake's files
  (``spark.lake_access = "direct"``): the local file system, the anchor of the first ratio;
* **cluster**: the stack's standalone master with two one-core workers, through s3a: the
  anchor of the second ratio is **s3a** on ``local[*]``.

Each figure is the command's wall time (Spark's start included, the same on every side);
the median of the rounds is compared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import say  # noqa: E402 - beside this script

ROOT = Path(__file__).resolve().parents[1]
LAKEWARD = str(Path(sys.executable).parent / "lakeward")
DEFAULT_SOURCE = str(ROOT.parent / "shared" / "data" / "jhu_csse")
WORKERS = 2


def run(args: list[str], env: dict[str, str], timeout: float = 1200) -> float:
    started = time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", action="store_true")
    options = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="lakeward-bench-spark-"))
    data_dir = base / "data"
    env = {**os.environ, "LAKEWARD_DATA_DIR": str(data_dir)}
    # The stack's own cluster: a master and two workers started by up, kept idle until used.
    cluster_env = {
        **env,
        "LAKEWARD_SPARK__WORKERS": str(WORKERS),
        "LAKEWARD_SPARK__WORKER_MEMORY": "2g",
    }
    try:
        say(f"bringing up a stack in {data_dir} (not timed)")
        run([LAKEWARD, "up", "--covid-source", options.source], cluster_env)
        state = json.loads((data_dir / "stack.json").read_text())
        master = state["settings"]["spark"]["master"]
        say(f"standalone master {master}, {WORKERS} workers")
        local = {**env, "LAKEWARD_SPARK__MASTER": "local[*]", "LAKEWARD_SPARK__WORKERS": "0"}
        sides = {
            "s3a": local,
            "direct": {**local, "LAKEWARD_SPARK__LAKE_ACCESS": "direct"},
            "cluster": env,
        }
        times: dict[str, list[float]] = {name: [] for name in sides}
        etl = [LAKEWARD, "etl", "covid", "--covid-source", options.source]
        for round_ in range(1, options.rounds + 1):
            for name, side_env in sides.items():
                times[name].append(run(etl, side_env))
            say(f"round {round_}: " + ", ".join(f"{n} {t[-1]:.1f} s" for n, t in times.items()))
        median = {name: statistics.median(values) for name, values in times.items()}
        say()
        say("| workload | time (median) | anchor | ratio |")
        say("|---|---:|---|---:|")
        say(
            f"| covid ETL, s3a through the endpoint | {median['s3a']:.1f} s | direct files "
            f"{median['direct']:.1f} s | {median['s3a'] / median['direct']:.2f} (goal <= 1.3) |"
        )
        say(f"| covid ETL on the standalone cluster ({WORKERS} x 1 core) | "
            f"{median['cluster']:.1f} s | local[*] {median['s3a']:.1f} s | "
            f"{median['cluster'] / median['s3a']:.2f} |")  # fmt: skip
    finally:
        if not options.keep:
            subprocess.run([LAKEWARD, "down"], env=env, capture_output=True, timeout=300)
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
