import type { Client } from 'nice-grpc';
import { AllowBatchRequest, AllowRequest, AllowStreamRequest, QuotaServiceDefinition } from '@quota-service/contract';
import type { AllowParams } from './types.js';

const { allow, allowBatch, allowStream } = QuotaServiceDefinition.methods;

/**
 * The three rpcs the client calls, as QuotaServiceDefinition has them, except
 * that requests are encoded as they are instead of through fromPartial: for a
 * definition with fromPartial, nice-grpc deep-copies every request (identity
 * map included) before encoding it, a copy per decision that the batched bench
 * profiled among the client's top costs. allowRequest() builds each request
 * complete, exactly as fromPartial would have made it.
 */
export const quotaClientDefinition = {
  name: QuotaServiceDefinition.name,
  fullName: QuotaServiceDefinition.fullName,
  methods: {
    allow: { ...allow, requestType: { encode: AllowRequest.encode, decode: AllowRequest.decode } },
    allowBatch: { ...allowBatch, requestType: { encode: AllowBatchRequest.encode, decode: AllowBatchRequest.decode } },
    allowStream: { ...allowStream, requestType: { encode: AllowStreamRequest.encode, decode: AllowStreamRequest.decode } },
  },
} as const;

export type QuotaRpcClient = Client<typeof quotaClientDefinition>;

/**
 * The AllowRequest for `params`, as AllowRequest.fromPartial makes it: unset
 * fields get their defaults, identity values go through String() and
 * undefined ones are left out (for callers without the types). The identity
 * is copied only when a value needs that.
 */
export function allowRequest(params: AllowParams): AllowRequest {
  return {
    policy: params.policy ?? '',
    identity: plainIdentity(params.identity ?? {}),
    cost: params.cost ?? 0,
    requestId: params.requestId ?? '',
  };
}

function plainIdentity(identity: Record<string, string>): Record<string, string> {
  for (const key of Object.keys(identity)) {
    if (typeof identity[key] !== 'string') return coerced(identity);
  }
  return identity;
}

function coerced(identity: Record<string, unknown>): Record<string, string> {
  const copy: Record<string, string> = {};
  for (const [key, value] of Object.entries(identity)) if (value !== undefined) copy[key] = String(value);
  return copy;
}
