#!/usr/bin/env bash
# Paired daily-ingest comparison of two source trees (issue 17 target 5, bench/README.md):
#
#   bench/ab_daily.sh ROUNDS SRC_A LABEL_A SRC_B LABEL_B
#
# e.g. the tree before issue 17 against this one:
#   mkdir -p /tmp/base && git archive '965d7db^' src | tar -x -C /tmp/base
#   bench/ab_daily.sh 20 /tmp/base/src before "$PWD/src" now
#
# Each tree ingests day 1 of gen_parcels.py's 1M roll into a workspace of its own, once.
# Then, ROUNDS times and for each tree (the order alternating): copy that workspace,
# `sync`, ingest day 2 into the copy under /usr/bin/time. One line per run: wall and CPU
# (user + sys) seconds and peak RSS. Both trees run through this checkout's .venv with
# PYTHONPATH=SRC, so only the source differs. Pairs close in time cancel most of a
# shared machine's drift, which moved whole runs by +-0.5 s within minutes.
#
# Each tree's modules are compiled to bytecode first (compileall, as pip does for a
# wheel and `make` for the editable install: without it a process where
# PYTHONDONTWRITEBYTECODE is set compiles them on every run); FEEDLEDGER_AB_COMPILE=0
# leaves the trees as they are. FEEDLEDGER_AB_PRIOR=N (default 1): the workspace holds
# days 1..N and day N+1 is measured (2: issue 30's day 3 on days 1-2, whose ingest finds
# day 2's write-ahead log as a daily does). FEEDLEDGER_AB_DATA: a gen_parcels.py folder.
# FEEDLEDGER_AB_RT=1: each measured ingest runs under `chrt -f 1` (SCHED_FIFO, root), so
# on a shared machine the other load waits while it runs and its wall time means what a
# quiet machine's would (the kernel still keeps 5 % for the rest); its threads run
# ahead of everyone else's, so use it for short paired runs only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=$1
declare -A src=([$3]=$2 [$5]=$4)
labels=("$3" "$5")
prior=${FEEDLEDGER_AB_PRIOR:-1}
day() { printf '2026-08-%02d' "$1"; }
measured=$(day $((prior + 1)))
data=${FEEDLEDGER_AB_DATA:-$here/.work/parcels-v1-n1000000-s20260801}
[ -f "$data/parcels_$measured.csv" ] ||
  "$here/../.venv/bin/python" "$here/gen_parcels.py" --n 1000000 --days $((prior + 1)) >/dev/null
if [ "${FEEDLEDGER_AB_COMPILE:-1}" = 1 ]; then
  for label in "${labels[@]}"; do "$here/../.venv/bin/python" -m compileall -q "${src[$label]}"; done
fi
rt=""
if [ "${FEEDLEDGER_AB_RT:-0}" = 1 ]; then rt="chrt -f 1"; fi
work=$(mktemp -d "${TMPDIR:-/tmp}/ab_daily.XXXX")
trap 'rm -rf "$work"' EXIT
fl() { PYTHONPATH=${src[$1]} "$here/../.venv/bin/python" -m feedledger "${@:2}"; }
for label in "${labels[@]}"; do
  mkdir "$work/day1.$label"
  (cd "$work/day1.$label" && fl "$label" init >/dev/null &&
    fl "$label" source add parcels --key parcel_id --format csv --kind snapshot >/dev/null &&
    for d in $(seq 1 "$prior"); do
      fl "$label" ingest parcels "$data/parcels_$(day "$d").csv" --published-at "$(day "$d")" >/dev/null
    done)
done
for r in $(seq 1 "$rounds"); do
  order=("${labels[@]}")
  if [ $((r % 2)) = 0 ]; then order=("${labels[1]}" "${labels[0]}"); fi
  for label in "${order[@]}"; do
    rm -rf "$work/run" && cp -a "$work/day1.$label" "$work/run" && sync && sleep 1
    (cd "$work/run" && PYTHONPATH=${src[$label]} $rt /usr/bin/time -f "%e %U %S %M" -o "$work/time" \
      "$here/../.venv/bin/python" -m feedledger ingest parcels "$data/parcels_$measured.csv" \
      --published-at "$measured" --json >/dev/null)
    read -r wall user sys rss <"$work/time"
    echo "$label round=$r wall=$wall cpu=$(python3 -c "print(round($user + $sys, 2))") rss_mib=$((rss / 1024))"
  done
done
