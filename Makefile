# The two commands a newcomer needs: `make run` and `make test`.
# Both install what is missing first, so they work on a fresh machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help

NPM_INSTALL_STAMP := node_modules/.install-stamp
# TypeScript run without a build: the workspace packages resolve to their sources.
TS_NODE := node --conditions=@quota-service/source --import tsx

.PHONY: help deps redis gen build lint run run-demo run-mcp-quota run-mcp mcp-conformance test typecheck bench bench-cluster helm-check helm-bin node22 clean

help:
	@echo "make run    build and start the quota service (embedded store unless QUOTA_REDIS_URL or QUOTA_REDIS_CLUSTER is set)"
	@echo "make run-demo  the quota service (embedded store) and the reference order API on http://127.0.0.1:8080"
	@echo "make test   install what is missing (node packages, redis-server, helm, Node 22), then lint, typecheck and run the whole suite"
	@echo "make build  the packages in clients/ and the service (the same as npm run build)"
	@echo "make bench  run the benchmarks in bench/ (not part of make test)"
	@echo "make bench-cluster  the service on a 3-master Redis Cluster vs one node, same run"
	@echo "make run-mcp-quota  the quota service with the MCP demo policies (config/mcp-policies.yaml)"
	@echo "make run-mcp        the reference MCP server on Streamable HTTP :3333 (clients/mcp/README.md)"
	@echo "make helm-check  the chart tests: static checks, then helm lint --strict and helm template per values file (fetches helm if missing)"

# npm ci when the lock file changed since the last install.
$(NPM_INSTALL_STAMP): package.json package-lock.json $(wildcard clients/*/package.json)
	npm ci --no-audit --no-fund
	@touch $@

deps: $(NPM_INSTALL_STAMP)

# The tests start their own redis-server processes; install the binary if it is missing.
redis:
	@scripts/ensure-redis.sh

gen: deps
	npm run --silent gen

# The same build as `npm run build`: generated code, the packages in clients/, then the service.
build: deps
	npm run --silent build

run: build
	npm start

# The reference order API in front of the quota service; see clients/README.md.
run-demo: gen
	scripts/run-demo.sh

typecheck: gen
	npx tsc -p tsconfig.json --noEmit

# The reference MCP server (clients/mcp-server) and the quota service it needs:
# run each in its own terminal. MCP_* variables are listed in clients/mcp/README.md.
run-mcp-quota: build
	QUOTA_POLICIES=config/mcp-policies.yaml npm start

run-mcp: gen
	MCP_TRANSPORT=$${MCP_TRANSPORT:-http} $(TS_NODE) clients/mcp-server/main.ts

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

test: deps redis helm-bin node22 lint typecheck
	npx vitest run

bench: build redis
	$(TS_NODE) bench/run.ts
	$(TS_NODE) bench/rls-run.ts
	$(TS_NODE) bench/algorithms.ts
	$(TS_NODE) bench/many-keys.ts
	$(TS_NODE) bench/batch-run.ts
	$(TS_NODE) bench/flexible-run.ts
	$(TS_NODE) bench/resp-decode.ts
	$(TS_NODE) bench/hop-floor.ts
	$(TS_NODE) bench/order-api-run.ts

bench-cluster: build redis
	$(TS_NODE) bench/cluster.ts

# The chart (docs/deploy.md): test/helm checks its files, schema, values paths, env names,
# ports and dashboard, and renders it with a real helm (helm on PATH, else the one
# scripts/ensure-helm.mjs fetches) for the default values and each ci/ example.
helm-check: gen helm-bin
	npx vitest run test/helm

clean:
	rm -rf dist src/gen node_modules
