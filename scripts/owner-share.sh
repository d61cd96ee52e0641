#!/usr/bin/env bash
# owner-share.sh: can an owner gain share by splitting work into jobs?
# Run from the project root:
#
#   scripts/owner-share.sh [DATA_DIR] [RUNS] [BIG_N] [SPLIT_JOBS] [WORKERS]
#
# (defaults ../shared/data, 3, 50000, 20, 2). Each case of each run starts
# a fresh private nats-server and redis-server on free ports and WORKERS
# `sudoku worker` processes:
#
#   alone:  alice submits a job of BIG_N of the hardest puzzles (`sudoku
#           submit`, which returns once it is queued); 0.6 s + DELAY
#           later bob's job of 1,000 hard puzzles, `submit --wait`, timed.
#   split:  the same, and 0.4 s (DELAY) before bob, alice POSTs
#           SPLIT_JOBS more jobs of 1,000 hard puzzles each, all at once.
#
# Alice's small jobs go through the HTTP API (X-Sudoku-Owner, roles off)
# so that her submitters cost little CPU: what is measured is the workers'
# turns, not 20 processes starting on the same 2 cores.
#
# Turns are fair between owners, so bob's time should not grow with the
# number of alice's jobs: the script prints bob's wall time in both cases
# per run, the ratio split/alone per run, and the medians. Every puzzle
# set is made fresh by `sudoku gen` (relabelled), so no cache helps.
# Everything it starts is stopped.
set -euo pipefail
DELAY=${DELAY:-0.4} # seconds from alice's jobs to bob's
DATA=${1:-../shared/data}; RUNS=${2:-3}; BIG=${3:-50000}; SPLIT=${4:-20}; W=${5:-2}
[ -d cmd/sudoku ] || { echo "run from the project root"; exit 2; }
HARD=$DATA/forum_hardest_1905_11plus.txt
[ -f "$HARD" ] || { echo "no $HARD: give the folder of the puzzle sets"; exit 2; }
T=$(mktemp -d)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cleanup() {
  pkill -f "^$T/" 2>/dev/null || true
  for p in "$T"/redis-*.port; do [ -f "$p" ] && redis-cli -p "$(cat "$p")" shutdown nosave >/dev/null 2>&1; done
  pkill -f "nats-server .*-sd $T/" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT
go build -o "$T/sudoku" ./cmd/sudoku
S=$T/sudoku
ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
seed=100

# one CASE (alone|split) of run R: prints bob's milliseconds.
one() {
  local run=$1 case=$2 np rp ns wp=()
  np=$(free_port); rp=$(free_port)
  nats-server -js -a 127.0.0.1 -p "$np" -sd "$T/js-$run-$case" >"$T/ns-$run-$case.log" 2>&1 & ns=$!
  echo "$rp" >"$T/redis-$run-$case.port"
  redis-server --port "$rp" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --dir "$T" --logfile "$T/r-$run-$case.log"
  export SUDOKU_NATS_URL=nats://127.0.0.1:$np SUDOKU_REDIS_ADDRS=127.0.0.1:$rp
  sleep 1
  local hp; hp=$(free_port)
  "$S" serve --addr "127.0.0.1:$hp" >"$T/serve-$run-$case.log" 2>&1 & wp+=($!)
  # A refused POST (a body over serve.max_body_bytes, say) stops the run:
  # a case without alice's work would measure nothing.
  post() { curl -sSf -o /dev/null -H 'X-Sudoku-Owner: alice' --data-binary "@$1" "http://127.0.0.1:$hp/v1/jobs" || { echo "alice's POST of $1 failed" >&2; kill $$; }; }
  local prefix="$run-$case"
  for i in $(seq "$W"); do "$S" worker >"$T/w-$prefix-$i.log" 2>&1 & wp+=($!); done
  sleep 1.5
  # Every file first, so that the cases differ only in alice's jobs.
  seed=$((seed + 1)); "$S" gen --from "$HARD" -n "$BIG" --seed $seed >"$T/big.txt" 2>/dev/null
  seed=$((seed + 1)); "$S" gen --from "$HARD" -n 1000 --seed $seed >"$T/bob.txt" 2>/dev/null
  for j in $(seq "$SPLIT"); do
    seed=$((seed + 1)); "$S" gen --from "$HARD" -n 1000 --seed $seed >"$T/a$j.txt" 2>/dev/null
  done
  # The big job through the CLI: it may be larger than a request body.
  SUDOKU_JOB_OWNER=alice "$S" submit "$T/big.txt" >/dev/null 2>"$T/big-$run-$case.log" || { cat "$T/big-$run-$case.log" >&2; kill $$; }
  sleep 0.6
  if [ "$case" = split ]; then
    for j in $(seq "$SPLIT"); do post "$T/a$j.txt" & done
  fi
  sleep "$DELAY"
  SUDOKU_JOB_OWNER=bob ms timeout 300 "$S" submit --wait "$T/bob.txt"
  kill "${wp[@]}" "$ns" 2>/dev/null || true
  redis-cli -p "$rp" shutdown nosave >/dev/null 2>&1 || true
  wait 2>/dev/null || true
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
: >"$T/alone"; : >"$T/split"; : >"$T/ratio"
for r in $(seq "$RUNS"); do
  # alternate the order, so that neither case always runs on a warmer machine
  if [ $((r % 2)) -eq 1 ]; then a=$(one "$r" alone); s=$(one "$r" split); else s=$(one "$r" split); a=$(one "$r" alone); fi
  ratio=$(awk -v a="$a" -v s="$s" 'BEGIN {printf "%.2f", s / a}')
  echo "run $r: bob's 1,000 puzzles behind alice's $BIG: ${a} ms; behind those and her $SPLIT jobs: ${s} ms; ratio $ratio"
  echo "$a" >>"$T/alone"; echo "$s" >>"$T/split"; echo "$ratio" >>"$T/ratio"
done
echo "medians ($RUNS runs, $W workers): alone $(median <"$T/alone") ms, split $(median <"$T/split") ms, ratio $(median <"$T/ratio") (target <= 1.3)"
