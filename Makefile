# The two commands a newcomer needs: `make run` and `make test`.
# Both install what is missing first, so they work on a fresh machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help

NPM_INSTALL_STAMP := node_modules/.install-stamp

.PHONY: help deps redis gen build run test typecheck bench bench-cluster clean

help:
	@echo "make run    build and start the quota service (embedded store unless QUOTA_REDIS_URL or QUOTA_REDIS_CLUSTER is set)"
	@echo "make test   install what is missing (node packages, redis-server), then run the whole suite"
	@echo "make bench  run the benchmarks in bench/ (not part of make test)"
	@echo "make bench-cluster  the service on a 3-master Redis Cluster vs one node, same run"

# npm ci when the lock file changed since the last install.
$(NPM_INSTALL_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

deps: $(NPM_INSTALL_STAMP)

# The tests start their own redis-server processes; install the binary if it is missing.
redis:
	@scripts/ensure-redis.sh

gen: deps
	npm run --silent gen

build: gen
	npx tsc -p tsconfig.build.json
	node scripts/copy-assets.mjs

run: build
	node dist/src/main.js

typecheck: gen
	npx tsc -p tsconfig.json --noEmit

test: deps redis typecheck
	npx vitest run

bench: deps redis gen
	npx tsx bench/run.ts

bench-cluster: deps redis gen
	npx tsx bench/cluster.ts

clean:
	rm -rf dist src/gen node_modules
