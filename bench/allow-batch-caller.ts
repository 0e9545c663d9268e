import { createChannel, createClient, type Channel } from 'nice-grpc';
import { QuotaServiceDefinition, type AllowBatchRequest, type AllowRequest } from '@quota-service/contract';
import type { Call } from './load.js';

/** Distinct user ids the load cycles through, as bench/client.ts: many keys, no hot key. */
const USERS = 10_000;
/** Tenants of those users (a limit keyed by tenant): 100 users each. */
const TENANTS = 100;

export interface AllowBatchCaller {
  readonly call: Call;
  /** Decisions per call: the batch size. */
  readonly size: number;
  close(): void;
}

/**
 * One channel to a loopback port and a Call that sends one AllowBatch of
 * `size` requests for `policy`, cycling over USERS identities (user, and the
 * user's tenant). It resolves once the whole batch answered; a batch with any
 * item error counts as an error, so a failing store cannot pass for speed.
 */
export function allowBatchCaller(port: number, policy: string, size: number): AllowBatchCaller {
  const channel: Channel = createChannel(`127.0.0.1:${port}`);
  const client = createClient(QuotaServiceDefinition, channel);
  // Built once: the batches cover the users in order, then start over.
  const batches: AllowBatchRequest[] = [];
  for (let first = 0; first < USERS; first += size) {
    const requests: AllowRequest[] = [];
    for (let i = first; i < first + size; i++) {
      const user = i % USERS;
      requests.push({
        policy,
        identity: { user: `bench-user-${user}`, tenant: `bench-tenant-${user % TENANTS}` },
        cost: 1,
        requestId: '',
        deadlineMs: 0,
        sentAtUnixMs: 0,
      });
    }
    batches.push({ requests });
  }
  let next = 0;
  return {
    size,
    async call(signal) {
      const request = batches[next]!;
      next = (next + 1) % batches.length;
      const { results } = await client.allowBatch(request, { signal });
      let allowed = true;
      for (const result of results) {
        if (result.response === undefined) throw new Error(`batch item failed: ${JSON.stringify(result.error)}`);
        allowed &&= result.response.allowed;
      }
      return allowed;
    },
    close: () => channel.close(),
  };
}
