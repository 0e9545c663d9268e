#!/usr/bin/env bash
# Makes sure a command is on PATH, installing its package with apt-get (as root)
# or Homebrew when it is missing.
#   scripts/ensure-tool.sh COMMAND APT_PACKAGE BREW_FORMULA [optional] [HINT]
# Without a way to install it: exit 1 with HINT, or, marked optional, exit 0.
set -euo pipefail
command_name=$1 apt_package=$2 brew_formula=$3 need=${4:-required} hint=${5:-}
if command -v "$command_name" >/dev/null 2>&1; then
  exit 0
fi
echo "$command_name not found; installing it ($apt_package)." >&2
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$apt_package" >/dev/null
  exit 0
fi
if command -v brew >/dev/null 2>&1; then
  brew install "$brew_formula"
  exit 0
fi
echo "Cannot install $command_name here (need root with apt-get, or Homebrew).${hint:+ $hint}" >&2
[ "$need" = optional ] && exit 0
exit 1
