#!/usr/bin/env bash
# Run every fuzz target of sudoku-queue for a bounded time each: the puzzle
# parser (with the solver behind it), the input reader, the work and
# results batch decoders, the cache's value decoder, the results reader's
# checks (producer's verifier), and the configuration loader. CI runs it
# from .ci/run; run it by hand for longer with FUZZTIME, e.g. FUZZTIME=5m.
#
# By default each target runs a fixed number of inputs (about 10 s each on
# a quiet 2-core machine), not a duration: with a duration, Go 1.26's fuzz
# coordinator can fail a run with a bare "context deadline exceeded" when
# a starved worker is mid-input as the time runs out (golang/go#75804,
# fixed in Go 1.27), which failed CI once with no failing input. A count
# has no deadline to race; -timeout still bounds a run that hangs.
#
# A failure leaves the input that found it in the package's
# testdata/fuzz/<target>/ folder: commit it with the fix, and it becomes a
# regular test case of `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME="${FUZZTIME:-}"

# package target inputs
targets=(
  "./solver FuzzParseSolve 60000x"
  "./internal/input FuzzReader 60000x"
  "./internal/job FuzzDecodeWork 20000x"
  "./internal/job FuzzDecodeResults 40000x"
  "./internal/job FuzzDecodeCacheValue 30000x"
  "./internal/job FuzzLifecycle 30000x"
  "./producer FuzzVerify 20000x"
  "./internal/config FuzzLoadYAML 5000x"
)

for t in "${targets[@]}"; do
  read -r pkg name count <<<"$t"
  budget="${FUZZTIME:-$count}"
  # A target that has gone missing is a failure, not a silent skip.
  if ! go test -list "^${name}\$" "$pkg" | grep -x "$name" >/dev/null; then
    echo "fuzz: no target $name in $pkg" >&2
    exit 1
  fi
  echo "fuzz: $pkg $name for $budget"
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$budget" -fuzzminimizetime 10s -timeout 5m "$pkg"
done
echo "fuzz: ok"
