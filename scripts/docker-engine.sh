#!/usr/bin/env bash
# The tests' own Docker engine: a private dockerd whose socket and state live under
# .tmp/docker/. Its data root (images and the build cache) is kept outside the clone, in
# $QUOTA_IMAGE_CACHE/docker (default ~/.cache/quota-service/docker), so a fresh clone on the
# same machine builds the test images from cache; while another clone's engine holds that data
# root, this one uses .tmp/docker/data instead. QUOTA_DOCKER_DATA_ROOT names another.
#   scripts/docker-engine.sh start   install docker.io when missing, start dockerd unless its
#                                    socket already answers; prints DOCKER_HOST=unix://... and
#                                    QUOTA_TEST_DOCKER=required, for the tests' environment
#   scripts/docker-engine.sh stop    stop the dockerd `start` started (no-op when none)
#   scripts/docker-engine.sh host    print DOCKER_HOST=unix://... without starting anything
# Without root or without dockerd (macOS, a laptop with Docker Desktop), `start` uses the
# engine the docker CLI already reaches, if any, and never stops it; with no engine at all
# it prints nothing and exits 0 (the tests that need one say why they skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
state=$PWD/.tmp/docker
sock=$state/d.sock
# A unix socket path is limited to about 107 bytes: deep clones use a short one under /tmp.
if [ "${#sock}" -gt 100 ]; then
  sock=/tmp/quota-docker-$(printf '%s' "$PWD" | sha256sum | cut -c1-12).sock
fi
pidfile=$state/dockerd.pid
host=unix://$sock
cache=${QUOTA_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quota-service}

answers() { DOCKER_HOST=$1 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

case ${1:-} in
  host)
    echo "DOCKER_HOST=$host"
    ;;
  start)
    if [ -S "$sock" ] && answers "$host"; then
      printf 'DOCKER_HOST=%s\nQUOTA_TEST_DOCKER=required\n' "$host"
      exit 0
    fi
    if [ "$(id -u)" = 0 ]; then
      scripts/ensure-tool.sh dockerd docker.io docker optional 'The image tests and the container path of the test Redis need a Docker engine.'
    fi
    if [ "$(id -u)" != 0 ] || ! command -v dockerd >/dev/null 2>&1; then
      # Someone else's engine (Docker Desktop, a rootless dockerd): use it, never stop it.
      if command -v docker >/dev/null 2>&1 && docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
        echo "Using the Docker engine the docker CLI reaches (not a private one: dockerd needs root)." >&2
        echo "QUOTA_TEST_DOCKER=required"
      else
        echo "No Docker engine here: the image test and the container Redis are skipped." >&2
      fi
      exit 0
    fi
    mkdir -p "$state" "$cache"
    rm -f "$sock"
    # One dockerd per data root: the shared one is locked for as long as its dockerd runs.
    data=${QUOTA_DOCKER_DATA_ROOT:-$cache/docker}
    lock=$data.lock
    if [ -z "${QUOTA_DOCKER_DATA_ROOT:-}" ] && ! flock -n "$lock" true; then
      echo "$data is in use by another clone's engine; using $state/data (a cold build cache)." >&2
      data=$state/data lock=$state/data.lock
    fi
    # Its own exec root and containerd under .tmp/docker, so it shares no state with a system
    # dockerd; published ports default to 127.0.0.1 (--ip), and the tests ask for it anyway.
    setsid flock -n "$lock" dockerd --data-root "$data" --exec-root "$state/exec" --pidfile "$pidfile" \
      -H "$host" --ip 127.0.0.1 >"$state/dockerd.log" 2>&1 </dev/null &
    for _ in $(seq 1 150); do
      if answers "$host"; then
        printf 'DOCKER_HOST=%s\nQUOTA_TEST_DOCKER=required\n' "$host"
        exit 0
      fi
      sleep 0.2
    done
    echo "dockerd did not answer on $sock within 30 s; its log:" >&2
    tail -20 "$state/dockerd.log" >&2
    "$0" stop
    exit 1
    ;;
  stop)
    [ -f "$pidfile" ] || exit 0
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
      # The engine is the tests' alone: containers and networks a killed test left behind are
      # removed, so none wait in the kept data root for the next run.
      if answers "$host"; then
        containers=$(DOCKER_HOST=$host docker ps --all --quiet)
        [ -z "$containers" ] || DOCKER_HOST=$host docker rm --force --volumes $containers >/dev/null 2>&1 || true
        DOCKER_HOST=$host docker network prune --force >/dev/null 2>&1 || true
      fi
      kill -TERM "$pid"
      for _ in $(seq 1 150); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
      done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    fi
    # dockerd leaves its network namespace mounted under the exec root; a clone could not be removed.
    if mountpoint -q "$state/exec/netns/default" 2>/dev/null; then umount "$state/exec/netns/default" || true; fi
    rm -f "$pidfile" "$sock"
    ;;
  *)
    echo "usage: $0 start|stop|host" >&2
    exit 2
    ;;
esac
