import { mkdtempSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
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

/** A response's bytes as the client reads them. */
export function rlsResponseOf(bytes: Buffer): RlsResponse {
  const method = (loaded.envoy.service.ratelimit.v3.RateLimitService as unknown as { service: Record<string, { responseDeserialize(b: Buffer): RlsResponse }> })
    .service['ShouldRateLimit']!;
  return method.responseDeserialize(bytes);
}

/** What a call on a bare HTTP/2 stream came to: its grpc-status, its answer when there is one, and how long it took. */
export interface RawRlsAnswer {
  status: number;
  message: string;
  response: RlsResponse | undefined;
  ms: number;
}

/**
 * One ShouldRateLimit on a bare HTTP/2 connection, with the headers a proxy
 * sends (`grpc-timeout: 20m` as Envoy does by default): the caller's own
 * wait is not bounded here, so a test sees when the answer came, late or not.
 */
export async function rawShouldRateLimit(address: string, request: RlsRequest, headers: Record<string, string> = {}): Promise<RawRlsAnswer> {
  const session = http2.connect(`http://${address}`);
  session.on('error', () => {});
  // Connected first: the time measured is the call's, as on a proxy's open connection.
  await new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve());
    session.once('error', reject);
  });
  return new Promise<RawRlsAnswer>((resolve, reject) => {
    const started = performance.now();
    const stream = session.request({ ':method': 'POST', ':path': SHOULD_RATE_LIMIT, 'content-type': 'application/grpc', te: 'trailers', ...headers });
    const message = rlsRequestBytes(request);
    const frame = Buffer.alloc(5 + message.length);
    frame.writeUInt32BE(message.length, 1);
    frame.set(message, 5);
    stream.end(frame);
    const chunks: Buffer[] = [];
    let trailers: http2.IncomingHttpHeaders = {};
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('response', (head) => {
      // A Trailers-Only answer (an error) comes as the response headers.
      if (head['grpc-status'] !== undefined) trailers = head;
    });
    stream.on('trailers', (received) => {
      trailers = received;
    });
    stream.on('error', reject);
    stream.on('close', () => {
      const ms = performance.now() - started;
      session.close();
      const body = Buffer.concat(chunks);
      resolve({
        status: Number(trailers['grpc-status'] ?? -1),
        message: decodeURIComponent(String(trailers['grpc-message'] ?? '')),
        response: body.length >= 5 ? rlsResponseOf(body.subarray(5, 5 + body.readUInt32BE(1))) : undefined,
        ms,
      });
    });
  });
}

const SHOULD_RATE_LIMIT = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';

/** A google.protobuf.Value as it reads in JSON. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

interface WireValue {
  null_value?: unknown;
  bool_value?: boolean;
  number_value?: number;
  string_value?: string;
  list_value?: { values: WireValue[] };
  struct_value?: { fields: { key: string; value: WireValue }[] };
  kind?: string;
}

/** A Struct or Value as read by the client (repeated map entries, a oneof) as plain JSON. */
export function jsonOf(value: WireValue): JsonValue {
  switch (value.kind) {
    case 'bool_value':
      return value.bool_value!;
    case 'number_value':
      return value.number_value!;
    case 'string_value':
      return value.string_value!;
    case 'list_value':
      return value.list_value!.values.map(jsonOf);
    case 'struct_value':
      return Object.fromEntries(value.struct_value!.fields.map((f) => [f.key, jsonOf(f.value)]));
    default:
      return null;
  }
}

/** The dynamic metadata's `metadata` entry (the passed descriptors' rule metadata), as JSON; undefined when absent. */
export function ruleMetadataOf(response: RlsResponse): JsonValue | undefined {
  const field = (response.dynamic_metadata?.fields as { key: string; value: WireValue }[] | undefined)?.find((f) => f.key === 'metadata');
  return field === undefined ? undefined : jsonOf(field.value);
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
