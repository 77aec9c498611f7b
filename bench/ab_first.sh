#!/usr/bin/env bash
# Paired first-load comparison of two source trees (issue 30, bench/README.md
# "A/B of the 1M first load"):
#
#   bench/ab_first.sh ROUNDS SRC_A LABEL_A SRC_B LABEL_B
#
# e.g. the tree before issue 30 against this one:
#   mkdir -p /tmp/old && git archive 9c0eca1 src | tar -x -C /tmp/old
#   bench/ab_first.sh 5 /tmp/old/src before "$PWD/src" now
#
# Each tree gets a workspace with the source declared (`init`, `source add`), once.
# Then, ROUNDS times and for each tree (the order alternating): copy that workspace,
# `sync`, ingest day 1 of gen_parcels.py's 1M roll into the copy under /usr/bin/time.
# One line per run: wall and CPU (user + sys) seconds and peak RSS, then the medians
# and the A/B ratios of the pairs' medians. Both trees run through this checkout's .venv
# with PYTHONPATH=SRC, so only the source differs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=$1
declare -A src=([$3]=$2 [$5]=$4)
labels=("$3" "$5")
data=${FEEDLEDGER_AB_DATA:-$here/.work/parcels-v1-n1000000-s20260801}
[ -f "$data/parcels_2026-08-01.csv" ] || "$here/../.venv/bin/python" "$here/gen_parcels.py" --n 1000000 --days 1 >/dev/null
work=$(mktemp -d "${TMPDIR:-/tmp}/ab_first.XXXX")
trap 'rm -rf "$work"' EXIT
fl() { PYTHONPATH=${src[$1]} "$here/../.venv/bin/python" -m feedledger "${@:2}"; }
for label in "${labels[@]}"; do
  mkdir "$work/empty.$label"
  (cd "$work/empty.$label" && fl "$label" init >/dev/null &&
    fl "$label" source add parcels --key parcel_id --format csv --kind snapshot >/dev/null)
done
for r in $(seq 1 "$rounds"); do
  order=("${labels[@]}")
  if [ $((r % 2)) = 0 ]; then order=("${labels[1]}" "${labels[0]}"); fi
  for label in "${order[@]}"; do
    rm -rf "$work/run" && cp -a "$work/empty.$label" "$work/run" && sync && sleep 1
    (cd "$work/run" && PYTHONPATH=${src[$label]} /usr/bin/time -f "%e %U %S %M" -o "$work/time" \
      "$here/../.venv/bin/python" -m feedledger ingest parcels "$data/parcels_2026-08-01.csv" \
      --published-at 2026-08-01 --json >/dev/null)
    read -r wall user sys rss <"$work/time"
    cpu=$(python3 -c "print(round($user + $sys, 2))")
    echo "$label round=$r wall=$wall cpu=$cpu rss_mib=$((rss / 1024))" | tee -a "$work/runs"
  done
done
python3 - "$work/runs" "${labels[0]}" "${labels[1]}" <<'PY'
import statistics, sys
runs: dict[str, dict[str, list[float]]] = {}
for line in open(sys.argv[1]):
    label, _, *fields = line.split()
    for field in fields:
        name, value = field.split("=")
        runs.setdefault(label, {}).setdefault(name, []).append(float(value))
a, b = sys.argv[2], sys.argv[3]
for name in ("wall", "cpu", "rss_mib"):
    ma, mb = statistics.median(runs[a][name]), statistics.median(runs[b][name])
    print(f"median {name}: {a} {ma:g}  {b} {mb:g}  {a}/{b} {ma / mb:.3f}")
PY
