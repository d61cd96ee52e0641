#!/usr/bin/env bash
# scripts/images/build.sh: build, offline, stand-ins for the three images
# docker-compose.yml names, so the compose file runs unchanged on a machine
# that reaches no image registry:
#
#   nats:2.10-alpine    static nats-server (go.mod's version) + busybox
#   redis:7             Debian's redis-server and redis-cli + their libraries
#   sudoku-queue:local  the static sudoku binary + configs/, as the Dockerfile lays it out
#
# Run as root from anywhere: scripts/images/build.sh [nats|redis|sudoku ...]
# (default: all three). Needs a running Docker engine, Go, and Debian's
# busybox-static, redis-server and redis-tools (installed with apt when
# missing). Each image is built with `docker build` from a context made in
# a temporary directory; nothing is pulled.
#
# The sudoku binary is built from the working tree, or from a commit with
# SUDOKU_REF=<rev> (e.g. HEAD, to test what is committed while the tree is
# being edited): `git archive <rev>` is then the tree sent to the engine.
#
# A tag that already holds a real image (one without the stand-in label) is
# left alone, so a machine that has the real nats and redis images keeps
# them; sudoku-queue:local is always rebuilt (it is the code under test).
# STANDIN_FORCE=1 replaces real images too.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here=$root/scripts/images
export DOCKER_BUILDKIT=0 # the classic builder: no buildx plugin needed

work=$(mktemp -d "${TMPDIR:-/tmp}/sudoku-images.XXXXXX")
trap 'rm -rf "$work"' EXIT

log() { echo "images: $*" >&2; }

need_deb() { # need_deb FILE PACKAGE: install PACKAGE when FILE is missing
  [ -e "$1" ] && return 0
  log "installing $2 (for $1)"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null 2>&1; then
    apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
  fi
  [ -e "$1" ] || { log "$2 installed no $1"; exit 1; }
}

# keep_real TAG: true when TAG holds an image that is not one of ours.
keep_real() {
  local label
  [ "${STANDIN_FORCE:-0}" = 1 ] && return 1
  label=$(docker image inspect -f '{{index .Config.Labels "org.sudoku-queue.stand-in"}}' "$1" 2>/dev/null) || return 1
  if [ -z "$label" ] || [ "$label" = "<no value>" ]; then
    log "$1: a real image is there; keeping it (STANDIN_FORCE=1 replaces it)"
    return 0
  fi
  return 1
}

# dbuild ARGS...: docker build, quiet; its output only when it fails (the
# classic builder's deprecation notice is noise here).
dbuild() {
  local out
  if ! out=$(docker build -q "$@" 2>&1); then
    printf '%s\n' "$out" >&2
    return 1
  fi
  printf '%s\n' "$out" | grep -E '^sha256:' | tail -n 1
}

build() { # build NAME TAG: docker build $work/NAME (Dockerfile + rootfs/)
  cp "$here/$1/Dockerfile" "$work/$1/Dockerfile"
  dbuild -t "$2" "$work/$1" >/dev/null
  log "$2: built ($(docker image inspect -f '{{.Size}}' "$2" | awk '{printf "%.1f MB", $1/1e6}'))"
}

# copy_with_libs FILE DEST_ROOT NAME: copy FILE to DEST_ROOT/usr/local/bin/NAME
# and every shared library ldd lists, at its own path, dereferenced.
copy_with_libs() {
  install -D -m 0755 "$1" "$2/usr/local/bin/$3"
  local lib
  for lib in $(ldd "$1" | grep -o '/[^ ]*'); do
    install -D -m 0755 "$(readlink -f "$lib")" "$2$lib"
  done
}

need_busybox() { # a static /bin/busybox, for images without a libc
  need_deb /bin/busybox busybox-static
  if ldd /bin/busybox >/dev/null 2>&1; then
    log "/bin/busybox is dynamically linked: install busybox-static"
    exit 1
  fi
}

image_nats() {
  keep_real nats:2.10-alpine && return 0
  need_busybox
  local r=$work/nats/rootfs
  mkdir -p "$r/bin" "$r/usr/local/bin" "$r/etc/nats" "$r/data" "$r/tmp"
  chmod 1777 "$r/tmp"
  (cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" \
    -o "$r/usr/local/bin/nats-server" github.com/nats-io/nats-server/v2)
  install -m 0755 /bin/busybox "$r/bin/busybox"
  local applet # every applet, as in alpine (sh, wget, nslookup, ...)
  for applet in $(/bin/busybox --list); do
    [ -e "$r/bin/$applet" ] || ln -s busybox "$r/bin/$applet"
  done
  install -m 0755 "$here/nats/docker-entrypoint.sh" "$r/usr/local/bin/docker-entrypoint.sh"
  install -m 0644 "$here/nats/nats-server.conf" "$r/etc/nats/nats-server.conf"
  build nats nats:2.10-alpine
}

image_redis() {
  keep_real redis:7 && return 0
  need_deb /usr/bin/redis-server redis-server
  need_deb /usr/bin/redis-cli redis-tools
  need_busybox
  local r=$work/redis/rootfs
  mkdir -p "$r/bin" "$r/data" "$r/tmp" "$r/etc"
  chmod 1777 "$r/tmp"
  install -m 0755 /bin/busybox "$r/bin/busybox"
  ln -s busybox "$r/bin/sh"
  install -D -m 0755 "$here/redis/docker-entrypoint.sh" "$r/usr/local/bin/docker-entrypoint.sh"
  copy_with_libs "$(readlink -f /usr/bin/redis-server)" "$r" redis-server
  copy_with_libs /usr/bin/redis-cli "$r" redis-cli
  printf 'root:x:0:0:root:/root:/sbin/nologin\nredis:x:999:999::/data:/sbin/nologin\n' >"$r/etc/passwd"
  printf 'root:x:0:\nredis:x:999:\n' >"$r/etc/group"
  build redis redis:7
}

image_sudoku() {
  local r=$work/sudoku/rootfs src=$work/context
  mkdir -p "$r/usr/local/bin" "$r/etc/sudoku" "$r/etc/ssl/certs" "$r/tmp" "$r/home/nonroot" "$src"
  chmod 1777 "$r/tmp"
  chown 65532:65532 "$r/home/nonroot"
  # The real Dockerfile builds from the Docker build context, so build from
  # exactly that: send the project to the engine (which applies
  # .dockerignore), and take the files back out. A file the build needs
  # that .dockerignore drops fails here, as it would in `docker build .`.
  local ctx cid tree=$root
  if [ -n "${SUDOKU_REF:-}" ]; then
    tree=$work/tree
    mkdir -p "$tree"
    git -C "$root" archive "$SUDOKU_REF" | tar -x -C "$tree"
    log "sudoku: building from $SUDOKU_REF ($(git -C "$root" rev-parse --short "$SUDOKU_REF"))"
  fi
  ctx=$(printf 'FROM scratch\nCOPY . /src/\n' | dbuild -f - "$tree")
  cid=$(docker create "$ctx" /none)
  docker export "$cid" | tar -x -C "$src" src
  docker rm "$cid" >/dev/null
  docker rmi "$ctx" >/dev/null
  (cd "$src/src" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" \
    -o "$r/usr/local/bin/sudoku" ./cmd/sudoku)
  cp -R "$src/src/configs/." "$r/etc/sudoku/"
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    cp /etc/ssl/certs/ca-certificates.crt "$r/etc/ssl/certs/"
  fi
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$r/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$r/etc/group"
  build sudoku sudoku-queue:local
}

[ $# -gt 0 ] || set -- nats redis sudoku
for name in "$@"; do
  case $name in
  nats | redis | sudoku) mkdir -p "$work/$name" && "image_$name" ;;
  *) log "unknown image $name (want nats, redis or sudoku)"; exit 2 ;;
  esac
done
