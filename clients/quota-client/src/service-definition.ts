import { Status, type Client } from 'nice-grpc';
import {
  AllowBatchRequest,
  AllowRequest,
  AllowStreamRequest,
  QuotaServiceDefinition,
  ReleaseRequest,
  RenewRequest,
  SettleRequest,
} from '@quota-service/contract';
import { QuotaInvalidArgumentError } from './errors.js';
import type { AllowParams } from './types.js';

const { allow, allowBatch, allowStream, settle, release, renew, listPolicies, takeSlice } = QuotaServiceDefinition.methods;

/**
 * The rpcs the client calls, as QuotaServiceDefinition has them, except
 * that requests are encoded as they are instead of through fromPartial: for a
 * definition with fromPartial, nice-grpc deep-copies every request (identity
 * map included) before encoding it, a copy per decision. allowRequest() builds each request
 * complete, exactly as fromPartial would have made it.
 */
export const quotaClientDefinition = {
  name: QuotaServiceDefinition.name,
  fullName: QuotaServiceDefinition.fullName,
  methods: {
    allow: { ...allow, requestType: { encode: AllowRequest.encode, decode: AllowRequest.decode } },
    allowBatch: { ...allowBatch, requestType: { encode: AllowBatchRequest.encode, decode: AllowBatchRequest.decode } },
    allowStream: { ...allowStream, requestType: { encode: AllowStreamRequest.encode, decode: AllowStreamRequest.decode } },
    // A reservation's settlement and a lease's renewals and release: built complete from the Allow's request.
    settle: { ...settle, requestType: { encode: SettleRequest.encode, decode: SettleRequest.decode } },
    release: { ...release, requestType: { encode: ReleaseRequest.encode, decode: ReleaseRequest.decode } },
    renew: { ...renew, requestType: { encode: RenewRequest.encode, decode: RenewRequest.decode } },
    // Once at start, not per decision: the generated definition as it is.
    listPolicies,
    // About once per slice's life for a hot identity: the generated definition as it is.
    takeSlice,
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
  const request = {
    policy: params.policy ?? '',
    identity: plainIdentity(params.identity ?? {}),
    cost: params.cost ?? 0,
    requestId: params.requestId ?? '',
    // Set as the request leaves (batcher.ts, stamp): how long its caller still waits, and when.
    deadlineMs: 0,
    sentAtUnixMs: 0,
  };
  if (!request.policy.isWellFormed()) throw notUtf8('policy: not valid UTF-8');
  if (!request.requestId.isWellFormed()) throw notUtf8('request_id: not valid UTF-8');
  return request;
}

/**
 * A string with a lone surrogate has no UTF-8 form: the encoder would send
 * U+FFFD in its place, and two different values would reach the service as
 * one. Refused here as the service refuses bytes that are not UTF-8.
 */
function notUtf8(message: string): QuotaInvalidArgumentError {
  return new QuotaInvalidArgumentError(Status.INVALID_ARGUMENT, message);
}

function plainIdentity(identity: Record<string, string>): Record<string, string> {
  for (const key of Object.keys(identity)) {
    const value = identity[key];
    if (typeof value !== 'string') return plainIdentity(coerced(identity));
    if (!key.isWellFormed()) throw notUtf8('identity: a part name is not valid UTF-8');
    if (!value.isWellFormed()) throw notUtf8(`identity.${key}: not valid UTF-8`);
  }
  return identity;
}

function coerced(identity: Record<string, unknown>): Record<string, string> {
  const copy: Record<string, string> = {};
  for (const [key, value] of Object.entries(identity)) if (value !== undefined) copy[key] = String(value);
  return copy;
}
