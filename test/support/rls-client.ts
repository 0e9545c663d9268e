import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { envoyDescriptorSet } from '../../src/gen/envoy-descriptor-set.js';

/**
 * A client of envoy.service.ratelimit.v3.RateLimitService as a proxy has it:
 * @grpc/proto-loader over the descriptor set built from the Envoy protos of
 * @grpc/grpc-js-xds, plain grpc-js, snake_case fields as in the proto. It
 * sends what Envoy sends; it shares no code with the service's codec.
 */
export interface RlsEntry {
  key: string;
  value: string;
}
export interface RlsDescriptor {
  entries: RlsEntry[];
  limit?: { requests_per_unit: number; unit: string };
  hits_addend?: { value: number | string };
}
export interface RlsRequest {
  domain: string;
  descriptors: RlsDescriptor[];
  hits_addend?: number;
}
export interface RlsStatus {
  code: 'UNKNOWN' | 'OK' | 'OVER_LIMIT';
  current_limit: { name: string; requests_per_unit: number; unit: string } | null;
  limit_remaining: number;
  duration_until_reset: { seconds: string; nanos: number } | null;
}
export interface RlsResponse {
  overall_code: 'UNKNOWN' | 'OK' | 'OVER_LIMIT';
  statuses: RlsStatus[];
  response_headers_to_add: { key: string; value: string }[];
  raw_body: Buffer;
  /** A Struct, its map as the repeated entries it is on the wire. */
  dynamic_metadata: { fields: { key: string; value: { string_value?: string; number_value?: number } }[] } | null;
}

export interface RlsClient {
  shouldRateLimit(request: RlsRequest, metadata?: Record<string, string>): Promise<RlsResponse>;
  close(): void;
}

const definition = protoLoader.loadFileDescriptorSetFromBuffer(envoyDescriptorSet, {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});
const loaded = grpc.loadPackageDefinition(definition) as unknown as {
  envoy: { service: { ratelimit: { v3: { RateLimitService: grpc.ServiceClientConstructor } } } };
};

export function rlsClient(address: string, credentials = grpc.credentials.createInsecure()): RlsClient {
  const client = new loaded.envoy.service.ratelimit.v3.RateLimitService(address, credentials);
  return {
    shouldRateLimit(request, metadata = {}) {
      const md = new grpc.Metadata();
      for (const [key, value] of Object.entries(metadata)) md.set(key, value);
      return new Promise((resolve, reject) =>
        (client as unknown as { ShouldRateLimit: (r: RlsRequest, m: grpc.Metadata, cb: (e: Error | null, v: RlsResponse) => void) => void }).ShouldRateLimit(
          request,
          md,
          (error, value) => (error === null ? resolve(value) : reject(error)),
        ),
      );
    },
    close: () => client.close(),
  };
}

/** A request as a proxy serializes it (for a client of its own: bench/raw-unary.ts). */
export function rlsRequestBytes(request: RlsRequest): Buffer {
  const method = (loaded.envoy.service.ratelimit.v3.RateLimitService as unknown as { service: Record<string, { requestSerialize(r: RlsRequest): Buffer }> })
    .service['ShouldRateLimit']!;
  return method.requestSerialize(request);
}

/** A descriptor from key/value pairs: d(['remote_address', '10.0.0.1'], ['path', '/a']). */
export function d(...pairs: [string, string][]): RlsDescriptor {
  return { entries: pairs.map(([key, value]) => ({ key, value })) };
}

/** The dynamic metadata as a plain object. */
export function metadataOf(response: RlsResponse): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const { key, value } of response.dynamic_metadata?.fields ?? []) out[key] = value.string_value ?? value.number_value ?? '';
  return out;
}

/** A header of a response, by name (any case). */
export function header(response: RlsResponse, name: string): string | undefined {
  return response.response_headers_to_add.find((h) => h.key.toLowerCase() === name.toLowerCase())?.value;
}

/** Writes YAML files into a fresh directory; returns the directory. */
export function rlsConfigDir(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'quota-rls-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}
