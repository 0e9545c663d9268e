import { createChannel, createClient, type Channel } from 'nice-grpc';
import { QuotaServiceDefinition, type AllowRequest } from '@quota-service/contract';
import type { Call } from './load.js';

/** Distinct user ids the load cycles through: many keys, as in production, and no hot key. */
const USERS = 10_000;
/** Tenants of those users (policy bench-multi keys a limit by tenant): 100 users each. */
const TENANTS = 100;

export interface AllowCaller {
  readonly call: Call;
  close(): void;
}

/**
 * One channel (one HTTP/2 connection, calls multiplexed on it) to a loopback
 * port, and a Call that sends Allow for the bench policy, cycling over USERS
 * identities. Both server kinds get exactly the same client and requests.
 */
export function allowCaller(port: number, policy: 'bench' | 'bench-multi' = 'bench'): AllowCaller {
  const channel: Channel = createChannel(`127.0.0.1:${port}`);
  const client = createClient(QuotaServiceDefinition, channel);
  // Built once, so the client spends no time building requests while measuring.
  const requests: AllowRequest[] = Array.from({ length: USERS }, (_, i) => ({
    policy,
    identity: policy === 'bench' ? { user: `bench-user-${i}` } : ({ user: `bench-user-${i}`, tenant: `bench-tenant-${i % TENANTS}` } as Record<string, string>),
    cost: 1,
    requestId: '',
    deadlineMs: 0,
    sentAtUnixMs: 0,
  }));
  let next = 0;
  return {
    async call(signal) {
      const request = requests[next] as AllowRequest;
      next = (next + 1) % USERS;
      const response = await client.allow(request, { signal });
      return response.allowed;
    },
    close: () => channel.close(),
  };
}
