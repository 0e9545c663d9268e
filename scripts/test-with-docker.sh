#!/usr/bin/env bash
# `make test`'s run of the suite: its own Docker engine first (scripts/docker-engine.sh), the
# test images built on it (scripts/build-test-images.sh), then the whole suite, then the
# Redis-backed store and replica tests once more with their Redis in containers
# (QUOTA_TEST_REDIS=container), so that path keeps working. The engine is stopped at the end,
# whether the tests pass, fail or are interrupted (Ctrl-C).
#   scripts/test-with-docker.sh [vitest arguments for the whole-suite run]
set -euo pipefail
cd "$(dirname "$0")/.."

# The tests that run a second time on the container path: the store equivalence tests (the
# embedded store, one Redis node and a Redis Cluster agree) and the replica tests (several
# service processes on one Redis node and on a Redis Cluster).
CONTAINER_PATH_TESTS=(
  test/store/cluster-equivalence.test.ts
  test/store/script-batch-equivalence.test.ts
  test/replicas.test.ts
  test/replicas-cluster.test.ts
)

trap 'scripts/docker-engine.sh stop' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
engine=$(scripts/docker-engine.sh start)
if [ -n "$engine" ]; then
  while IFS= read -r line; do export "${line?}"; done <<<"$engine"
  images=$(scripts/build-test-images.sh)
  while IFS= read -r line; do export "${line?}"; done <<<"$images"
  # testcontainers' reaper image cannot be pulled everywhere; the harness removes its own containers.
  export TESTCONTAINERS_RYUK_DISABLED=true
fi

npx vitest run "$@"
if [ -n "$engine" ]; then
  echo "The Redis-backed store and replica tests again, their Redis in containers (QUOTA_TEST_REDIS=container):"
  QUOTA_TEST_REDIS=container npx vitest run "${CONTAINER_PATH_TESTS[@]}"
fi
