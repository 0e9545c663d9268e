// The unary calls the benches send the service (bench/servers/quota-server.ts's
// policy and Envoy domain `bench`: the same token bucket behind each).
import { AllowRequest } from '@quota-service/contract';
import { rlsRequestBytes } from '../test/support/rls-client.js';

export const UNARY_PATHS = {
  Allow: '/quota.v1.QuotaService/Allow',
  ShouldRateLimit: '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
} as const;

export type UnaryMethod = keyof typeof UNARY_PATHS;

/** Allow of policy `bench` for `user`; ShouldRateLimit of domain `bench` with one descriptor (user, `user`). */
export const unaryRequestOf: Record<UnaryMethod, (user: string) => Uint8Array> = {
  Allow: (user) => AllowRequest.encode({ policy: 'bench', identity: { user }, cost: 1, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 }).finish(),
  ShouldRateLimit: (user) => rlsRequestBytes({ domain: 'bench', descriptors: [{ entries: [{ key: 'user', value: user }] }] }),
};
