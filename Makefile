# The two commands a newcomer needs: `make run` and `make test`.
# Both install what is missing first, so they work on a fresh machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help

NPM_INSTALL_STAMP := node_modules/.install-stamp

.PHONY: help deps redis gen build run run-demo run-mcp-quota run-mcp mcp-conformance test typecheck bench bench-cluster helm-check clean

help:
	@echo "make run    build and start the quota service (embedded store unless QUOTA_REDIS_URL or QUOTA_REDIS_CLUSTER is set)"
	@echo "make run-demo  the quota service (embedded store) and the reference order API on http://127.0.0.1:8080"
	@echo "make test   install what is missing (node packages, redis-server), then run the whole suite"
	@echo "make bench  run the benchmarks in bench/ (not part of make test)"
	@echo "make bench-cluster  the service on a 3-master Redis Cluster vs one node, same run"
	@echo "make run-mcp-quota  the quota service with the MCP demo policies (config/mcp-policies.yaml)"
	@echo "make run-mcp        the reference MCP server on Streamable HTTP :3333 (clients/mcp/README.md)"
	@echo "make helm-check  static checks of helm/quota-service; also helm lint + helm template per ci/ values file when helm is on PATH"

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

# The reference order API in front of the quota service; see clients/README.md.
run-demo: gen
	scripts/run-demo.sh

typecheck: gen
	npx tsc -p tsconfig.json --noEmit

# The reference MCP server (clients/mcp-server) and the quota service it needs:
# run each in its own terminal. MCP_* variables are listed in clients/mcp/README.md.
run-mcp-quota: build
	QUOTA_POLICIES=config/mcp-policies.yaml node dist/src/main.js

run-mcp: gen
	MCP_TRANSPORT=$${MCP_TRANSPORT:-http} node --import tsx clients/mcp-server/main.ts

# The MCP conformance suite against the reference server (installs it into .tmp/ once).
mcp-conformance: gen
	scripts/mcp-conformance.sh

test: deps redis typecheck
	npx vitest run

bench: deps redis gen
	npx tsx bench/run.ts
	npx tsx bench/algorithms.ts
	npx tsx bench/many-keys.ts
	npx tsx bench/batch-run.ts
	npx tsx bench/flexible-run.ts
	npx tsx bench/order-api-run.ts

bench-cluster: deps redis gen
	npx tsx bench/cluster.ts

# The chart (docs/deploy.md). test/helm checks it without helm (files, schema, values paths,
# env names, ports, dashboard); where helm is installed, lint and render it with the default
# values and each ci/ example too. Without helm this still passes on the static checks alone.
# HELM_KUBE_VERSION satisfies the chart's kubeVersion whatever helm's built-in default
# (--kube-version on lint needs helm >= 3.14).
HELM_CHART := helm/quota-service
HELM_KUBE_VERSION ?= 1.30.0
helm-check: gen
	npx vitest run test/helm
	@if command -v helm >/dev/null 2>&1; then \
	  set -e; \
	  helm lint --strict --kube-version $(HELM_KUBE_VERSION) $(HELM_CHART); \
	  helm template quota $(HELM_CHART) --kube-version $(HELM_KUBE_VERSION) >/dev/null; \
	  for values in $(HELM_CHART)/ci/*.yaml; do \
	    echo "helm lint + template with $$values"; \
	    helm lint --strict --kube-version $(HELM_KUBE_VERSION) $(HELM_CHART) -f "$$values"; \
	    helm template quota $(HELM_CHART) --kube-version $(HELM_KUBE_VERSION) -f "$$values" >/dev/null; \
	  done; \
	else \
	  echo "helm is not on PATH: only the static checks above ran (install helm to also run helm lint and helm template)"; \
	fi

clean:
	rm -rf dist src/gen node_modules
