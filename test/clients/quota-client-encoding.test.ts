import { describe, expect, it } from 'vitest';
import { AllowBatchRequest, AllowRequest } from '@quota-service/contract';
import { allowRequest, quotaClientDefinition } from '../../clients/quota-client/src/service-definition.js';
import type { AllowParams } from '../../clients/quota-client/src/types.js';

/** What nice-grpc sends for QuotaServiceDefinition: fromPartial, then encode. */
const generated = (params: AllowParams) => AllowRequest.encode(AllowRequest.fromPartial(params)).finish();
const ours = (params: AllowParams) => quotaClientDefinition.methods.allow.requestType.encode(allowRequest(params)).finish();

describe('the quota client encodes requests without the fromPartial copy, to the same bytes', () => {
  const cases: Array<[string, AllowParams]> = [
    ['plain', { policy: 'orders', identity: { user: '42', tenant: 'acme' }, cost: 2, requestId: 'r-1' }],
    ['defaults left unset', { policy: 'orders', identity: { user: '42' } }],
    // What callers without the types may pass: numbers and undefined values, no identity, no policy.
    ['loose identity values', { policy: 'orders', identity: { user: 7, tenant: undefined, ip: null } as unknown as Record<string, string> }],
    ['no identity, no policy', {} as AllowParams],
  ];

  it.each(cases)('%s: Allow', (_name, params) => {
    expect(Buffer.from(ours(params)).toString('hex')).toBe(Buffer.from(generated(params)).toString('hex'));
  });

  it('AllowBatch: the same bytes as fromPartial + encode of the batch', () => {
    const params = cases.map(([, p]) => p);
    const batchOurs = quotaClientDefinition.methods.allowBatch.requestType.encode({ requests: params.map(allowRequest) }).finish();
    const batchGenerated = AllowBatchRequest.encode(AllowBatchRequest.fromPartial({ requests: params })).finish();
    expect(Buffer.from(batchOurs).toString('hex')).toBe(Buffer.from(batchGenerated).toString('hex'));
  });

  it("leaves the caller's identity as it was", () => {
    const identity = { user: 7, tenant: undefined } as unknown as Record<string, string>;
    allowRequest({ policy: 'orders', identity });
    expect(identity).toEqual({ user: 7, tenant: undefined });
  });
});
