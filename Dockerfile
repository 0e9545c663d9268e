# The quota service image: `docker build -t quota-service:0.1.0 .` from the repository root.
# `make test` builds it (scripts/build-test-images.sh, on a Node 22 base made with debootstrap
# where Docker Hub is out of reach) and runs it as the Helm chart does (test/image/).
# Plain Dockerfile syntax, so the classic builder and BuildKit both build it (docs/deploy.md).
#
# Three stages: build (all dependencies, then `npm run build`, the same build as
# `make build`), prod-deps (the service's production dependencies and the two workspace
# packages it uses, nothing the client packages or examples need) and the runtime image.
ARG NODE_IMAGE=node:22-alpine
# The build stages' image: NODE_IMAGE unless a machine needs more to build than to run, such
# as its proxy's CA certificate to reach the npm registry, which the runtime image must not carry.
ARG BUILD_IMAGE=${NODE_IMAGE}

FROM ${BUILD_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
COPY clients/contract/package.json clients/contract/
COPY clients/core/package.json clients/core/
COPY clients/quota-client/package.json clients/quota-client/
COPY clients/quotactl/package.json clients/quotactl/
COPY clients/http/package.json clients/http/
COPY clients/mcp/package.json clients/mcp/
COPY clients/order-api/package.json clients/order-api/
COPY clients/mcp-server/package.json clients/mcp-server/
COPY clients/mcp-server-v1/package.json clients/mcp-server-v1/
RUN npm ci --no-audit --no-fund
COPY buf.yaml buf.gen.yaml tsconfig.json tsconfig.build.json ./
COPY proto ./proto
COPY scripts ./scripts
COPY src ./src
COPY clients ./clients
RUN npm run build

FROM ${BUILD_IMAGE} AS prod-deps
WORKDIR /src
COPY package.json package-lock.json ./
COPY clients/contract/package.json clients/contract/
COPY clients/core/package.json clients/core/
# Only the service and the workspace packages it depends on.
RUN npm ci --omit=dev --no-audit --no-fund \
      --workspace @quota-service/contract --workspace @quota-service/core --include-workspace-root
COPY --from=build /src/clients/contract/dist clients/contract/dist
COPY --from=build /src/clients/core/dist clients/core/dist

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=prod-deps /src/node_modules ./node_modules
COPY --from=prod-deps /src/clients ./clients
COPY --from=build /src/dist/src ./dist/src
COPY package.json ./
# The service's default QUOTA_POLICIES is the relative path config/policies.yaml, so the
# image runs as is; the Helm chart mounts its ConfigMap elsewhere and points QUOTA_POLICIES at it.
COPY config/policies.yaml ./config/policies.yaml
# The image's "node" user, by number so that Kubernetes runAsNonRoot can verify it.
# Nothing is written at run time (logs go to stdout), so a read-only root filesystem works.
USER 1000:1000
EXPOSE 50051 9464
# Node as PID 1 is fine here: src/main.ts handles SIGTERM and SIGINT itself (drain, then exit).
# A young generation of 32 MiB per semi-space: a decision's short-lived objects die there
# instead of being promoted, so no old-generation collection of 10-20 ms lands on the tail
# latency (docs/operations.md, "Memory and latency").
CMD ["node", "--max-semi-space-size=32", "dist/src/main.js"]
