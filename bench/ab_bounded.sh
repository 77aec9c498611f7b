#!/usr/bin/env bash
# Paired peak RSS of a budgeted ingest (tests/pipeline/test_bounded_ingest.py's
# "stays within its budget", by hand; bench/README.md "A budgeted ingest within its
# bound"):
#
#   bench/ab_bounded.sh ROUNDS SRC_A LABEL_A SRC_B LABEL_B [ROWS]
#
# ROWS (default 400000) generated parcels, day 1 and day 2 (tests/pipeline/
# bounded_payloads.py), a source with `--memory-budget 128MiB`. ROUNDS times, for each
# tree (the order alternating): a fresh workspace, the one-row ingest the test takes as
# the fixed cost, then day 1 (a first load) and day 2, each under /usr/bin/time. One
# line per run: peak RSS (MiB) and CPU (user + sys) seconds of each, and the test's
# bound (fixed + payload + budget). Both trees run through this checkout's .venv with
# PYTHONPATH=SRC, so only the source differs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=$1
declare -A src=([$3]=$2 [$5]=$4)
labels=("$3" "$5")
rows=${6:-400000}
work=$(mktemp -d "${TMPDIR:-/tmp}/ab_bounded.XXXX")
trap 'rm -rf "$work"' EXIT
(cd "$here/../tests" && PYTHONPATH=../src "$here/../.venv/bin/python" -c "
from pathlib import Path
from pipeline.bounded_payloads import parcels, write
write(parcels(1), Path('$work/tiny.csv'))
for day in (1, 2):
    write(parcels($rows, day), Path('$work/d%d.csv' % day))
")
fl() { PYTHONPATH=${src[$1]} "$here/../.venv/bin/python" -m feedledger "${@:2}"; }
timed() {  # LABEL ARGS...: one feedledger command of that tree, its peak and CPU
  /usr/bin/time -f "%M %U %S" -o "$work/time" env PYTHONPATH="${src[$1]}" \
    "$here/../.venv/bin/python" -m feedledger "${@:2}" >/dev/null
  awk '{printf "%4.0f MiB %5.2f s", $1 / 1024, $2 + $3}' "$work/time"
}
size=$(stat -c %s "$work/d1.csv")
for round in $(seq "$rounds"); do
  order=("${labels[@]}")
  [ $((round % 2)) -eq 0 ] && order=("${labels[1]}" "${labels[0]}")
  for label in "${order[@]}"; do
    ws="$work/ws.$label"
    rm -rf "$ws" && mkdir "$ws"
    cd "$ws"
    fl "$label" init >/dev/null
    fl "$label" source add tiny --key parcel_id >/dev/null
    fl "$label" source add parcels --key parcel_id --memory-budget 128MiB >/dev/null
    tiny=$(timed "$label" ingest tiny "$work/tiny.csv" --published-at 2026-08-01)
    fixed=$(awk '{print $1}' "$work/time")
    d1=$(timed "$label" ingest parcels "$work/d1.csv" --published-at 2026-08-01)
    d2=$(timed "$label" ingest parcels "$work/d2.csv" --published-at 2026-08-02)
    bound=$(awk -v f="$fixed" -v s="$size" 'BEGIN {printf "%.0f", (f * 1024 + s + 128 * 1048576) / 1048576}')
    echo "$round $label: fixed $tiny | day 1 $d1 | day 2 $d2 | bound $bound MiB"
    cd "$work"
  done
done
