#!/usr/bin/env bash
# Runs the MCP conformance suite (npm @modelcontextprotocol/conformance, which needs
# Node 22: the npm `node@22` package provides it) against the reference MCP server over
# Streamable HTTP: the server scenarios the 2026-07-28 revision requires, with the
# failures expected of a server of its shape in scripts/mcp-conformance-baseline.yml.
# The results, and what the suite does not cover, are in clients/mcp/README.md.
# Not part of `make test`: it installs two packages into .tmp/ on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

# The first release line that knows the 2026-07-28 revision (its scenarios and its
# wire: per-request envelope, Mcp-Method/Mcp-Name headers).
VERSION=0.2.0-alpha.12
TOOLS=.tmp/mcp-conformance-$VERSION
if [[ ! -x $TOOLS/node_modules/.bin/conformance ]]; then
  mkdir -p "$TOOLS"
  npm install --prefix "$TOOLS" --no-save --no-audit --no-fund node@22.23.3 "@modelcontextprotocol/conformance@$VERSION" >/dev/null
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

# Each scenario's checks (checks.json) stay here for reading after the run.
RESULTS=.tmp/mcp-conformance-results
rm -rf "$RESULTS"
# Exactly the server scenarios the 2026-07-28 revision requires, at its wire. The
# baseline lists what fails and why (most need the suite's own fixture tools); a
# failure not in it, or a baseline entry that now passes, fails the run.
"$NODE22" "$CONFORMANCE" server --url "http://localhost:$PROXY_PORT/mcp" --requirements 2026-07-28 \
  --expected-failures scripts/mcp-conformance-baseline.yml -o "$RESULTS"
