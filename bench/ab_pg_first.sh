#!/usr/bin/env bash
# Paired PostgreSQL first-load comparison of two source trees (issue 30 target 4,
# bench/README.md "PostgreSQL first load"):
#
#   bench/ab_pg_first.sh ROUNDS SRC_A LABEL_A SRC_B LABEL_B
#
# e.g. the tree before against this one:
#   mkdir -p /tmp/base && git archive 9c0eca1 src | tar -x -C /tmp/base
#   bench/ab_pg_first.sh 5 /tmp/base/src before "$PWD/src" now
#
# ROUNDS times and for each tree (the order alternating): a fresh scratch database on
# the server of FEEDLEDGER_BENCH_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/postgres),
# `init --store`, `source add`, then day 1 of gen_parcels.py's 1M roll ingested under
# /usr/bin/time: one line per run, the ingest's wall and CPU (user + sys) seconds and
# peak RSS, and the CPU seconds of the server backend that ran the COPY (when the server
# is this host). Both trees run through this checkout's .venv with PYTHONPATH=SRC, so
# only the source differs.
#
# AB_DAY=2: the daily instead. Each tree loads day 1 once into a database of its own;
# each run then starts from a copy of it (CREATE DATABASE ... TEMPLATE, and a copy of
# the workspace) and ingests day 2.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=$1
declare -A src=([$3]=$2 [$5]=$4)
labels=("$3" "$5")
admin=${FEEDLEDGER_BENCH_POSTGRES_URL:-postgresql://postgres@127.0.0.1:5432/postgres}
data=${FEEDLEDGER_AB_DATA:-$here/.work/parcels-v1-n1000000-s20260801}
[ -f "$data/parcels_2026-08-01.csv" ] || "$here/../.venv/bin/python" "$here/gen_parcels.py" --n 1000000 --days 1 >/dev/null
work=$(mktemp -d "${TMPDIR:-/tmp}/ab_pg_first.XXXX")
db=feedledger_ab_first_$$
sqlq() { psql -qAt "$admin" -c "$1"; }
trap 'cd /; rm -rf "$work"; sqlq "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null' EXIT
day=${AB_DAY:-1}
fl() { PYTHONPATH=${src[$1]} "$here/../.venv/bin/python" -m feedledger "${@:2}"; }
setup() {  # $1 label, $2 database: a fresh store with the source declared, in $work/ws.$1
  sqlq "DROP DATABASE IF EXISTS $2 WITH (FORCE)" >/dev/null
  sqlq "CREATE DATABASE $2" >/dev/null
  rm -rf "$work/ws.$1" && mkdir "$work/ws.$1"
  (cd "$work/ws.$1" && fl "$1" init --store "${admin%/*}/$2" >/dev/null &&
    fl "$1" source add parcels --key parcel_id --format csv --kind snapshot >/dev/null)
}
if [ "$day" != 1 ]; then
  for label in "${labels[@]}"; do
    setup "$label" "${db}_$label"
    (cd "$work/ws.$label" && fl "$label" ingest parcels "$data/parcels_2026-08-01.csv" \
      --published-at 2026-08-01 >/dev/null)
  done
  trap 'cd /; rm -rf "$work"; for l in "${labels[@]}"; do sqlq "DROP DATABASE IF EXISTS ${db}_$l WITH (FORCE)" >/dev/null; done; sqlq "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null' EXIT
fi
for r in $(seq 1 "$rounds"); do
  order=("${labels[@]}")
  if [ $((r % 2)) = 0 ]; then order=("${labels[1]}" "${labels[0]}"); fi
  for label in "${order[@]}"; do
    if [ "$day" = 1 ]; then
      setup "$label" "$db"
    else  # day 1's database and workspace, copied
      sqlq "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
      sqlq "CREATE DATABASE $db TEMPLATE ${db}_$label" >/dev/null
      rm -rf "$work/ws.run" && cp -a "$work/ws.$label" "$work/ws.run"
      sed -i "s|/${db}_$label|/$db|" "$work/ws.run/feedledger.toml"
    fi
    cd "$work/ws.$([ "$day" = 1 ] && echo "$label" || echo run)"
    # the CPU of the backend that COPYs the versions: its pid found once, then read
    # from /proc while the ingest runs (the last reading counts)
    ( pid=""
      while [ -z "$pid" ]; do
        pid=$(sqlq "SELECT pid FROM pg_stat_activity WHERE datname = '$db' AND query LIKE 'COPY versions%' LIMIT 1" 2>/dev/null || true)
        sleep 0.5
      done
      while [ -r "/proc/$pid/stat" ]; do
        awk '{print $14 + $15}' "/proc/$pid/stat" >"$work/server" 2>/dev/null || true
        sleep 0.2
      done ) &
    poller=$!
    PYTHONPATH=${src[$label]} /usr/bin/time -f "%e %U %S %M" -o "$work/time" \
      "$here/../.venv/bin/python" -m feedledger ingest parcels "$data/parcels_2026-08-0$day.csv" \
      --published-at "2026-08-0$day" --json >/dev/null
    kill "$poller" 2>/dev/null || true; wait "$poller" 2>/dev/null || true
    server=$(awk '{print $1 / 100}' "$work/server" 2>/dev/null || echo "?")
    rm -f "$work/server"
    read -r wall user sys rss <"$work/time"
    echo "$label round=$r wall=$wall cpu=$(python3 -c "print(round($user + $sys, 2))") server_cpu=$server rss_mib=$((rss / 1024))"
  done
done
