# redis-server from Debian's package, for the tests' container path (test/support/redis-container.ts)
# where the official redis image cannot be pulled. The tests start it with their own arguments.
ARG DEBIAN_IMAGE
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \
 && redis-server --version
CMD ["redis-server", "--protected-mode", "no"]
