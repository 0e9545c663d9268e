# The Dockerfile's build stages on a machine whose HTTPS traffic passes a proxy with its own
# CA (npm reads NODE_EXTRA_CA_CERTS or its cafile): the node base plus that CA bundle, used as
# BUILD_IMAGE only, so the runtime image never carries the machine's trust settings.
ARG NODE_BASE
FROM ${NODE_BASE}
COPY ca.crt /usr/local/share/quota-build-ca.crt
ENV NODE_EXTRA_CA_CERTS=/usr/local/share/quota-build-ca.crt \
    npm_config_cafile=/usr/local/share/quota-build-ca.crt
