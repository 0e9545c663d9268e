import type { ServiceImplementation } from 'nice-grpc';
import {
  AllowBatchRequest,
  AllowBatchResponse,
  AllowRequest,
  AllowResponse,
  AllowStreamRequest,
  AllowStreamResponse,
  GetQuotaRequest,
  QuotaServiceDefinition,
  ReleaseRequest,
  RenewRequest,
  SettleRequest,
  TakeSliceRequest,
} from '@quota-service/contract';
import { strictUtf8Decode } from '../../grpc/strict-utf8.js';

const { allow, allowBatch, allowStream, getQuota, release, renew, settle, takeSlice } = QuotaServiceDefinition.methods;

/**
 * QuotaServiceDefinition as the server serves it.
 *
 * The answers of Allow, AllowBatch and AllowStream are encoded as the handlers
 * build them instead of through fromPartial. For a definition with
 * fromPartial, nice-grpc deep-copies every response before encoding it: per
 * AllowStream message, a copy of every result, response and limit status.
 * Without it the handlers must
 * build complete messages, which the types now demand (no DeepPartial) and a
 * test checks byte for byte (test/grpc/service-definition.test.ts). The client
 * does the same for its requests (clients/quota-client/src/service-definition.ts).
 *
 * The requests carrying strings (every rpc but ListPolicies) are decoded with
 * strict UTF-8 (src/grpc/strict-utf8.ts): bytes that are not valid UTF-8 never
 * become the text a lenient decoder would make of them, which a valid request
 * may send too.
 */
export const quotaServiceDefinition = {
  ...QuotaServiceDefinition,
  methods: {
    ...QuotaServiceDefinition.methods,
    allow: {
      ...allow,
      requestType: { ...allow.requestType, decode: strictUtf8Decode(AllowRequest) },
      responseType: { encode: AllowResponse.encode, decode: AllowResponse.decode },
    },
    allowBatch: {
      ...allowBatch,
      requestType: { ...allowBatch.requestType, decode: strictUtf8Decode(AllowBatchRequest) },
      responseType: { encode: AllowBatchResponse.encode, decode: AllowBatchResponse.decode },
    },
    allowStream: {
      ...allowStream,
      requestType: { ...allowStream.requestType, decode: strictUtf8Decode(AllowStreamRequest) },
      responseType: { encode: AllowStreamResponse.encode, decode: AllowStreamResponse.decode },
    },
    getQuota: { ...getQuota, requestType: { ...getQuota.requestType, decode: strictUtf8Decode(GetQuotaRequest) } },
    release: { ...release, requestType: { ...release.requestType, decode: strictUtf8Decode(ReleaseRequest) } },
    renew: { ...renew, requestType: { ...renew.requestType, decode: strictUtf8Decode(RenewRequest) } },
    settle: { ...settle, requestType: { ...settle.requestType, decode: strictUtf8Decode(SettleRequest) } },
    takeSlice: { ...takeSlice, requestType: { ...takeSlice.requestType, decode: strictUtf8Decode(TakeSliceRequest) } },
  },
} as const;

export type QuotaServiceHandlers = ServiceImplementation<typeof quotaServiceDefinition>;
