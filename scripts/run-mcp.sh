#!/usr/bin/env bash
# `make run-mcp`: the reference MCP server (clients/mcp-server) on Streamable HTTP,
# and, unless MCP_AUTHORIZATION_SERVER names another one, the development
# authorization server it trusts (clients/mcp-server/dev-issuer, DEVELOPMENT ONLY).
# Ctrl-C stops both. The quota service runs apart: `make run-mcp-quota`.
#   MCP_DEV_ISSUER_PORT       the development issuer's port (default 3334)
#   MCP_AUTHORIZATION_SERVER  set: use that authorization server, start no dev issuer
# Every other MCP_* variable passes through (clients/mcp/README.md lists them).
set -euo pipefail
TS_NODE=(node --conditions=@quota-service/source --import tsx)

pids=()
stop() {
  # Only the processes this script started, by their ids.
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop EXIT INT TERM

if [[ -z "${MCP_AUTHORIZATION_SERVER:-}" ]]; then
  ISSUER_PORT="${MCP_DEV_ISSUER_PORT:-3334}"
  export MCP_AUTHORIZATION_SERVER="http://localhost:$ISSUER_PORT"
  MCP_DEV_ISSUER_PORT="$ISSUER_PORT" "${TS_NODE[@]}" clients/mcp-server/dev-issuer/main.ts &
  pids+=($!)
  for _ in $(seq 100); do
    curl -sf -o /dev/null "$MCP_AUTHORIZATION_SERVER/.well-known/oauth-authorization-server" && break
    sleep 0.2
  done
  PORT="${MCP_HTTP_PORT:-3333}"
  echo "run-mcp: development issuer on $MCP_AUTHORIZATION_SERVER (never deploy it). A token for alice:" >&2
  echo "  curl -s -u alice-cli:dev-alice-secret -d grant_type=client_credentials -d resource=${MCP_RESOURCE_URL:-http://localhost:$PORT/mcp} $MCP_AUTHORIZATION_SERVER/token" >&2
fi
MCP_TRANSPORT="${MCP_TRANSPORT:-http}" "${TS_NODE[@]}" clients/mcp-server/main.ts &
pids+=($!)
# Either one exiting ends the run.
wait -n
