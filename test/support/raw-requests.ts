import { BinaryWriter } from '@bufbuild/protobuf/wire';
import { ChannelCredentials, Client, Metadata, type ServiceError } from '@grpc/grpc-js';

/**
 * A string field as sent on the wire: text (encoded as UTF-8) or raw bytes,
 * which need not be valid UTF-8. A well-behaved client cannot send the latter.
 */
export type Text = string | Uint8Array;

/** An AllowRequest (or, without cost and request id, a GetQuotaRequest: its fields 1 and 2 are the same). */
export interface RawAllowRequest {
  policy: Text;
  identity: [Text, Text][];
  cost?: number;
  requestId?: Text;
}

const text = (writer: BinaryWriter, tag: number, value: Text) =>
  typeof value === 'string' ? writer.uint32(tag).string(value) : writer.uint32(tag).bytes(value);

function writeAllowRequest(request: RawAllowRequest, writer: BinaryWriter): BinaryWriter {
  text(writer, 10, request.policy);
  for (const [key, value] of request.identity) {
    writer.uint32(18).fork();
    text(writer, 10, key);
    text(writer, 18, value);
    writer.join();
  }
  if (request.cost !== undefined) writer.uint32(25).double(request.cost);
  if (request.requestId !== undefined) text(writer, 34, request.requestId);
  return writer;
}

export const encodeAllowRequest = (request: RawAllowRequest): Uint8Array => writeAllowRequest(request, new BinaryWriter()).finish();

export function encodeAllowBatchRequest(requests: RawAllowRequest[]): Uint8Array {
  const writer = new BinaryWriter();
  for (const request of requests) writeAllowRequest(request, writer.uint32(10).fork()).join();
  return writer.finish();
}

export function encodeAllowStreamRequest(id: number, requests: RawAllowRequest[]): Uint8Array {
  const writer = new BinaryWriter().uint32(8).uint32(id);
  for (const request of requests) writeAllowRequest(request, writer.uint32(18).fork()).join();
  return writer.finish();
}

/** The outcome of a raw call: the decoded answer, or the status. */
export type RawOutcome<T> = { ok: true; value: T } | { ok: false; code: number; details: string };

/**
 * A plain @grpc/grpc-js client that sends requests as bytes the test encoded
 * itself, so it can send what no generated client would.
 */
export class RawQuotaClient {
  private readonly client: Client;

  constructor(
    address: string,
    private readonly token?: string,
  ) {
    this.client = new Client(address, ChannelCredentials.createInsecure());
  }

  /** `method`: a QuotaService method's name, or a whole path (`/quota.v1.QuotaAdminService/SetOverride`). */
  unary<T>(method: string, request: Uint8Array, decode: (bytes: Uint8Array) => T): Promise<RawOutcome<T>> {
    return new Promise((resolve) => {
      this.client.makeUnaryRequest(
        method.startsWith('/') ? method : `/quota.v1.QuotaService/${method}`,
        (bytes: Uint8Array) => Buffer.from(bytes),
        decode,
        request,
        this.metadata(),
        { deadline: Date.now() + 5_000 },
        (error: ServiceError | null, value?: T) => resolve(error ? { ok: false, code: error.code, details: error.details } : { ok: true, value: value! }),
      );
    });
  }

  /** AllowStream: sends the messages, ends its side, and collects every answer until the stream ends. */
  stream<T>(messages: Uint8Array[], decode: (bytes: Uint8Array) => T): Promise<{ answers: T[]; code: number; details: string }> {
    return new Promise((resolve) => {
      const call = this.client.makeBidiStreamRequest('/quota.v1.QuotaService/AllowStream', (bytes: Uint8Array) => Buffer.from(bytes), decode, this.metadata(), {
        deadline: Date.now() + 5_000,
      });
      const answers: T[] = [];
      call.on('data', (answer: T) => answers.push(answer));
      call.on('error', () => {});
      call.on('status', (status) => resolve({ answers, code: status.code, details: status.details }));
      for (const message of messages) call.write(message);
      call.end();
    });
  }

  close(): void {
    this.client.close();
  }

  private metadata(): Metadata {
    const metadata = new Metadata();
    if (this.token !== undefined) metadata.set('authorization', `Bearer ${this.token}`);
    return metadata;
  }
}
