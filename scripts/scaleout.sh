#!/usr/bin/env bash
# scaleout.sh: throughput of one job with 1, 2 and 4 `sudoku worker`
# processes on this machine, with CPU use, against the NATS (JetStream)
# and Redis on 127.0.0.1 (streams and key prefixes of its own, deleted
# afterwards). Two jobs:
#
#   - 200,000 puzzles made by relabelling the 17-clue set: ~5 us of solving
#     each, so the pipeline (producer, NATS, Redis) is what is measured;
#   - 30,000 puzzles of the forum's hardest set: ~0.2 ms each, so solving
#     dominates and the workers' scaling shows.
#
# Each worker runs one solving goroutine (SUDOKU_WORKER_CONCURRENCY=1), so
# the number of processes is the parallelism. Writes the tables to stdout
# and docs/scaleout*.md, the plots to docs/scaleout*.svg.
#
#   scripts/scaleout.sh                       # the README's figures
#   scripts/scaleout.sh -workers 1,2,4,8,16   # on a bigger machine
#   scripts/scaleout.sh -concurrency 0        # each worker on every core
#
# Needs Go, the servers, and shared/data (it says it skips what is
# absent). Run it on a quiet machine: about a minute and a half on 2
# cores. Extra flags go to scripts/scaleout/main.go (see its -help).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p docs
data="${SUDOKU_DATA:-$(cd .. && pwd)/shared/data}"
go run ./scripts/scaleout -n 200000 -workers 1,2,4 -concurrency 1 -timeout 85s \
  -data "$data/17_clue.txt" -label 17-clue -svg docs/scaleout.svg -md docs/scaleout.md "$@"
go run ./scripts/scaleout -n 30000 -workers 1,2,4 -concurrency 1 -timeout 85s \
  -data "$data/forum_hardest_1905_11plus.txt" -label "hardest (forum 11+)" \
  -svg docs/scaleout-hard.svg -md docs/scaleout-hard.md "$@"
