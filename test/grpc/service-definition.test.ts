// The server encodes Allow, AllowBatch and AllowStream answers without nice-grpc's
// fromPartial copy (src/api/quota/service-definition.ts). That is only right if the
// handlers build complete messages: every answer they give here, from the store,
// from each failure mode, and as batch item errors, must encode to the same bytes
// as fromPartial + encode, what the generated definition would have sent.
import { Metadata } from 'nice-grpc';
import { describe, expect, it } from 'vitest';
import { parsePolicies, StoreUnavailableError } from '@quota-service/core';
import { QuotaEngine } from '../../src/engine/engine.js';
import { AllowBatchResponse, AllowResponse, AllowStreamResponse, DecisionSource, type AllowRequest } from '@quota-service/contract';
import { quotaService } from '../../src/api/quota/quota-service.js';
import { quotaServiceDefinition } from '../../src/api/quota/service-definition.js';
import { createLogger } from '../../src/logger.js';
import { MemoryStore } from '../../src/store/memory.js';

const policies = parsePolicies(
  `
policies:
  bucket:
    limits: [{ name: bucket, key_by: user, algorithm: token_bucket, capacity: 1, refill_per_second: 1 }]
  both:
    limits:
      - { name: bucket, key_by: user, algorithm: token_bucket, capacity: 1, refill_per_second: 1 }
      - { name: window, key_by: tenant, algorithm: fixed_window, limit: 5, window: minute }
  shaped:
    limits: [{ name: shaped, key_by: user, algorithm: leaky_bucket, capacity: 5, leak_per_second: 1, mode: shaping }]
  open:
    failure_mode: fail_open
    limits: [{ name: open, key_by: user, algorithm: token_bucket, capacity: 1, refill_per_second: 1 }]
  closed:
    failure_mode: fail_closed
    limits: [{ name: closed, key_by: user, algorithm: token_bucket, capacity: 1, refill_per_second: 1 }]
  local:
    failure_mode: local
    local_share: 0.5
    limits: [{ name: local, key_by: user, algorithm: token_bucket, capacity: 4, refill_per_second: 1 }]
`,
  'test policies',
);

/** A store that cannot be reached: every policy's failure mode answers. */
class UnreachableStore extends MemoryStore {
  override decide(): Promise<never> {
    return Promise.reject(new StoreUnavailableError(new Error('unreachable')));
  }
}

const request = (policy: string, extra: Partial<AllowRequest> = {}): AllowRequest => ({
  policy,
  identity: { user: '42', tenant: 'acme' },
  cost: 0,
  requestId: '',
  deadlineMs: 0,
  sentAtUnixMs: 0,
  ...extra,
});

/** Every kind of answer: allowed, denied, several limits, shaping delay, replayed request id, and item errors. */
const fromStore: AllowRequest[] = [
  request('bucket'),
  request('bucket'),
  request('both'),
  request('shaped'),
  request('shaped', { cost: 2 }),
  request('bucket', { requestId: 'r-1' }),
  request('bucket', { requestId: 'r-1' }),
  request('nope'),
  request('bucket', { cost: -1 }),
];
const fromFailureModes = [request('open'), request('closed'), request('local')];

/** A handler's call context: who calls (for load shedding) and where trailers go. */
const context = { peer: 'ipv4:127.0.0.1:50000', trailer: Metadata() } as never;

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');

function handlers(store: MemoryStore) {
  return quotaService(new QuotaEngine(policies, store), createLogger('silent'), new AbortController().signal);
}

describe('answers encoded without fromPartial are the bytes fromPartial + encode gives', () => {
  it('the server definition drops fromPartial for exactly Allow, AllowBatch and AllowStream answers', () => {
    const { methods } = quotaServiceDefinition;
    expect(
      Object.entries(methods)
        .filter(([, m]) => !('fromPartial' in m.responseType))
        .map(([name]) => name),
    ).toEqual(['allow', 'allowBatch', 'allowStream']);
  });

  it.each([
    ['the store', () => new MemoryStore(), fromStore],
    ['the failure modes', () => new UnreachableStore(), fromFailureModes],
  ] as const)('Allow, AllowBatch and AllowStream answers from %s', async (_name, store, requests) => {
    const service = handlers(store());
    for (const one of requests) {
      if (one.policy === 'nope' || one.cost < 0) continue; // Allow fails these with a status instead
      const answer = await service.allow(one, context);
      expect(hex(AllowResponse.encode(answer).finish())).toBe(hex(AllowResponse.encode(AllowResponse.fromPartial(answer)).finish()));
    }
    const batch = await service.allowBatch({ requests: [...requests] }, context);
    expect(batch.results.length).toBe(requests.length);
    expect(hex(AllowBatchResponse.encode(batch).finish())).toBe(hex(AllowBatchResponse.encode(AllowBatchResponse.fromPartial(batch)).finish()));
    const message = { id: 7, results: batch.results };
    expect(hex(AllowStreamResponse.encode(message).finish())).toBe(hex(AllowStreamResponse.encode(AllowStreamResponse.fromPartial(message)).finish()));
  });

  it('the answers cover what they should: denials, delays, several limits, failure sources and item errors', async () => {
    const stored = (await handlers(new MemoryStore()).allowBatch({ requests: fromStore }, context)).results;
    expect(stored.some((r) => r.response?.allowed === false)).toBe(true);
    expect(stored.some((r) => (r.response?.delayMs ?? 0) > 0)).toBe(true);
    expect(stored.some((r) => r.response?.limits.length === 2)).toBe(true);
    expect(stored.filter((r) => r.error !== undefined)).toHaveLength(2);
    const failed = (await handlers(new UnreachableStore()).allowBatch({ requests: fromFailureModes }, context)).results;
    expect(failed.map((r) => r.response?.source)).toEqual([
      DecisionSource.DECISION_SOURCE_FAIL_OPEN,
      DecisionSource.DECISION_SOURCE_FAIL_CLOSED,
      DecisionSource.DECISION_SOURCE_LOCAL,
    ]);
  });
});
