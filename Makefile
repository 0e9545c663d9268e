# The two commands a newcomer needs: `make run` and `make test`.
# Both install what is missing first, so they work on a fresh machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help

NPM_INSTALL_STAMP := node_modules/.install-stamp
# TypeScript run without a build: the workspace packages resolve to their sources.
TS_NODE := node --conditions=@quota-service/source --import tsx

.PHONY: FORCE help deps redis h2load h2pace valgrind gen build lint run run-demo run-mcp-quota run-mcp mcp-conformance test typecheck bench bench-quick bench-report bench-cluster soak soak-faults helm-check helm-bin node22 clean

help:
	@echo "make run    build and start the quota service (embedded store unless QUOTA_REDIS_URL or QUOTA_REDIS_CLUSTER is set)"
	@echo "make run-demo  the quota service (embedded store) and the reference order API on http://127.0.0.1:8080"
	@echo "make test   install what is missing (node packages, redis-server, helm, Node 22, docker.io, debootstrap), then lint, typecheck and run the whole suite"
	@echo "make build  the packages in clients/ and the service (the same as npm run build)"
	@echo "make bench  run the benchmarks in bench/ (not part of make test, about 25 min); writes docs/benchmarks.md and docs/img/"
	@echo "make bench-quick  only the plotted comparisons, shorter (about 3 min); the other sections keep their figures"
	@echo "make bench-report  write docs/benchmarks.md and docs/img/ again from the last results, without measuring"
	@echo "make bench-cluster  the service on a 3-master Redis Cluster vs one node, same run"
	@echo "make soak   SOAK_MINUTES (default 10) at half the measured maximum on one Redis, then idle; RSS, fds, keys, errors judged (not part of make test)"
	@echo "make soak-faults  network faults (partitions, latency, loss, stalls) per failure mode: the table of docs/operations.md (needs root; not part of make test)"
	@echo "make run-mcp-quota  the quota service with the MCP demo policies (config/mcp-policies.yaml)"
	@echo "make run-mcp        the reference MCP server on Streamable HTTP :3333 and its development authorization server :3334 (clients/mcp/README.md)"
	@echo "make helm-check  the chart tests: static checks, then helm lint --strict and helm template per values file (fetches helm if missing)"

# npm ci when the lock file changed since the last install.
$(NPM_INSTALL_STAMP): package.json package-lock.json $(wildcard clients/*/package.json)
	npm ci --no-audit --no-fund
	@touch $@

deps: $(NPM_INSTALL_STAMP)

# The tests start their own redis-server processes; install the binary if it is missing.
redis:
	@scripts/ensure-tool.sh redis-server redis-server redis required 'Install Redis 7 yourself, or point REDIS_SERVER_BIN at a redis-server binary.'

# Generated code, each part remade only when its sources are newer than its stamp (a missing
# output is always made): the contract from proto/, Envoy's descriptors from the installed
# @grpc/grpc-js-xds, the embedded Lua from the .lua files. The generators leave a file whose
# text did not change untouched, so tsc -b has nothing to redo after them either.
PROTO_SOURCES := $(shell find proto -name '*.proto') buf.yaml buf.gen.yaml
LUA_SOURCES := $(shell find src/store/redis/script -name '*.lua')
GEN_SCRIPTS := scripts/write-if-changed.mjs
# Remade when a file it writes is gone (`make clean`, or removed by hand).
missing = $(if $(strip $(foreach file,$(1),$(if $(wildcard $(file)),,x))),FORCE)

src/gen/.stamp-proto: $(PROTO_SOURCES) scripts/gen-proto.mjs $(GEN_SCRIPTS) $(NPM_INSTALL_STAMP) $(call missing,clients/contract/src/gen/quota/v1/quota.ts src/gen/descriptor-set.ts)
	node scripts/gen-proto.mjs
	@touch $@

src/gen/.stamp-envoy: scripts/gen-envoy-proto.mjs $(GEN_SCRIPTS) $(NPM_INSTALL_STAMP) $(call missing,src/gen/envoy-codec-schema.ts src/gen/envoy-descriptor-set.ts)
	node scripts/gen-envoy-proto.mjs
	@touch $@

src/gen/.stamp-lua: $(LUA_SOURCES) scripts/gen-lua.mjs $(GEN_SCRIPTS) $(call missing,src/gen/lua-scripts.ts)
	node scripts/gen-lua.mjs
	@touch $@

FORCE:

gen: deps src/gen/.stamp-proto src/gen/.stamp-envoy src/gen/.stamp-lua

# The same build as `npm run build`: generated code (when its sources changed), the packages
# in clients/, then the service. tsc builds incrementally (dist/.tsbuildinfo of each), so an
# unchanged package or service is checked, not emitted again.
build: gen
	npm run --silent build:compile

run: build
	npm start

# The reference order API in front of the quota service; see clients/README.md.
run-demo: gen
	scripts/run-demo.sh

typecheck: gen
	npx tsc -p tsconfig.json --noEmit

# The reference MCP server (clients/mcp-server) and the quota service it needs:
# run each in its own terminal. run-mcp also starts the development authorization
# server the MCP server trusts. MCP_* variables are listed in clients/mcp/README.md.
run-mcp-quota: build
	QUOTA_POLICIES=config/mcp-policies.yaml npm start

run-mcp: gen
	scripts/run-mcp.sh

# The MCP conformance suite against the reference server (installs it into .tmp/ once).
mcp-conformance: gen
	scripts/mcp-conformance.sh

# The chart tests (test/helm/rendered.test.ts) run a real helm; install it if missing.
helm-bin: deps
	@node scripts/ensure-helm.mjs

# Lint and format check (biome.json): floating promises, import cycles, package boundaries.
lint: deps
	npx biome check .

# The packaging test (test/packaging) runs the packed clients on this Node and on Node 22;
# install Node 22 into .tmp/node22 if missing (from the npm package node@22).
node22:
	@node scripts/ensure-node22.mjs

# The suite with its own Docker engine (started and stopped by scripts/test-with-docker.sh):
# the service's image built from the Dockerfile and run as the chart runs it (test/image), and
# the Redis-backed store tests a second time with Redis in containers (testcontainers).
test: deps redis helm-bin node22 h2pace lint typecheck
	scripts/test-with-docker.sh

# The rate limit service bench sends its open-loop load with h2load (nghttp2); install it if missing.
h2load:
	@scripts/ensure-tool.sh h2load nghttp2-client nghttp2 optional 'The rate limit service bench uses its Node client instead.'

# The same bench paces its open loop with bench/tools/h2pace.c (each call at its own time,
# where h2load's rate mode sends them in bursts), which it builds against nghttp2's library.
h2pace:
	@scripts/ensure-h2pace.sh

# Redis's instructions per decision (bench/script-instructions.ts) are counted under valgrind.
valgrind:
	@scripts/ensure-tool.sh valgrind valgrind valgrind optional 'The bench of Redis instructions per decision is left out.'

# Each bench in its own process, then docs/benchmarks.md and docs/img/*.svg from
# docs/benchmarks.json (bench/suite/, bench/doc/). BENCH_NOTE="..." goes into
# the report's machine lines (what else ran on the machine).
bench: build redis h2load h2pace valgrind
	$(TS_NODE) bench/suite/main.ts

bench-quick: build redis
	$(TS_NODE) bench/suite/main.ts --quick

bench-report: deps
	$(TS_NODE) bench/doc/main.ts

bench-cluster: build redis
	$(TS_NODE) bench/cluster.ts

# The built service (dist/src/main.js) under steady load, then idle: exits 1 if a bar fails
# (docs/operations.md#soak); then the network-fault scenarios (soak-faults).
# SOAK_MINUTES, SOAK_RATE, SOAK_SAMPLE_SECONDS: bench/soak/options.ts.
soak: build redis
	$(TS_NODE) bench/soak/run.ts
	$(MAKE) --no-print-directory soak-faults

# Network faults against a real service process (docs/operations.md, "Network faults"):
# Redis partitioned in a network namespace, a slow, lossy or stalled link through a fault
# proxy, the client cut off from the service; each with every failure mode. Needs root.
soak-faults: gen redis
	$(TS_NODE) bench/faults/run.ts

# The chart (docs/deploy.md): test/helm checks its files, schema, values paths, env names,
# ports and dashboard, and renders it with a real helm (helm on PATH, else the one
# scripts/ensure-helm.mjs fetches) for the default values and each ci/ example.
helm-check: gen helm-bin
	npx vitest run test/helm

clean:
	rm -rf dist src/gen node_modules clients/*/dist
