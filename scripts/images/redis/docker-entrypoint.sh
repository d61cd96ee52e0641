#!/bin/sh
# As in the real redis image: arguments that start with "-", or a first
# argument ending in .conf, are redis-server's. And, like the real image
# (whose redis-server is built with protected mode off by default, as a
# container is reached through its network, never through loopback),
# redis-server starts with --protected-mode no unless told otherwise:
# Debian's build has it on, and then refuses every client but loopback
# ("DENIED Redis is running in protected mode ..."), while its health
# check, redis-cli ping from inside, passes. Options given later on the
# command line win, so "--protected-mode yes" still turns it on.
# (The real image also drops to the redis user; this one stays root.)
set -e
if [ "${1#-}" != "$1" ] || [ "${1%.conf}" != "$1" ]; then
  set -- redis-server "$@"
fi
if [ "$1" = redis-server ]; then
  shift
  case ${1:-} in
  -v | --version | -h | --help | --test-memory | --check-system) exec redis-server "$@" ;;
  esac
  if [ "$#" -gt 0 ] && [ "${1#-}" = "$1" ]; then
    conf=$1
    shift
    set -- redis-server "$conf" --protected-mode no "$@"
  else
    set -- redis-server --protected-mode no "$@"
  fi
fi
exec "$@"
