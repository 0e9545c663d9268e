#!/usr/bin/env bash
# Runs the MCP conformance suite (npm @modelcontextprotocol/conformance, which needs
# Node 22: the npm `node@22` package provides it) against the reference MCP server over
# Streamable HTTP, with the scenarios that apply to a server of its shape. The results
# and the scenarios left out (and why) are in clients/mcp/README.md.
# Not part of `make test`: it installs two packages into .tmp/ on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS=.tmp/mcp-conformance
if [[ ! -x $TOOLS/node_modules/.bin/conformance ]]; then
  mkdir -p "$TOOLS"
  npm install --prefix "$TOOLS" --no-save --no-audit --no-fund node@22.23.3 @modelcontextprotocol/conformance@0.1.16 >/dev/null
fi
NODE22=$TOOLS/node_modules/node/bin/node
CONFORMANCE=$TOOLS/node_modules/@modelcontextprotocol/conformance/dist/index.js

free_port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
QUOTA_PORT=$(free_port); MCP_PORT=$(free_port); PROXY_PORT=$(free_port); ISSUER_PORT=$(free_port)
OUT=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$OUT"; }
trap cleanup EXIT
TS_NODE=(node --conditions=@quota-service/source --import tsx)
wait_for() { for _ in $(seq 150); do curl -s -o /dev/null "$1" && return 0; sleep 0.2; done; echo "not up: $1" >&2; return 1; }

QUOTA_GRPC_ADDR=127.0.0.1:$QUOTA_PORT QUOTA_POLICIES=config/mcp-policies.yaml QUOTA_LOG_LEVEL=warn \
  "${TS_NODE[@]}" src/main.ts >"$OUT/quota.log" 2>&1 &
pids+=($!)
ISSUER=http://localhost:$ISSUER_PORT
MCP_DEV_ISSUER_PORT=$ISSUER_PORT MCP_LOG_LEVEL=warn "${TS_NODE[@]}" clients/mcp-server/dev-issuer/main.ts >"$OUT/issuer.log" 2>&1 &
pids+=($!)
wait_for "$ISSUER/.well-known/oauth-authorization-server"
RESOURCE=http://localhost:$MCP_PORT/mcp
MCP_TRANSPORT=http MCP_HTTP_PORT=$MCP_PORT MCP_AUTHORIZATION_SERVER=$ISSUER MCP_LOG_LEVEL=warn \
  MCP_QUOTA_ADDR=127.0.0.1:$QUOTA_PORT MCP_AUDIT_FILE="$OUT/audit.jsonl" \
  "${TS_NODE[@]}" clients/mcp-server/main.ts >"$OUT/mcp.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$MCP_PORT/.well-known/oauth-protected-resource/mcp"
# A development token for alice, with the server's resource URL as its audience.
TOKEN=$(curl -sf -u alice-cli:dev-alice-secret -d grant_type=client_credentials -d "resource=$RESOURCE" "$ISSUER/token" \
  | node -e 'let s="";process.stdin.on("data",(d)=>(s+=d)).on("end",()=>console.log(JSON.parse(s).access_token))')
node scripts/mcp-auth-proxy.mjs "$PROXY_PORT" "$MCP_PORT" "$TOKEN" &
pids+=($!)

# The scenarios that apply: the others need the suite's own fixtures (test_* tools,
# prompts and test:// resources) or capabilities this server does not declare.
SCENARIOS=(server-initialize ping tools-list server-sse-multiple-streams resources-list prompts-list dns-rebinding-protection)
failed=0
for scenario in "${SCENARIOS[@]}"; do
  if "$NODE22" "$CONFORMANCE" server --url "http://localhost:$PROXY_PORT/mcp" --scenario "$scenario" -o "$OUT/results" >"$OUT/$scenario.txt" 2>&1 \
     && ! grep -q '[1-9][0-9]* failed' "$OUT/$scenario.txt"; then
    echo "pass  $scenario"
  else
    echo "FAIL  $scenario"; cat "$OUT/$scenario.txt"; failed=1
  fi
done
exit $failed
