#!/usr/bin/env bash
# Makes sure redis-server is on PATH: the test suite starts its own Redis
# processes (single node and cluster) on free loopback ports.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
echo "redis-server not found; installing it." >&2
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  # The package may start a system instance; the tests never use it.
  exit 0
fi
if command -v brew >/dev/null 2>&1; then
  brew install redis
  exit 0
fi
echo "Cannot install redis-server here (need root with apt-get, or Homebrew)." >&2
echo "Install Redis 7 yourself, or point REDIS_SERVER_BIN at a redis-server binary." >&2
exit 1
