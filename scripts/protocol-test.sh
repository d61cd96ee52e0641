#!/usr/bin/env bash
# protocol-test.sh: the protocol for clients in any language, end to end
# (docs/protocol.md). Against a `sudoku worker` process on the shared NATS
# (a queue of its own: unique subject prefix and streams, removed
# afterwards; its cache entries under a key prefix of their own, expiring
# after 10 minutes):
#   1. the nats CLI (natscli v0.5.0, installed with go install if missing):
#      `nats micro ls` lists the service, `nats micro info` shows its
#      endpoints (submit, status and cancel on P.<endpoint>.*, the last
#      token naming the caller), `nats req P.solve` solves a puzzle, and a
#      bad puzzle gets a micro error with code 422 (bad JSON on
#      P.submit.anonymous: 400, a job id without its owner on
#      P.status.anonymous: 400, an unknown job: 404);
#   2. the Node.js example (examples/node, `npm ci`) submits 1,000 puzzles
#      over NATS alone as the owner $SUDOKU_OWNER and prints the same lines
#      as `sudoku solve --local`; its job's id names the owner, and another
#      caller's status and cancel of it are refused (403) while the owner's
#      status answers; a submission over the worker's quota.lines_pending
#      is refused (429) naming the quota;
#   3. the Go example (examples/go), copied out of the repository with its
#      replace pointed back, `go run . FILE` through the Go client (package
#      client) as the owner go-owner: the same lines as solve --local;
#   4. the examples of docs/protocol.md, run by TestProtocolDoc.
# Needs go, node and npm (Debian: apt-get install -y nodejs npm), and the
# shared NATS (SUDOKU_TEST_NATS_URL, default nats://127.0.0.1:4222). Every
# wait is bounded; it takes about 10 to 30 seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
t0=$(date +%s)
say() { echo "protocol-test: $*"; }
die() { echo "protocol-test: FAIL: $*" >&2; exit 1; }
trap 'echo "protocol-test: FAIL: line $LINENO: $BASH_COMMAND" >&2' ERR

nats_url=${SUDOKU_TEST_NATS_URL:-nats://127.0.0.1:4222}
redis_addr=${SUDOKU_TEST_REDIS_ADDR:-127.0.0.1:6379}

# Tools.
gobin=$(go env GOPATH)/bin
export PATH="$gobin:$PATH"
if ! command -v nats >/dev/null 2>&1; then
  say "installing natscli v0.5.0"
  timeout 300 go install github.com/nats-io/natscli/nats@v0.5.0 || die "cannot install natscli"
fi
say "$(nats --version 2>&1 | head -n1 | sed 's/^/nats CLI /')"
command -v node >/dev/null 2>&1 || die "no node on PATH (Debian: apt-get install -y nodejs npm)"
command -v npm >/dev/null 2>&1 || die "no npm on PATH (Debian: apt-get install -y nodejs npm)"
say "node $(node --version), npm $(npm --version)"

work=$(mktemp -d)
id=$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
prefix=pt_$id
stream=PT_$id
export NATS_URL=$nats_url
# The worker's cache: the shared Redis, under a key prefix of its own, the
# keys expiring by themselves (scanning a big shared Redis to delete them
# would take longer than the test).
export SUDOKU_NATS_URL=$nats_url SUDOKU_REDIS_ADDRS=$redis_addr SUDOKU_REDIS_KEY_PREFIX="$prefix:" SUDOKU_CACHE_TTL=10m
export SUDOKU_QUEUE_STREAM=$stream SUDOKU_QUEUE_DLQ_STREAM=${stream}_DLQ
export SUDOKU_QUEUE_SUBJECT_PREFIX=$prefix SUDOKU_QUEUE_CONSUMER=$prefix
worker_pid=
cleanup() {
  status=$?
  t1=$(date +%s)
  if [ -n "$worker_pid" ]; then
    kill "$worker_pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$worker_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$worker_pid" 2>/dev/null || true
  fi
  for s in "$stream" "${stream}_RESULTS" "${stream}_DLQ" "KV_${stream}_JOBS"; do
    timeout 10 nats stream rm -f "$s" >/dev/null 2>&1 || true
  done
  if [ "$status" -ne 0 ] && [ -f "$work/worker.log" ]; then
    echo "--- worker log (last 20 lines)" >&2
    tail -n 20 "$work/worker.log" >&2
  fi
  rm -rf "$work"
  say "cleaned up in $(($(date +%s) - t1))s"
  exit "$status"
}
trap cleanup EXIT

say "building sudoku"
go build -o "$work/sudoku" ./cmd/sudoku

# A worker on its own queue.
# Batches of 64 puzzles, so that the results of a job come in several
# messages, in the order the worker's two goroutines finish them.
# quota.lines_pending 1,500: the Node.js example's 1,000 lines pass, 1,600
# lines do not.
SUDOKU_QUEUE_BATCH_SIZE=64 SUDOKU_QUOTA_LINES_PENDING=1500 "$work/sudoku" worker --worker-concurrency 2 >"$work/worker.log" 2>&1 &
worker_pid=$!
# Its micro service instance: the one whose endpoints carry this prefix.
instance() {
  nats micro ls sudoku --json 2>/dev/null | node -e '
    const all = JSON.parse(require("fs").readFileSync(0, "utf8") || "[]");
    const me = all.find((s) => (s.endpoints || []).some((e) => (e.metadata || {}).subject_prefix === process.argv[1]));
    if (me) console.log(me.id);' "$prefix" 2>/dev/null || true
}
sid=
for _ in $(seq 1 100); do
  sid=$(instance)
  [ -n "$sid" ] && break
  kill -0 "$worker_pid" 2>/dev/null || die "the worker exited"
  sleep 0.2
done
[ -n "$sid" ] || die "the worker's micro service did not show in 'nats micro ls' within 20s"
say "worker up on prefix $prefix: micro service instance $sid"

# 1. The nats CLI.
nats micro ls >"$work/ls.txt" 2>&1
grep -q "sudoku" "$work/ls.txt" && grep -q "$sid" "$work/ls.txt" || { cat "$work/ls.txt"; die "'nats micro ls' does not list sudoku $sid"; }
nats micro info sudoku "$sid" >"$work/info.txt" 2>&1
grep -Eq "Subject: $prefix\\.solve\$" "$work/info.txt" || { cat "$work/info.txt"; die "'nats micro info sudoku $sid' does not show the solve endpoint on $prefix.solve"; }
for e in submit status cancel; do
  grep -Eq "Subject: $prefix\\.$e\\.\\*\$" "$work/info.txt" || { cat "$work/info.txt"; die "'nats micro info sudoku $sid' does not show the $e endpoint on $prefix.$e.*"; }
done
grep -Eq "subject_prefix: $prefix\$" "$work/info.txt" || { cat "$work/info.txt"; die "'nats micro info' shows no subject_prefix metadata"; }
say "nats micro ls/info: the service and its endpoints solve, submit.*, status.*, cancel.*"

puzzle=.................1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7...
want=$(echo "$puzzle" | "$work/sudoku" solve --local - 2>/dev/null)
reply=$(nats req --raw --timeout 10s "$prefix.solve" "$puzzle" 2>/dev/null)
got=$(printf '%s' "$reply" | node -e '
  const r = JSON.parse(require("fs").readFileSync(0, "utf8"));
  console.log(r.status === "unique" ? r.solution : "status " + r.status);')
[ "$got" = "$want" ] || die "nats req $prefix.solve: $reply, want the solution $want"
say "nats req $prefix.solve: unique, $got"

expect_error() { # subject body code [words the description must hold]
  local out desc
  out=$(nats req --timeout 10s "$1" "$2" 2>&1)
  grep -q "Nats-Service-Error-Code: $3" <<<"$out" || { echo "$out"; die "nats req $1 '$2': no micro error with code $3"; }
  desc=$(sed -n 's/.*Nats-Service-Error: //p' <<<"$out")
  [ -z "${4:-}" ] || grep -qF -- "$4" <<<"$desc" || die "nats req $1 '$2': error $3 says '$desc', not '$4'"
  say "nats req $1 '$2': error $3: $desc"
}
expect_error "$prefix.solve" "123" 422
expect_error "$prefix.solve" "11...............1.....2.3......3.2...1.4......5....6..3......4.7..8...962...7..." 422
expect_error "$prefix.submit.anonymous" '{"puzzles": "not a list"}' 400
expect_error "$prefix.status.anonymous" "0123456789abcdefghijklmnop" 400 # a serial without its owner
expect_error "$prefix.status.anonymous" "anonymous.0123456789abcdefghijklmnop" 404

# 2. The Node.js example, on 1,000 puzzles: every outcome, a grid, repeats.
in=$work/puzzles.txt
{
  cat internal/cli/testdata/mixed.txt
  printf '\n53..7....\n6..195...\n.98....6.\n8...6...3\n4..8.3..1\n7...2...6\n.6....28.\n...419..5\n....8..79\n\n'
  head -n 100 internal/cli/testdata/hardest_200.txt
  "$work/sudoku" gen --from internal/cli/testdata/17_clue_200.txt -n 880 --seed 13 >"$work/gen.txt" 2>/dev/null
  cat "$work/gen.txt"
  head -n 13 "$work/gen.txt"
} >"$in"
# (Exit status 1: some puzzles have no unique solution, as intended.)
"$work/sudoku" solve --local "$in" >"$work/local.txt" 2>"$work/local.err" || [ $? -eq 1 ] ||
  { cat "$work/local.err"; die "sudoku solve --local failed"; }
n=$(wc -l <"$work/local.txt")
[ "$n" -eq 1000 ] || die "the input holds $n puzzles, want 1000"
say "npm ci in examples/node"
(cd examples/node && timeout 120 npm ci --no-audit --no-fund --loglevel=error >"$work/npm.log" 2>&1) ||
  { cat "$work/npm.log"; die "npm ci failed"; }
s=$(date +%s%N)
# Exit status 1, as solve --local's: some puzzles have no unique solution.
code=0
SUDOKU_OWNER=node-owner timeout 90 node examples/node/submit.mjs --timeout 60 "$in" >"$work/node.txt" 2>"$work/node.err" || code=$?
[ "$code" -eq 1 ] || { cat "$work/node.err"; die "examples/node/submit.mjs exited $code, want 1 as sudoku solve --local"; }
ms=$((($(date +%s%N) - s) / 1000000))
diff -u "$work/local.txt" "$work/node.txt" >"$work/diff.txt" ||
  { head -n 40 "$work/diff.txt"; die "examples/node/submit.mjs differs from sudoku solve --local"; }
say "examples/node: $(cat "$work/node.err" | tr -d '\n'); 1000 lines identical to sudoku solve --local (${ms} ms)"

# Its job is the owner's: another caller may neither read nor cancel it,
# the owner reads it.
job=$(sed -n 's/^job \([^ :]*\):.*/\1/p' "$work/node.err")
case "$job" in node-owner.*) ;; *) cat "$work/node.err"; die "the Node.js example's job id '$job' does not name its owner node-owner" ;; esac
expect_error "$prefix.status.mallory" "$job" 403 "mallory (no role) may not read job $job: it is node-owner's"
expect_error "$prefix.cancel.mallory" "$job" 403 "mallory (no role) may not change job $job: it is node-owner's"
state=$(nats req --raw --timeout 10s "$prefix.status.node-owner" "$job" 2>/dev/null |
  node -e 'console.log(JSON.parse(require("fs").readFileSync(0, "utf8")).state)')
[ "$state" = finished ] || die "nats req $prefix.status.node-owner $job: state '$state', want finished"
say "job $job: its owner reads it (finished); mallory's status and cancel refused"

# A quota: 1,600 lines, over the worker's quota.lines_pending of 1,500.
# (Not "cat | head": with pipefail, cat's SIGPIPE fails the script.)
cat "$work/gen.txt" "$work/gen.txt" >"$work/twice.txt"
head -n 1600 "$work/twice.txt" >"$work/over.txt"
out=$(nats req --timeout 10s "$prefix.submit.node-owner" --force-stdin <"$work/over.txt" 2>&1)
grep -q "Nats-Service-Error-Code: 429" <<<"$out" && grep -q "quota.lines_pending = 1500" <<<"$out" ||
  { echo "$out"; die "1,600 lines as node-owner: no 429 naming quota.lines_pending = 1500"; }
say "1,600 lines as node-owner: error 429: $(sed -n 's/.*Nats-Service-Error: //p' <<<"$out")"

# A missing file: one line that says so, exit status 2, no stack trace.
code=0
node examples/node/submit.mjs "$work/no-such-file.txt" >/dev/null 2>"$work/missing.err" || code=$?
[ "$code" -eq 2 ] && grep -q "no such file" "$work/missing.err" && [ "$(wc -l <"$work/missing.err")" -eq 1 ] ||
  { cat "$work/missing.err"; die "examples/node/submit.mjs on a missing file: exit $code, want 2 and one line"; }
say "examples/node on a missing file: $(cat "$work/missing.err")"

# 3. The Go example, from a copy outside the repository, as a user would
# start from it.
cp -r examples/go "$work/go-example"
(cd "$work/go-example" && go mod edit -replace "github.com/sudoku-queue/sudoku-queue=$root") ||
  die "cannot point the Go example's replace at $root"
s=$(date +%s%N)
(cd "$work/go-example" && SUDOKU_JOB_OWNER=go-owner timeout 180 go run . "$in" >"$work/go.txt" 2>"$work/go.err") ||
  { cat "$work/go.err"; die "examples/go failed"; }
ms=$((($(date +%s%N) - s) / 1000000))
diff -u "$work/local.txt" "$work/go.txt" >"$work/diff.txt" ||
  { head -n 40 "$work/diff.txt"; die "examples/go differs from sudoku solve --local"; }
grep -q "^job go-owner\." "$work/go.err" || { cat "$work/go.err"; die "examples/go's job is not go-owner's"; }
say "examples/go: $(tr -d '\n' <"$work/go.err"); 1000 lines identical to sudoku solve --local (${ms} ms, with go run's build)"

# 4. The examples of docs/protocol.md.
(cd "$root" && timeout 120 go test -count=1 -run 'TestProtocolDoc|TestMatchOutput' ./internal/service) ||
  die "docs/protocol.md's examples"

say "ok in $(($(date +%s) - t0))s"
