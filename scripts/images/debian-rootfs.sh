#!/usr/bin/env bash
# Debian bookworm's minimal root file system as a tar on stdout-free path $1, made with
# debootstrap from Debian's mirror (no image registry needed), then trimmed: no
# documentation, manual pages, translations or package lists, and services never start
# during a later apt-get install (policy-rc.d), as in Debian's official images.
#   scripts/images/debian-rootfs.sh OUT.tar [MIRROR]
set -euo pipefail
out=$1
mirror=${2:-http://deb.debian.org/debian}
work=$(mktemp -d "${TMPDIR:-/tmp}/quota-rootfs.XXXXXX")
trap 'rm -rf "$work"' EXIT
debootstrap --variant=minbase bookworm "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -20 "$work/debootstrap.log" >&2
  exit 1
}
root=$work/root
rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* \
  "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb "$root"/var/log/*.log
cat >"$root/etc/dpkg/dpkg.cfg.d/docker-excludes" <<'CFG'
path-exclude /usr/share/doc/*
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
CFG
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"
tar --numeric-owner -C "$root" -cf "$out.partial" .
mv "$out.partial" "$out"
