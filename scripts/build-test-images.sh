#!/usr/bin/env bash
# The images the tests run, built on the engine DOCKER_HOST names (scripts/docker-engine.sh):
#   quota-debian:<hash>     Debian bookworm minbase from debootstrap (scripts/images/debian-rootfs.sh)
#   quota-node-base:<hash>  + Node 22 (npm package node@22) and npm (scripts/images/node-base.Dockerfile)
#   quota-redis:<hash>      + Debian's redis-server (scripts/images/redis.Dockerfile)
#   quota-service:test      the repository's Dockerfile with NODE_IMAGE=quota-node-base:<hash>
# Each <hash> is a hash of its recipe, so an image is made again only when its recipe changed.
# The debootstrap tarball, the slowest part, is also kept outside the clone, in
# $QUOTA_IMAGE_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/quota-service), so a fresh clone
# on the same machine skips it. Prints the tags as QUOTA_TEST_IMAGE=... and
# QUOTA_TEST_REDIS_IMAGE=... lines on stdout; progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DOCKER_HOST:?DOCKER_HOST must name the engine (scripts/docker-engine.sh start)}"
export DOCKER_HOST
# The engine may be older than the CLI and no image registry is reachable: the classic
# builder needs neither buildx nor a frontend image from Docker Hub.
export DOCKER_BUILDKIT=0
NPM_VERSION=10.9.9
MIRROR=${QUOTA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${QUOTA_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quota-service}
work=.tmp/images
mkdir -p "$cache" "$work"

log() { echo "[images ${SECONDS}s] $*" >&2; }
hash_of() { cat "$@" | sha256sum | cut -c1-12; }
has_image() { docker image inspect "$1" >/dev/null 2>&1; }
# Quiet unless it fails (then the whole output, the classic builder's notice included).
build() {
  local out
  out=$(docker build --quiet "$@" 2>&1) || {
    echo "$out" >&2
    return 1
  }
}

# 1. Debian's root file system.
printf '%s\n' "$MIRROR" >"$work/debian.recipe"
debian=quota-debian:$(hash_of scripts/images/debian-rootfs.sh "$work/debian.recipe")
if ! has_image "$debian"; then
  tarball=$cache/${debian/:/-}.tar
  if [ ! -f "$tarball" ]; then
    if ! command -v debootstrap >/dev/null 2>&1; then
      scripts/ensure-tool.sh debootstrap debootstrap debootstrap required 'The test images are built from a debootstrap root file system.'
    fi
    log "debootstrap bookworm (minbase) into $tarball (once per recipe)"
    scripts/images/debian-rootfs.sh "$tarball" "$MIRROR"
  fi
  log "importing $debian"
  docker import "$tarball" "$debian" >/dev/null
fi

# 2. Node 22 and npm on it.
node_bin=$(node scripts/ensure-node22.mjs)
node_version=$("$node_bin" --version)
printf '%s\n%s\n%s\n' "$debian" "$node_version" "$NPM_VERSION" >"$work/node-base.recipe"
node_base=quota-node-base:$(hash_of scripts/images/node-base.Dockerfile "$work/node-base.recipe")
if ! has_image "$node_base"; then
  log "building $node_base (Node $node_version, npm $NPM_VERSION)"
  context=$work/node-base
  rm -rf "$context" && mkdir -p "$context"
  cp "$node_bin" "$context/node"
  (cd "$context" && npm pack --silent "npm@$NPM_VERSION" >/dev/null && tar -xzf "npm-$NPM_VERSION.tgz" && mv package npm && rm "npm-$NPM_VERSION.tgz")
  build -f scripts/images/node-base.Dockerfile --build-arg "DEBIAN_IMAGE=$debian" -t "$node_base" "$context"
  rm -rf "$context"
fi

# 3. redis-server from Debian (needs the Debian mirror: host network for the build).
redis=quota-redis:$(hash_of scripts/images/redis.Dockerfile <(echo "$debian"))
if ! has_image "$redis"; then
  log "building $redis"
  build --network host -f scripts/images/redis.Dockerfile --build-arg "DEBIAN_IMAGE=$debian" -t "$redis" scripts/images
fi

# 4. The image the build stages use: the node base, plus this machine's CA bundle when npm
# here trusts one of its own (an HTTPS proxy in front of the registry).
build_image=$node_base
cafile=${NODE_EXTRA_CA_CERTS:-}
[ -n "$cafile" ] || cafile=$(npm config get cafile 2>/dev/null || true)
if [ -n "$cafile" ] && [ "$cafile" != null ] && [ -f "$cafile" ]; then
  context=$work/node-build
  rm -rf "$context" && mkdir -p "$context"
  cp "$cafile" "$context/ca.crt"
  build_image=quota-node-build:$(hash_of scripts/images/node-build.Dockerfile "$context/ca.crt" <(echo "$node_base"))
  if ! has_image "$build_image"; then
    log "building $build_image (the node base and the CA bundle $cafile, for the build stages only)"
    build -f scripts/images/node-build.Dockerfile --build-arg "NODE_BASE=$node_base" -t "$build_image" "$context"
  fi
  rm -rf "$context"
fi

# 5. The service's image from the repository's Dockerfile (npm ci needs the npm registry).
# The classic builder's layer cache makes an unchanged build quick.
log "building quota-service:test from Dockerfile on $node_base"
build --network host --build-arg "NODE_IMAGE=$node_base" --build-arg "BUILD_IMAGE=$build_image" -t quota-service:test .

# Bases of older recipes are not used again: untag them so the kept data root does not grow.
for repository in quota-debian quota-node-base quota-node-build quota-redis; do
  for image in $(docker images --format '{{.Repository}}:{{.Tag}}' "$repository"); do
    case " $debian $node_base $build_image $redis " in
      *" $image "*) ;;
      *) docker image rm "$image" >/dev/null 2>&1 || true ;;
    esac
  done
done
log "done"
echo "QUOTA_TEST_IMAGE=quota-service:test"
echo "QUOTA_TEST_REDIS_IMAGE=$redis"
