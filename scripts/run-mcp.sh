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
work=$(mktemp -d)
stop() {
  # Only the processes this script started, by their ids.
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap stop EXIT INT TERM

# A port something already listens on (on its IPv4 or IPv6 loopback, as "localhost" may
# be either) ends the run at once: otherwise that other process would answer our clients.
port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null || (exec 3<>"/dev/tcp/::1/$1") 2>/dev/null
}
refuse_taken_port() {
  if port_in_use "$1"; then
    echo "run-mcp: port $1 ($2) is already in use by another process: stop it, or set $3 to a free port" >&2
    exit 1
  fi
}

PORT="${MCP_HTTP_PORT:-3333}"
refuse_taken_port "$PORT" "the MCP server" MCP_HTTP_PORT

if [[ -z "${MCP_AUTHORIZATION_SERVER:-}" ]]; then
  ISSUER_PORT="${MCP_DEV_ISSUER_PORT:-3334}"
  refuse_taken_port "$ISSUER_PORT" "the development issuer" MCP_DEV_ISSUER_PORT
  export MCP_AUTHORIZATION_SERVER="http://localhost:$ISSUER_PORT"
  issuer_log="$work/issuer.log"
  # The issuer's "ready" line is at info: keep that level for it unless a finer one is asked.
  issuer_level="${MCP_LOG_LEVEL:-info}"
  case "$issuer_level" in trace | debug | info) ;; *) issuer_level=info ;; esac
  MCP_LOG_LEVEL="$issuer_level" MCP_DEV_ISSUER_PORT="$ISSUER_PORT" "${TS_NODE[@]}" clients/mcp-server/dev-issuer/main.ts 2> >(tee "$issuer_log" >&2) &
  issuer=$!
  pids+=("$issuer")
  # Ready when the issuer this script started says so (its "ready" line carries its pid),
  # not when something on the port answers; its exit ends the wait at once.
  until grep -q "\"pid\":$issuer,.*\"msg\":\"ready\"" "$issuer_log" 2>/dev/null; do
    if ! kill -0 "$issuer" 2>/dev/null; then
      wait "$issuer" && code=0 || code=$?
      echo "run-mcp: the development issuer exited ($code) before it was ready" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "run-mcp: development issuer on $MCP_AUTHORIZATION_SERVER (never deploy it). A token for alice:" >&2
  echo "  curl -s -u alice-cli:dev-alice-secret -d grant_type=client_credentials -d resource=${MCP_RESOURCE_URL:-http://localhost:$PORT/mcp} $MCP_AUTHORIZATION_SERVER/token" >&2
fi
MCP_TRANSPORT="${MCP_TRANSPORT:-http}" "${TS_NODE[@]}" clients/mcp-server/main.ts &
pids+=($!)
# Either one exiting ends the run.
wait -n
