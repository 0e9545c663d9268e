#!/usr/bin/env bash
# `make run-demo`: the quota service on the embedded store plus the reference
# order API (clients/order-api), both in the foreground; Ctrl-C stops both.
# The order API's own variables (clients/README.md); any other ORDER_API_* passes through:
#   ORDER_API_QUOTA_ADDR  quota service address, the service listens there  (default 127.0.0.1:50051)
#   ORDER_API_ADDR        order API listen address                          (default 127.0.0.1:8080)
set -euo pipefail
QUOTA_ADDR="${ORDER_API_QUOTA_ADDR:-127.0.0.1:50051}"
HTTP_ADDR="${ORDER_API_ADDR:-127.0.0.1:8080}"

pids=()
stop() {
  # Only the two processes this script started, by their ids.
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop EXIT INT TERM

# `node --conditions=@quota-service/source --import tsx`: one process per server, so $! is the server itself and stop() reaches it.
env -u QUOTA_REDIS_URL -u QUOTA_REDIS_CLUSTER QUOTA_GRPC_ADDR="$QUOTA_ADDR" node --conditions=@quota-service/source --import tsx src/main.ts &
pids+=($!)
ORDER_API_ADDR="$HTTP_ADDR" ORDER_API_QUOTA_ADDR="$QUOTA_ADDR" node --conditions=@quota-service/source --import tsx clients/order-api/main.ts &
pids+=($!)
echo "run-demo: quota service on $QUOTA_ADDR (embedded store), order API on http://$HTTP_ADDR (Ctrl-C stops both)" >&2
# Either one exiting ends the demo.
wait -n
