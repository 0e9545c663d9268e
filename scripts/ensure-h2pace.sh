#!/usr/bin/env bash
# Builds bench/tools/h2pace.c into .tmp/h2pace, the open-loop pacer of the rate limit
# service bench, installing nghttp2's headers (libnghttp2-dev) with apt-get when they are
# missing and this runs as root. Optional: without them the bench uses h2load's rate mode.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! echo '#include <nghttp2/nghttp2.h>' | cc -E -x c - >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "nghttp2 headers not found; installing them (libnghttp2-dev)." >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libnghttp2-dev >/dev/null
  else
    echo "nghttp2 headers not found (libnghttp2-dev): the rate limit service bench paces its calls with h2load instead." >&2
    exit 0
  fi
fi
mkdir -p .tmp
cc -O2 -o .tmp/h2pace bench/tools/h2pace.c -lnghttp2
