import type { ServiceDefinition } from 'nice-grpc';
import protobuf from 'protobufjs';
import { envoyCodecSchema } from '../../gen/envoy-codec-schema.js';
import { utf8OrMarked } from '../../grpc/strict-utf8.js';

/** The service and method as Envoy calls them. */
export const RATE_LIMIT_SERVICE = 'envoy.service.ratelimit.v3.RateLimitService';
export const SHOULD_RATE_LIMIT_PATH = `/${RATE_LIMIT_SERVICE}/ShouldRateLimit`;

/** RateLimitResponse.Code. */
export const Code = { OK: 1, OVER_LIMIT: 2 } as const;

/** RateLimitResponse.RateLimit.Unit (and envoy.type.v3.RateLimitUnit): the same numbers. */
export const Unit = { SECOND: 1, MINUTE: 2, HOUR: 3, DAY: 4, MONTH: 5, YEAR: 6, WEEK: 7 } as const;
export type UnitNumber = (typeof Unit)[keyof typeof Unit];

/** A RateLimitRequest as the service reads it (field names as in the proto, values checked later). */
export interface RateLimitRequest {
  domain: string;
  descriptors: RequestDescriptor[];
  /** 0 when unset. */
  hits_addend: number;
}

export interface RequestDescriptor {
  entries: { key: string; value: string }[];
  limit?: { requests_per_unit: number; unit: number };
  /** A google.protobuf.UInt64Value: present (its value, 0 when unset) or absent. */
  hits_addend?: { value: bigint };
}

/** A RateLimitResponse as the service builds it. */
export interface RateLimitResponse {
  overall_code: number;
  statuses: DescriptorStatus[];
  response_headers_to_add: { key: string; value: string }[];
  raw_body?: Uint8Array;
  /**
   * A google.protobuf.Struct. Its map reads as the repeated map-entry messages
   * it is on the wire (a codec built from a descriptor set has no map fields).
   */
  dynamic_metadata?: { fields: { key: string; value: StructValue }[] };
}

/** A google.protobuf.Value, its Struct maps as their repeated entries. */
export type StructValue =
  | { null_value: 0 }
  | { bool_value: boolean }
  | { number_value: number }
  | { string_value: string }
  | { list_value: { values: StructValue[] } }
  | { struct_value: { fields: { key: string; value: StructValue }[] } };

export interface DescriptorStatus {
  code: number;
  current_limit?: { name: string; requests_per_unit: number; unit: number };
  limit_remaining: number;
  duration_until_reset?: { seconds: number; nanos: number };
}

/**
 * Strings read as strict UTF-8: bytes that are not valid UTF-8 become a
 * marked string that is never well-formed (src/grpc/strict-utf8.ts), which
 * validation refuses, naming the field. A lenient decoder would turn two
 * different invalid values into the same text, and so into the same state.
 */
class StrictUtf8Reader extends protobuf.BufferReader {
  override string(): string {
    return utf8OrMarked(this.bytes());
  }
}

/**
 * The codec of ShouldRateLimit, built from the schema generated from the
 * Envoy protos @grpc/grpc-js-xds ships (scripts/gen-envoy-proto.mjs). Built
 * when the server starts (about 0.1 s), not when this module is imported.
 */
export function rateLimitServiceDefinition() {
  const root = protobuf.Root.fromJSON(envoyCodecSchema as protobuf.INamespace);
  const requestType = root.lookupType('envoy.service.ratelimit.v3.RateLimitRequest');
  const responseType = root.lookupType('envoy.service.ratelimit.v3.RateLimitResponse');
  const decodeRequest = (bytes: Uint8Array): RateLimitRequest =>
    toRequest(requestType.decode(new StrictUtf8Reader(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength))));
  const encodeResponse = (response: RateLimitResponse): Uint8Array => responseType.encode(response as unknown as protobuf.Message).finish();
  return {
    shouldRateLimit: {
      path: SHOULD_RATE_LIMIT_PATH,
      requestStream: false,
      responseStream: false,
      requestSerialize: (request: RateLimitRequest) => requestType.encode(request as unknown as protobuf.Message).finish(),
      requestDeserialize: decodeRequest,
      responseSerialize: encodeResponse,
      responseDeserialize: (bytes: Uint8Array) => responseType.decode(bytes) as unknown as RateLimitResponse,
      options: {},
    },
  } satisfies ServiceDefinition;
}

interface DecodedDescriptor {
  entries?: { key?: string; value?: string }[];
  limit?: { requests_per_unit?: number; unit?: number } | null;
  hits_addend?: { value?: number | { toString(): string } } | null;
}

/** The decoded message as plain fields: defaults filled in, 64-bit numbers as bigint. */
function toRequest(message: protobuf.Message): RateLimitRequest {
  const decoded = message as unknown as { domain?: string; descriptors?: DecodedDescriptor[]; hits_addend?: number };
  return {
    domain: decoded.domain ?? '',
    hits_addend: decoded.hits_addend ?? 0,
    descriptors: (decoded.descriptors ?? []).map((descriptor) => {
      const out: RequestDescriptor = { entries: (descriptor.entries ?? []).map((entry) => ({ key: entry.key ?? '', value: entry.value ?? '' })) };
      if (descriptor.limit != null) out.limit = { requests_per_unit: descriptor.limit.requests_per_unit ?? 0, unit: descriptor.limit.unit ?? 0 };
      if (descriptor.hits_addend != null) {
        const value = descriptor.hits_addend.value;
        out.hits_addend = { value: value === undefined ? 0n : BigInt(typeof value === 'number' ? value : value.toString()) };
      }
      return out;
    }),
  };
}
