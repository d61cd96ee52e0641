#!/usr/bin/env bash
# proof-cpu.sh: what the proof of answers costs a producer, per puzzle,
# with the default configuration. Run from the project root:
#
#   scripts/proof-cpu.sh FILE [ROUNDS] [BEFORE]
#
# (defaults 3 rounds, BEFORE main). It builds `sudoku` from BEFORE (a git
# ref) and from the working tree, starts a private nats-server and
# redis-server on free ports, and per round, for each of
#
#   before       BEFORE's binary, default configuration (no keys);
#   before-keys  BEFORE's binary, proof.key and proof.trusted set (openssl);
#   after        the working tree's binary, default configuration
#                (XDG_CONFIG_HOME a fresh directory: the default key);
#
# runs `sudoku worker` and `sudoku submit --wait` of FILE (its digits
# relabelled each time, so nothing is cached) as separate processes, and
# prints the submit's user+sys CPU (/usr/bin/time -f '%U %S') in
# microseconds a puzzle, and the medians at the end. /usr/bin/time counts
# in 10 ms: on 49,158 puzzles, 0.2 us a puzzle.
set -euo pipefail
FILE=${1:?usage: proof-cpu.sh FILE [ROUNDS] [BEFORE]}
ROUNDS=${2:-3}
BEFORE=${3:-main}
T=$(mktemp -d)
NP="" RP="" W=""
cleanup() {
  [ -n "$W" ] && kill "$W" 2>/dev/null
  [ -n "$NP" ] && kill "$NP" 2>/dev/null
  [ -n "$RP" ] && kill "$RP" 2>/dev/null
  wait 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT
mkdir "$T/src"
git archive "$BEFORE" | tar -x -C "$T/src"
(cd "$T/src" && go build -o "$T/before" ./cmd/sudoku)
go build -o "$T/after" ./cmd/sudoku
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
NPORT=$(port) RPORT=$(port)
nats-server -a 127.0.0.1 -p "$NPORT" -js -sd "$T/js" > "$T/nats.log" 2>&1 & NP=$!
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no > "$T/redis.log" 2>&1 & RP=$!
sleep 1
export SUDOKU_NATS_URL=nats://127.0.0.1:$NPORT SUDOKU_REDIS_ADDRS=127.0.0.1:$RPORT SUDOKU_LOG_LEVEL=warn
export XDG_CONFIG_HOME=$T/config
openssl genpkey -algorithm ed25519 -out "$T/key.pem" 2>/dev/null
openssl pkey -in "$T/key.pem" -pubout -out "$T/trusted.pem"
: > "$T/rows"
for r in $(seq 1 "$ROUNDS"); do
  for v in before before-keys after; do
    bin=$T/before
    [ "$v" = after ] && bin=$T/after
    unset SUDOKU_PROOF_KEY SUDOKU_PROOF_TRUSTED
    if [ "$v" = before-keys ]; then
      export SUDOKU_PROOF_KEY=$T/key.pem SUDOKU_PROOF_TRUSTED=$T/trusted.pem
    fi
    perm=$(echo 123456789 | fold -w1 | shuf | tr -d '\n')
    grep -v '^#' "$FILE" | grep . | tr 123456789 "$perm" > "$T/job.txt"
    n=$(wc -l < "$T/job.txt")
    "$bin" worker > "$T/worker.log" 2>&1 & W=$!
    sleep 2
    /usr/bin/time -f '%U %S' -o "$T/cpu" "$bin" submit --wait --out "$T/out.txt" "$T/job.txt" > /dev/null 2> "$T/submit.log" \
      || { echo "$v: submit failed:"; cat "$T/submit.log"; }
    kill "$W"; wait "$W" 2>/dev/null || true; W=""
    [ "$(wc -l < "$T/out.txt")" -eq "$n" ] || echo "$v: $(wc -l < "$T/out.txt") results for $n puzzles"
    read -r u s < "$T/cpu"
    us=$(python3 -c "print(f'{($u + $s) / $n * 1e6:.2f}')")
    echo "round $r $v: producer $us us/puzzle"
    echo "$v $us" >> "$T/rows"
  done
done
python3 - "$T/rows" <<'PY'
import sys, statistics as st
rows = {}
for line in open(sys.argv[1]):
    v, us = line.split()
    rows.setdefault(v, []).append(float(us))
print("medians, producer CPU us/puzzle: " + ", ".join(f"{v} {st.median(x):.1f}" for v, x in rows.items()))
PY
