import { createQuotaClient } from '@quota-service/client';
import type { Call } from '../load.js';

/** Distinct users (bench/soak/policies.yaml): one bucket key each. */
export const USERS = 10_000;
/** Their tenants: one window key each per minute. */
export const TENANTS = 100;
/** One call in this many repeats the previous call's request_id, as a client retry does. */
const RETRY_EVERY = 50;

export interface SoakCaller {
  readonly call: Call;
  close(): Promise<void>;
}

/**
 * Allow for the soak policy through the shipped quota client (its default
 * batching on one AllowStream), each call with a request_id: a remembered
 * decision per call, the key the soak watches expire. A decision the service did
 * not make (deadline, failure mode) is an error: the soak counts none as a grant.
 */
export function soakCaller(port: number): SoakCaller {
  // A long deadline: the soak measures resources over time, not latency on a shared machine.
  const client = createQuotaClient({ address: `127.0.0.1:${port}`, deadlineMs: 5_000, onUnavailable: 'fail_closed' });
  const identities = Array.from({ length: USERS }, (_, i) => ({ user: `soak-user-${i}`, tenant: `soak-tenant-${i % TENANTS}` }));
  const run = `${process.pid}-${Date.now().toString(36)}`;
  let sent = 0;
  return {
    async call(signal) {
      const n = sent++;
      const retry = n % RETRY_EVERY === RETRY_EVERY - 1;
      const id = retry ? n - 1 : n;
      const decision = await client.allow(
        { policy: 'soak', identity: identities[id % USERS] as Record<string, string>, requestId: `${run}-${id}` },
        { signal },
      );
      if (decision.source !== 'store') throw new Error(`decision from ${decision.source}, not the service`);
      return decision.allowed;
    },
    close: () => client.close(),
  };
}
