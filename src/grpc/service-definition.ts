import type { ServiceImplementation } from 'nice-grpc';
import { AllowBatchResponse, AllowResponse, AllowStreamResponse, QuotaServiceDefinition } from '@quota-service/contract';

const { allow, allowBatch, allowStream } = QuotaServiceDefinition.methods;

/**
 * QuotaServiceDefinition as the server serves it: the answers of Allow,
 * AllowBatch and AllowStream are encoded as the handlers build them instead
 * of through fromPartial. For a definition with fromPartial, nice-grpc
 * deep-copies every response before encoding it: per AllowStream message,
 * a copy of every result, response and limit status, a cost the batched
 * bench profiled per decision. Without it the handlers must build complete
 * messages, which the types now demand (no DeepPartial) and a test checks
 * byte for byte (test/grpc/service-definition.test.ts). The client does the
 * same for its requests (clients/quota-client/src/service-definition.ts).
 */
export const quotaServiceDefinition = {
  ...QuotaServiceDefinition,
  methods: {
    ...QuotaServiceDefinition.methods,
    allow: { ...allow, responseType: { encode: AllowResponse.encode, decode: AllowResponse.decode } },
    allowBatch: { ...allowBatch, responseType: { encode: AllowBatchResponse.encode, decode: AllowBatchResponse.decode } },
    allowStream: { ...allowStream, responseType: { encode: AllowStreamResponse.encode, decode: AllowStreamResponse.decode } },
  },
} as const;

export type QuotaServiceHandlers = ServiceImplementation<typeof quotaServiceDefinition>;
