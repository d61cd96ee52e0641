#!/bin/sh
# As in the real nats alpine image: arguments that start with "-" are
# nats-server's flags; anything else is a command to run.
set -e
if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ]; then
  set -- nats-server "$@"
fi
exec "$@"
