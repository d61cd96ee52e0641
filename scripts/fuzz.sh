#!/usr/bin/env bash
# Run every fuzz target of sudoku-queue for a bounded time each: the puzzle
# parser (with the solver behind it), the input reader, the work and
# results batch decoders, the cache's value decoder, and the configuration
# loader. CI runs it from
# .ci/run; run it by hand for longer with FUZZTIME, e.g. FUZZTIME=5m.
#
# A failure leaves the input that found it in the package's
# testdata/fuzz/<target>/ folder: commit it with the fix, and it becomes a
# regular test case of `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME="${FUZZTIME:-10s}"

# package target
targets=(
  "./solver FuzzParseSolve"
  "./internal/input FuzzReader"
  "./internal/job FuzzDecodeWork"
  "./internal/job FuzzDecodeResults"
  "./internal/job FuzzDecodeCacheValue"
  "./internal/config FuzzLoadYAML"
)

for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  # A target that has gone missing is a failure, not a silent skip.
  if ! go test -list "^${name}\$" "$pkg" | grep -x "$name" >/dev/null; then
    echo "fuzz: no target $name in $pkg" >&2
    exit 1
  fi
  echo "fuzz: $pkg $name for $FUZZTIME"
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 10s "$pkg"
done
echo "fuzz: ok"
