# A Node 22 base image made without an image registry: Debian's minimal root file system
# (debootstrap, scripts/images/debian-rootfs.sh) plus the Node 22 binary of the npm package
# node@22 and npm itself. Where Docker Hub is reachable, the official node:22-slim is the
# same thing (Debian bookworm, Node 22, npm, a "node" user with uid 1000).
ARG DEBIAN_IMAGE
FROM ${DEBIAN_IMAGE}
COPY node /usr/local/bin/node
# npm's own package, unpacked (it bundles its dependencies).
COPY npm /usr/local/lib/node_modules/npm
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && groupadd --gid 1000 node \
 && useradd --uid 1000 --gid node --shell /bin/bash --create-home node \
 && node --version && npm --version
CMD ["node"]
