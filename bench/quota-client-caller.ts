import { createQuotaClient, type BatchOptions } from '@quota-service/client';
import type { AllowCaller } from './client.js';

const USERS = 10_000;

/**
 * Allow through the shipped quota client (clients/quota-client), one
 * connection, cycling over USERS identities like bench/client.ts. `batch`
 * false: one Allow RPC per call; otherwise concurrent calls coalesce into
 * batches, sent on one AllowStream (`stream` false: one AllowBatch RPC each). A decision the service did not make (deadline, fallback)
 * counts as an error, so a failure policy cannot pass for throughput. `policy`
 * is one of bench/servers/quota-server.ts's.
 */
export function quotaClientCaller(port: number, batch: BatchOptions | false, stream = true, policy = 'bench'): AllowCaller {
  const client = createQuotaClient({ address: `127.0.0.1:${port}`, deadlineMs: 10_000, batch, stream, onUnavailable: 'fail_closed' });
  const identities = Array.from({ length: USERS }, (_, i) => ({ user: `bench-user-${i}` }));
  let next = 0;
  return {
    async call(signal) {
      const identity = identities[next] as { user: string };
      next = (next + 1) % USERS;
      const decision = await client.allow({ policy, identity }, { signal });
      if (decision.source !== 'store') throw new Error(`decision from ${decision.source}, not the service`);
      return decision.allowed;
    },
    close: () => void client.close(),
  };
}
