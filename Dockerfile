# syntax=docker/dockerfile:1
# The quota service image: `docker build -t quota-service:0.1.0 .` from the repository root.
# No Docker engine runs in this project's CI, so this file is not built there; keep it
# plain and conventional (docs/deploy.md says how to build and check it by hand).
#
# Three stages: build (all dependencies, generate the gRPC code, compile, copy the .lua
# files beside their modules), prod-deps (production dependencies only) and the runtime
# image, which holds node_modules without dev dependencies, dist/src, package.json
# (its "type": "module" makes Node load dist/ as ES modules) and the default policy file.
ARG NODE_IMAGE=node:22-alpine

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY buf.yaml buf.gen.yaml tsconfig.json tsconfig.build.json ./
COPY proto ./proto
COPY scripts ./scripts
COPY src ./src
# The same steps as `make build`: npm run gen, tsc, scripts/copy-assets.mjs (the Lua scripts
# are read at run time from beside their compiled modules).
RUN npm run gen \
 && npx tsc -p tsconfig.build.json \
 && node scripts/copy-assets.mjs

FROM ${NODE_IMAGE} AS prod-deps
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=prod-deps /src/node_modules ./node_modules
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
CMD ["node", "dist/src/main.js"]
