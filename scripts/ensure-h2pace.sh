#!/usr/bin/env bash
# What the open-loop pacer of the rate limit service bench (bench/tools/h2pace.c) is built
# with: a C compiler and nghttp2's headers (libnghttp2-dev), installed with apt-get when they
# are missing and this runs as root. The bench and its test build the pacer themselves
# (bench/h2pace.ts). Optional: without them the bench uses h2load's rate mode.
set -euo pipefail
if echo '#include <nghttp2/nghttp2.h>' | cc -E -x c - >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "nghttp2 headers not found; installing them (libnghttp2-dev)." >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libnghttp2-dev >/dev/null
  exit 0
fi
echo "nghttp2 headers not found (libnghttp2-dev): the rate limit service bench paces its calls with h2load instead." >&2
