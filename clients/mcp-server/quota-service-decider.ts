// TEMPORARY adapter: the ONE place that talks to the quota service until
// clients/quota-client (issue 6) lands. Then replace this file's body with
//   export const connectQuotaDecider = (o) => createQuotaClient({ address: o.address, ... });
// and nothing else in the MCP server or its tests changes.
import { ClientError, createChannel, createClient, Status } from 'nice-grpc';
import { QuotaServiceDefinition } from '../../src/gen/quota/v1/quota.js';
import type { QuotaDecider, QuotaDecision } from '../mcp/quota-decider.js';

export interface QuotaDeciderOptions {
  /** host:port of the quota service. */
  address: string;
  /** Budget for one decision; a dead service must not add seconds to every call. Default 500 ms. */
  timeoutMs?: number;
  /**
   * The decision when the service cannot be asked: 'closed' (default) denies,
   * 'open' allows. Either way `source` says the service was not consulted, and a
   * tool policy's own failure mode overrides it in the guard.
   */
  failureMode?: 'open' | 'closed';
}

export interface ConnectedQuotaDecider extends QuotaDecider {
  close(): Promise<void>;
}

/** Statuses that mean "the service could not decide", as opposed to "it refused the request". */
const UNREACHABLE = new Set([Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED, Status.CANCELLED]);

export function connectQuotaDecider(options: QuotaDeciderOptions): ConnectedQuotaDecider {
  const channel = createChannel(options.address);
  const client = createClient(QuotaServiceDefinition, channel);
  const timeoutMs = options.timeoutMs ?? 500;
  const failOpen = options.failureMode === 'open';
  const notConsulted = (): QuotaDecision => ({
    allowed: failOpen,
    retryAfterMs: 0,
    deniedBy: '',
    limits: [],
    delayMs: 0,
    source: failOpen ? 'fail_open' : 'fail_closed',
  });
  return {
    async allow(params) {
      try {
        const response = await client.allow(
          { policy: params.policy, identity: params.identity, cost: params.cost ?? 0, requestId: params.requestId ?? '' },
          { signal: AbortSignal.timeout(timeoutMs) },
        );
        return {
          allowed: response.allowed,
          retryAfterMs: response.retryAfterMs,
          deniedBy: response.deniedBy,
          limits: response.limits.map((l) => ({ ...l })),
          delayMs: 0,
          source: 'store',
        };
      } catch (error) {
        if (error instanceof ClientError) {
          if (UNREACHABLE.has(error.code)) return notConsulted();
          // Bad input or an unknown policy: a configuration bug, surfaced with the service's words.
          throw new Error(error.details);
        }
        if (error instanceof Error && error.name === 'AbortError') return notConsulted();
        throw error;
      }
    },
    async close() {
      channel.close();
    },
  };
}
