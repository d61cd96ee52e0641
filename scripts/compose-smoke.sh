#!/usr/bin/env bash
# scripts/compose-smoke.sh: start docker-compose.yml for real and use it.
#
#   sudo scripts/compose-smoke.sh          # as root, from anywhere (CI: .ci/run)
#
# What `docker-compose config -q` cannot see: images, entrypoints and
# health checks, DNS names and routes between the containers, the config
# baked into the image, depends_on conditions, `--scale worker=4`, the
# producer profile, the published ports, a NATS server lost in the middle
# of a job and coming back, the workers' /metrics, and `down -v` leaving
# nothing behind. Steps:
#
#  1. start dockerd when no engine answers (Debian's docker.io, installed
#     with apt when missing), and install docker-compose when missing;
#  2. build stand-ins for the compose file's images (scripts/images/build.sh:
#     nothing is pulled; a tag that holds a real image is kept);
#  3. docker-compose up -d --scale worker=4, under a project name of its own,
#     with the roles on (the "roles" service writes the users to a folder of
#     this run, $SUDOKU_ROLES_DIR; each service connects as its role's
#     user), and wait until every container is healthy;
#  4. job 1: the producer profile submits SMOKE_N (5,000) fresh puzzles
#     (sudoku gen, random seed) with --wait; its output must equal
#     `sudoku solve --local` of the same file on the host, line for line;
#     from the host, job status as reader works, and the roles hold: no
#     user is refused, a reader's `job rm` is refused naming its role, and
#     Redis's default user may only PING;
#  5. job 2: SMOKE_KILL_N (100,000) harder puzzles; once the job is under
#     way (0 < done < n), `docker-compose kill nats2`; the job must finish
#     with exact counts and the exact output; then nats2 is started again
#     and must rejoin (healthy, routes to nats1 and nats3, current in the
#     JetStream meta group);
#  6. /metrics of a worker, fetched inside the compose network through the
#     DNS name "worker" (which must have one address per replica);
#  7. docker-compose down -v (also on failure: a trap), and check that no
#     container, network or volume of the project is left.
#
# It talks to the system only through compose and the sudoku CLI (submit,
# job status, solve --local), never through Redis or NATS keys, so it does
# not depend on where the job state is kept. Every wait is bounded; the
# whole run takes a few minutes at most (mostly the first build of
# nats-server). Settings (environment): SMOKE_N, SMOKE_KILL_N,
# SMOKE_WORKERS (4), SMOKE_SEED (random), SUDOKU_REF (build the sudoku
# image from this commit instead of the working tree), SMOKE_KEEP_DOCKERD=1
# (leave a dockerd this script started running).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

N1=${SMOKE_N:-5000}
N2=${SMOKE_KILL_N:-100000}
WORKERS=${SMOKE_WORKERS:-4}
SEED=${SMOKE_SEED:-$((RANDOM * 32768 + RANDOM))}
project=sudoku-smoke-$$
compose_file=$root/docker-compose.yml

now_ms() { date +%s%3N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1000 }'; }
T_START=$(now_ms)
log() { printf '[%6ss] smoke: %s\n' "$(secs "$T_START" "$(now_ms)")" "$*"; }
fail() {
  log "FAIL: $*"
  exit 1
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sudoku-smoke.XXXXXX")
chmod 755 "$tmp" # the containers (user 65532) read the puzzles from here
started_dockerd=
job2_pid=
project_up=

dc() { docker-compose -p "$project" -f "$compose_file" "$@"; }

# leftovers: the project's containers, networks and volumes, one a line.
leftovers() {
  local f=label=com.docker.compose.project=$project
  docker ps -aq --filter "$f" | sed 's/^/container /'
  docker network ls -q --filter "$f" | sed 's/^/network /'
  docker volume ls -q --filter "$f" | sed 's/^/volume /'
}

# streams: the JetStream streams as the running NATS servers see them
# (messages, sequences, replicas and leader), from their /jsz.
streams() {
  local svc c
  for svc in nats1 nats2 nats3; do
    c=$(dc ps -q "$svc" 2>/dev/null) || continue
    [ "$(docker inspect -f '{{.State.Running}}' "$c" 2>/dev/null)" = true ] || continue
    echo "----- JetStream streams seen by $svc"
    timeout 10 docker exec "$c" wget -q -O - 'http://127.0.0.1:8222/jsz?streams=true&config=true' 2>/dev/null |
      python3 -c '
import json, sys
for a in json.load(sys.stdin).get("account_details", []):
    for s in a.get("stream_detail", []):
        cl, st = s.get("cluster", {}), s.get("state", {})
        print("  %s: R%s, leader %s, %s messages, seq %s..%s" % (s["name"],
              s.get("config", {}).get("num_replicas"), cl.get("leader"), st.get("messages"),
              st.get("first_seq"), st.get("last_seq")))' 2>/dev/null || true
    return 0
  done
}

diagnose() {
  log "diagnostics: containers of $project"
  dc ps 2>&1 || true
  streams
  local c
  for c in $(docker ps -aq --filter "label=com.docker.compose.project=$project" 2>/dev/null); do
    echo "----- $(docker inspect -f '{{.Name}}' "$c" 2>/dev/null) (last 25 lines)"
    docker logs --tail 25 "$c" 2>&1 | cut -c1-400 || true
  done
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  if [ -n "$project_up" ] && [ "$rc" -ne 0 ]; then
    diagnose
    for f in job1.err job2.err status.err; do
      [ -s "$tmp/$f" ] && { echo "----- $f (last 15 lines)"; tail -n 15 "$tmp/$f" | cut -c1-400; }
    done
  fi
  # The background producer of job 2: its timeout (which stops docker-compose), then itself.
  if [ -n "$job2_pid" ] && kill -0 "$job2_pid" 2>/dev/null; then
    pkill -TERM -P "$job2_pid" 2>/dev/null
    kill "$job2_pid" 2>/dev/null
  fi
  if [ -n "$project_up" ]; then
    log "cleanup: docker-compose down -v"
    timeout 120 docker-compose -p "$project" -f "$compose_file" --profile producer \
      down -v --remove-orphans -t 10 >/dev/null 2>&1
    local left
    left=$(leftovers 2>/dev/null)
    [ -n "$left" ] && log "cleanup: still there after down: $(echo "$left" | tr '\n' ' ')"
  fi
  if [ -n "$started_dockerd" ] && [ "${SMOKE_KEEP_DOCKERD:-0}" != 1 ]; then
    kill "$started_dockerd" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$started_dockerd" 2>/dev/null || break; sleep 0.2; done
  fi
  rm -rf "$tmp"
  [ "$rc" -ne 0 ] && log "FAILED (exit $rc)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" = 0 ] || fail "run as root (it starts dockerd and installs packages)"

apt_install() { # apt_install PACKAGE...
  log "installing $* with apt"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1; then
    apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  fi
}

# ---- 1. the engine and docker-compose
command -v dockerd >/dev/null 2>&1 || apt_install docker.io
command -v docker-compose >/dev/null 2>&1 || apt_install docker-compose
command -v docker >/dev/null 2>&1 || apt_install docker.io
if ! timeout 10 docker info >/dev/null 2>&1; then
  dockerd_log=${TMPDIR:-/tmp}/sudoku-smoke-dockerd.log
  # A dockerd that was killed leaves its pid file, and a new one refuses to start.
  if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    rm -f /var/run/docker.pid
  fi
  log "starting dockerd (log: $dockerd_log)"
  dockerd >"$dockerd_log" 2>&1 &
  started_dockerd=$!
  for _ in $(seq 1 120); do
    [ -S /var/run/docker.sock ] && timeout 5 docker info >/dev/null 2>&1 && break
    kill -0 "$started_dockerd" 2>/dev/null || break
    sleep 0.5
  done
  if ! timeout 5 docker info >/dev/null 2>&1; then
    tail -n 20 "$dockerd_log" >&2 || true
    fail "dockerd did not answer on /var/run/docker.sock within 60s"
  fi
fi
log "engine $(docker version -f '{{.Server.Version}}' 2>/dev/null), $(docker-compose version --short 2>/dev/null | sed 's/^/docker-compose /')"

# ---- 2. images
t=$(now_ms)
"$root/scripts/images/build.sh"
T_BUILD=$(secs "$t" "$(now_ms)")
log "images built in ${T_BUILD}s"

# The host's sudoku: the very binary of the image (it is static).
cid=$(docker create sudoku-queue:local)
docker cp "$cid:/usr/local/bin/sudoku" "$tmp/sudoku" >/dev/null
docker rm "$cid" >/dev/null
sudoku=$tmp/sudoku

# ---- puzzles, and the answers from the host
mkdir -p "$tmp/in"
chmod 755 "$tmp/in"
"$sudoku" gen --from "$root/internal/cli/testdata/17_clue_200.txt" -n "$N1" --seed "$SEED" \
  --out "$tmp/in/job1.txt" 2>/dev/null
"$sudoku" gen --from "$root/internal/cli/testdata/hardest_200.txt" -n "$N2" --seed "$((SEED + 1))" \
  --out "$tmp/in/job2.txt" 2>/dev/null
chmod 644 "$tmp/in/"*.txt
"$sudoku" solve --local "$tmp/in/job1.txt" >"$tmp/job1.want" 2>/dev/null ||
  fail "solve --local job1.txt: exit $?"
"$sudoku" solve --local "$tmp/in/job2.txt" >"$tmp/job2.want" 2>/dev/null ||
  fail "solve --local job2.txt: exit $?"
log "puzzles: $N1 (17-clue) and $N2 (hardest) from seed $SEED, solved on the host"

# ---- 3. up, and healthy
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() { # free_port FROM: the first free loopback port from FROM on
  local p=$1
  while ! port_free "$p"; do p=$((p + 1)); done
  echo "$p"
}
# The host may run its own nats-server and redis-server on 4222 and 6379.
SUDOKU_NATS_HOST_PORT=$(free_port 14222)
SUDOKU_REDIS_HOST_PORT=$(free_port 16379)
export SUDOKU_NATS_HOST_PORT SUDOKU_REDIS_HOST_PORT
# The roles' folder (users, passwords, the servers' files): the compose
# file's "roles" service writes it here, not in the checkout.
SUDOKU_ROLES_DIR=$tmp/roles
export SUDOKU_ROLES_DIR

# as_user SECONDS USER CMD...: run the host's sudoku CMD as USER (its role's
# credentials from $SUDOKU_ROLES_DIR) against the published ports, with the
# cluster's settings, for at most SECONDS. Settings through the
# environment: a command refuses a flag it does not use.
as_user() {
  local secs=$1 user=$2
  shift 2
  timeout "$secs" env SUDOKU_CONFIG="$root/configs/cluster.yaml" SUDOKU_LOG_FORMAT=text \
    SUDOKU_NATS_URL="nats://127.0.0.1:$SUDOKU_NATS_HOST_PORT" SUDOKU_REDIS_ADDRS="127.0.0.1:$SUDOKU_REDIS_HOST_PORT" \
    SUDOKU_NATS_USER="$user" SUDOKU_NATS_PASSWORD_FILE="$SUDOKU_ROLES_DIR/$user/nats_password" \
    SUDOKU_REDIS_USERNAME="$user" SUDOKU_REDIS_PASSWORD_FILE="$SUDOKU_ROLES_DIR/$user/redis_password" \
    "$sudoku" "$@"
}

log "docker-compose -p $project up -d --scale worker=$WORKERS (host ports: NATS $SUDOKU_NATS_HOST_PORT, Redis $SUDOKU_REDIS_HOST_PORT)"
t_up=$(now_ms)
project_up=1
timeout 240 docker-compose -p "$project" -f "$compose_file" up -d --no-build --scale "worker=$WORKERS" \
  >"$tmp/up.log" 2>&1 || {
  cat "$tmp/up.log"
  fail "docker-compose up failed"
}
T_UP=$(secs "$t_up" "$(now_ms)")
log "up in ${T_UP}s"

# states: one line per container of the project: name state health restarts
states() {
  local ids
  ids=$(dc ps -q 2>/dev/null)
  [ -n "$ids" ] || return 0
  # shellcheck disable=SC2086
  docker inspect -f '{{.Name}} {{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}no-healthcheck{{end}} {{.RestartCount}}' $ids |
    sed 's|^/||' | sort
}

# wait_healthy COUNT SECONDS: wait until COUNT containers are running and healthy.
wait_healthy() {
  local want=$1 deadline=$(($(date +%s) + $2)) st n
  while :; do
    st=$(states)
    n=$(echo "$st" | awk '$2 == "running" && $3 == "healthy"' | grep -c . || true)
    [ "$n" -eq "$want" ] && return 0
    if [ "$(date +%s)" -ge "$deadline" ]; then
      log "not healthy after $2s ($n of $want):"
      echo "$st" | awk '!($2 == "running" && $3 == "healthy")' | while read -r name state health restarts; do
        echo "  $name: $state, $health, $restarts restarts"
        docker inspect -f '{{if .State.Health}}{{range .State.Health.Log}}    probe: exit {{.ExitCode}}: {{.Output}}{{end}}{{end}}' "$name" | tail -n 3
        echo "  ---- logs of $name"
        docker logs --tail 20 "$name" 2>&1 | cut -c1-300 | sed 's/^/    /'
      done
      return 1
    fi
    sleep 1
  done
}
want=$((3 + 1 + WORKERS))
wait_healthy "$want" 150 || fail "the services did not all become healthy"
T_HEALTHY=$(secs "$t_up" "$(now_ms)")
log "healthy: all $want containers, ${T_HEALTHY}s after up started"
states | sed 's/^/  /'

# The published ports answer on the host's loopback (no client needed).
nats_info=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"; head -c 4 <&3' _ "$SUDOKU_NATS_HOST_PORT") || true
[ "$nats_info" = INFO ] || fail "NATS on 127.0.0.1:$SUDOKU_NATS_HOST_PORT did not greet (got '$nats_info')"
redis_pong=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"; printf "PING\r\n" >&3; head -c 5 <&3' _ "$SUDOKU_REDIS_HOST_PORT") || true
[ "$redis_pong" = "+PONG" ] || fail "Redis on 127.0.0.1:$SUDOKU_REDIS_HOST_PORT did not answer PING (got '$redis_pong')"
log "published ports answer: NATS 127.0.0.1:$SUDOKU_NATS_HOST_PORT, Redis 127.0.0.1:$SUDOKU_REDIS_HOST_PORT"

# status ID [SECONDS]: `sudoku job status ID` as the reader, from the host
# through nats1's published port, bounded. (A worker may not read another
# owner's job: reading every owner's is the reader's part.)
status() { as_user "${2:-40}" reader job status "$1" 2>>"$tmp/status.err"; }
# solved_of STATUS: "DONE TOTAL" from job status's progress line, which is
# "done D of N lines (...)" (job state in JetStream) or, before that,
# "solved D of Q queued (...)".
solved_of() {
  awk '/^done +[0-9]+ of [0-9]+ lines/ || /^solved +[0-9]+ of [0-9]+ queued/ { print $2, $4; exit }' <<<"$1"
}
# job_id_of FILE: the id in submit's "job ID: N lines: ..." line.
job_id_of() { awk '/^job [^ ]+: [0-9]+ lines: / { sub(/:$/, "", $2); print $2; exit }' "$1"; }

# check_counts ID N: the job is finished, with N lines, N of N done, 0
# unsolved, N unique. Tried for 10s: a read may come from a replica that lags.
check_counts() {
  local s try
  for try in $(seq 1 10); do
    s=$(status "$1") || fail "job status $1: exit $?: $(tail -n 3 "$tmp/status.err")"
    if grep -Eq '^state +finished$' <<<"$s" &&
      grep -Eq "^lines +$2(:|\$)" <<<"$s" &&
      [ "$(solved_of "$s")" = "$2 $2" ] &&
      grep -Eq '^unsolved +0 ' <<<"$s" &&
      grep -Eq "^results +$2 unique( |\$)" <<<"$s"; then
      return 0
    fi
    sleep 1
  done
  echo "$s"
  fail "job $1: want state finished, $2 lines, $2 of $2 done, $2 unique, 0 unsolved"
}

# compare NAME: NAME.out (from the cluster) against NAME.want (solve --local).
compare() {
  if ! cmp -s "$tmp/$1.want" "$tmp/$1.out"; then
    log "$1: output differs from solve --local ($(wc -l <"$tmp/$1.out") lines, want $(wc -l <"$tmp/$1.want")):"
    diff "$tmp/$1.want" "$tmp/$1.out" | head -n 10 || true
    fail "$1: wrong output"
  fi
}

# jobfail NAME ID MESSAGE: show what submit, the job and the dead-letter
# stream say, then fail.
# dump_producers: a producer still running: where is it stuck? Go prints
# its goroutines on SIGQUIT, to the standard error that compose hands to
# the job's .err file.
dump_producers() {
  local c dumped=
  for c in $(docker ps -q --filter "label=com.docker.compose.project=$project" --filter label=com.docker.compose.oneoff=True); do
    docker kill -s QUIT "$c" >/dev/null 2>&1 && dumped=1
  done
  if [ -n "$dumped" ]; then sleep 2; fi
}

jobfail() {
  dump_producers
  echo "----- $1: submit's standard error (the goroutine dump cut to the project's frames)"
  awk '/^SIGQUIT/ { dump = 1; print; next }
       !dump && !/^Creating / { print; next }
       dump && (/^goroutine / || /sudoku-queue/) { print }' "$tmp/$1.err" | sed -n 1,120p | cut -c1-300
  if [ -n "$2" ]; then
    echo "----- sudoku job status $2"
    status "$2" || true
  fi
  echo "----- sudoku dlq list (as admin, from the host)"
  as_user 40 admin dlq list 2>&1 | sed -n 1,20p | cut -c1-400 || true
  fail "$3"
}

# ---- 4. job 1: the producer profile, submit --wait
log "job 1: producer profile, submit --wait, $N1 puzzles"
t=$(now_ms)
rc=0
timeout 90 docker-compose -p "$project" -f "$compose_file" --profile producer run --rm -T \
  -v "$tmp/in:/in:ro" producer submit --wait /in/job1.txt >"$tmp/job1.out" 2>"$tmp/job1.err" || rc=$?
T_JOB=$(secs "$t" "$(now_ms)")
id1=$(job_id_of "$tmp/job1.err")
[ "$rc" -eq 0 ] || jobfail job1 "$id1" "job 1: the producer exited $rc$([ "$rc" = 124 ] && echo ': not done within 90s')"
[ -n "$id1" ] || jobfail job1 "" "job 1: no 'job ID: N lines: ...' line from submit"
compare job1
check_counts "$id1" "$N1"
log "job 1 ($id1): $N1 lines identical to solve --local, counts exact, in ${T_JOB}s ($(grep -o '[0-9]* puzzles in [^ ]*' "$tmp/job1.err" | tail -n 1 || true))"

# The host reaches the cluster through the published ports, with the same CLI,
# the cluster's settings and the reader's credentials.
if ! s=$(as_user 40 reader job status "$id1" 2>"$tmp/host.err") ||
  [ "$(solved_of "$s")" != "$N1 $N1" ]; then
  echo "$s"
  cat "$tmp/host.err"
  fail "job status from the host through the published ports"
fi
log "job 1: job status from the host (as reader) through 127.0.0.1:$SUDOKU_NATS_HOST_PORT: $N1 of $N1"

# The roles are on: no user, no connection; a reader may not remove a job
# (and is told so at once, by role and the job's owner); Redis without a
# user may only PING.
rc=0
SUDOKU_CONFIG=$root/configs/cluster.yaml SUDOKU_NATS_URL=nats://127.0.0.1:$SUDOKU_NATS_HOST_PORT \
  timeout 40 "$sudoku" job list >/dev/null 2>"$tmp/host.err" || rc=$?
[ "$rc" = 1 ] && grep -q 'refused the credentials' "$tmp/host.err" || {
  cat "$tmp/host.err"
  fail "job list without a user: exit $rc, want 1 and the credentials refused"
}
rc=0
as_user 60 reader job rm "$id1" >/dev/null 2>"$tmp/host.err" || rc=$?
[ "$rc" = 1 ] && grep -qF "reader (role reader) may not change job $id1: it is " "$tmp/host.err" || {
  cat "$tmp/host.err"
  fail "job rm as reader: exit $rc, want 1 and the refusal named"
}
noperm=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"; printf "GET x\r\n" >&3; head -c 7 <&3' _ "$SUDOKU_REDIS_HOST_PORT") || true
[ "$noperm" = "-NOPERM" ] || fail "Redis without a user: GET answered '$noperm', want -NOPERM"
log "roles: no user is refused by NATS; job rm as reader is refused at once, naming the role and the job's owner; Redis's default user may only PING"

# ---- 5. job 2: nats2 killed in the middle
log "job 2: $N2 puzzles; nats2 is killed once the job is under way"
t=$(now_ms)
(
  rc=0
  timeout 150 docker-compose -p "$project" -f "$compose_file" --profile producer run --rm -T \
    -v "$tmp/in:/in:ro" producer submit --wait /in/job2.txt >"$tmp/job2.out" 2>"$tmp/job2.err" || rc=$?
  now_ms >"$tmp/job2.end"
  exit "$rc"
) &
job2_pid=$!
id2=
for _ in $(seq 1 600); do
  id2=$(job_id_of "$tmp/job2.err")
  [ -n "$id2" ] && break
  if ! kill -0 "$job2_pid" 2>/dev/null; then
    rc=0
    wait "$job2_pid" || rc=$?
    job2_pid=
    jobfail job2 "" "job 2: the producer exited $rc before it printed the job id"
  fi
  sleep 0.1
done
[ -n "$id2" ] || jobfail job2 "" "job 2: no job id from submit within 60s"
killed_at=
deadline=$(($(date +%s) + 120))
while [ "$(date +%s)" -lt "$deadline" ]; do
  s=$(status "$id2") || {
    sleep 0.2
    continue
  }
  read -r done queued <<<"$(solved_of "$s") "
  if [ -n "$done" ] && [ "$done" -gt 0 ] && [ "$done" -lt "$N2" ]; then
    t_kill=$(now_ms)
    timeout 60 docker-compose -p "$project" -f "$compose_file" kill nats2 >/dev/null 2>&1 ||
      fail "docker-compose kill nats2"
    killed_at=$done
    break
  fi
  [ -n "$done" ] && [ "$done" -ge "$N2" ] && fail "job 2 finished before nats2 could be killed: raise SMOKE_KILL_N"
  sleep 0.2
done
[ -n "$killed_at" ] || jobfail job2 "$id2" "job 2 made no progress within 120s"
log "job 2 ($id2): nats2 killed at $killed_at of $N2 solved ($((killed_at * 100 / N2))%), in $(secs "$t_kill" "$(now_ms)")s"
[ "$(docker inspect -f '{{.State.Running}}' "${project}_nats2_1" 2>/dev/null)" = false ] ||
  fail "nats2 still running after docker-compose kill"
# Progress until the producer is done: how long the loss of a server stalls the job.
# A job that stands still for 60s has stalled: no point waiting for the timeout.
progress=
last=$killed_at
t_last=$(date +%s)
: >"$tmp/status.err"
while kill -0 "$job2_pid" 2>/dev/null; do
  src=0
  s=$(status "$id2" 10) || src=$?
  if [ "$src" = 0 ]; then
    read -r done queued <<<"$(solved_of "$s") "
    progress="$progress $(secs "$t_kill" "$(now_ms)")s:$done"
    if [ -n "$done" ] && [ "$done" != "$last" ]; then
      last=$done
      t_last=$(date +%s)
    fi
  else
    progress="$progress $(secs "$t_kill" "$(now_ms)")s:status-exit-$src"
  fi
  if [ $(($(date +%s) - t_last)) -ge 60 ]; then
    log "job 2 progress after the kill (seconds:done):$progress"
    if [ "$last" = "$N2" ]; then
      dump_producers
      # Are the results all there for another reader?
      wrc=0
      as_user 60 reader job wait "$id2" >"$tmp/job2.wait" 2>"$tmp/job2.wait.err" || wrc=$?
      if [ "$wrc" = 0 ] && cmp -s "$tmp/job2.want" "$tmp/job2.wait"; then
        log "job 2: 'sudoku job wait $id2' as the reader returns all $N2 lines, identical to solve --local"
      else
        log "job 2: 'sudoku job wait $id2' as the reader: exit $wrc, $(wc -l <"$tmp/job2.wait") lines: $(tail -n 2 "$tmp/job2.wait.err" | tr '\n' ' ')"
      fi
      jobfail job2 "$id2" "job 2: all $N2 lines done, but submit --wait has not returned for 60s"
    fi
    jobfail job2 "$id2" "job 2 stalled: $last of $N2 done and no progress for 60s"
  fi
  sleep 1
done
log "job 2 progress after the kill (seconds:done):$progress"
if [ -s "$tmp/status.err" ]; then
  log "job 2: what 'job status' said on standard error meanwhile: $(sort -u "$tmp/status.err" | tail -n 3 | cut -c1-300 | tr '\n' ' ')"
fi
rc=0
wait "$job2_pid" || rc=$?
job2_pid=
T_JOB_KILL=$(secs "$t" "$(cat "$tmp/job2.end" 2>/dev/null || now_ms)")
[ "$rc" -eq 0 ] || jobfail job2 "$id2" "job 2: the producer exited $rc$([ "$rc" = 124 ] && echo ': not done within 150s')"
compare job2
check_counts "$id2" "$N2"
# The job finished after the kill (the status' times have whole seconds).
fin=$(status "$id2" | sed -n 's/^finished *//p')
if [ -n "$fin" ] && [ "$(date -d "$fin" +%s)" -lt "$((t_kill / 1000))" ]; then
  fail "job 2 finished at $fin, before nats2 was killed"
fi
log "job 2 ($id2): $N2 lines identical to solve --local, counts exact, ${T_JOB_KILL}s with nats2 killed ($(grep -o '[0-9]* puzzles in [^ ]*' "$tmp/job2.err" | tail -n 1 || true))"

# nats2 again: healthy (its /healthz needs JetStream current), routed to
# both others, and current in the meta group as seen by the meta leader.
t=$(now_ms)
timeout 60 docker-compose -p "$project" -f "$compose_file" start nats2 >/dev/null 2>&1 || fail "docker-compose start nats2"
wait_healthy "$want" 90 || fail "nats2 did not become healthy again"
# natsget SERVICE PATH: GET the monitoring endpoint PATH of a NATS server, from inside it.
natsget() { timeout 10 docker exec "$(dc ps -q "$1")" wget -q -O - "http://127.0.0.1:8222$2"; }
rejoined=
for _ in $(seq 1 30); do
  routes=$(natsget nats2 /routez | tr -d ' \n' | { grep -o '"remote_name":"[^"]*"' || true; } |
    sort -u | cut -d'"' -f4 | tr '\n' ' ') || routes=
  leader=$(natsget nats1 /jsz | tr -d ' \n' | { grep -o '"meta_cluster":{"name":"[^"]*","leader":"[^"]*"' || true; } |
    sed 's/.*"leader":"\([^"]*\)"/\1/') || leader=
  if [ "$routes" = "nats1 nats3 " ] && [ -n "$leader" ]; then
    if [ "$leader" = nats2 ] || natsget "$leader" /jsz | tr -d ' \n' | grep -q '{"name":"nats2","current":true'; then
      rejoined=1
      break
    fi
  fi
  sleep 1
done
[ -n "$rejoined" ] || fail "nats2 did not rejoin: routes to '$routes', meta leader '$leader'"
T_REJOIN=$(secs "$t" "$(now_ms)")
log "nats2 rejoined in ${T_REJOIN}s: healthy, routes to $routes, current in the meta group (leader $leader)"

# ---- 6. /metrics, from inside the compose network (nats1 has wget and nslookup)
nats1=$(dc ps -q nats1)
nsl=$(timeout 10 docker exec "$nats1" nslookup worker 2>/dev/null || true)
nworker=$(grep -c '^Address: ' <<<"$nsl" || true)
[ "$nworker" -eq "$WORKERS" ] || {
  echo "$nsl"
  fail "the DNS name 'worker' has $nworker addresses, want $WORKERS"
}
metrics=$(timeout 10 docker exec "$nats1" wget -q -O - http://worker:9090/metrics) ||
  fail "GET http://worker:9090/metrics from nats1"
missing=
for m in sudoku_puzzles_total sudoku_batches_total sudoku_batch_duration_seconds sudoku_solve_seconds \
  sudoku_in_flight sudoku_cache_hits_total sudoku_cache_misses_total sudoku_redeliveries_total sudoku_errors_total; do
  grep -q "^# TYPE $m " <<<"$metrics" || missing="$missing $m"
done
[ -z "$missing" ] || fail "http://worker:9090/metrics lacks:$missing"
# Every replica by its container name: the puzzles each solved (informative:
# a worker that restarted starts again from 0).
per=
sum=0
for c in $(dc ps -q worker); do
  name=$(docker inspect -f '{{.Name}}' "$c" | sed 's|^/||')
  n=$(timeout 10 docker exec "$nats1" wget -q -O - "http://$name:9090/metrics" |
    awk '/^sudoku_puzzles_total/ { s += $NF } END { printf "%d", s }') || n=0
  per="$per ${name##*_}:$n"
  sum=$((sum + n))
done
log "metrics: 'worker' resolves to $nworker replicas; http://worker:9090/metrics has the worker's metrics; sudoku_puzzles_total by replica:$per (sum $sum; jobs: $((N1 + N2)) puzzles)"
restarts=$(states | awk '$4 != 0 { printf " %s:%s", $1, $4 }')
[ -z "$restarts" ] || log "warning: containers restarted:$restarts"

# ---- 7. down
t=$(now_ms)
timeout 120 docker-compose -p "$project" -f "$compose_file" --profile producer down -v --remove-orphans \
  >"$tmp/down.log" 2>&1 || {
  cat "$tmp/down.log"
  fail "docker-compose down -v"
}
T_DOWN=$(secs "$t" "$(now_ms)")
project_up=
left=$(leftovers)
[ -z "$left" ] || fail "left after down -v: $(echo "$left" | tr '\n' ' ')"
log "down -v in ${T_DOWN}s: no container, network or volume of $project left"

log "timings: build ${T_BUILD}s, up ${T_UP}s, healthy ${T_HEALTHY}s, job ${T_JOB}s ($N1), job with nats2 killed ${T_JOB_KILL}s ($N2), nats2 rejoin ${T_REJOIN}s, down ${T_DOWN}s, total $(secs "$T_START" "$(now_ms)")s"
log "ok"
