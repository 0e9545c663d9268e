import { type Client as GrpcClient, Metadata, status as GrpcStatus, type StatusObject } from '@grpc/grpc-js';
import { AllowStreamRequest, AllowStreamResponse } from '@quota-service/contract';
import { ClientError, type Status } from 'nice-grpc';
import { MessageQueue } from './message-queue.js';
import type { QuotaRpcClient } from './service-definition.js';

/** One open AllowStream call, as AllowStream (allow-stream.ts) drives it. */
export interface StreamCall {
  send(message: AllowStreamRequest): void;
  /** Ends the client's side: the service answers what it has read, then ends. */
  end(): void;
  cancel(): void;
}

/** What the call reports: each answer, then its end once, after the last answer (undefined: ended with OK). */
export interface StreamEvents {
  answer(response: AllowStreamResponse): void;
  ended(failure: unknown): void;
}

/** Opens an AllowStream call. */
export type OpenStream = (events: StreamEvents) => StreamCall;

const ALLOW_STREAM_PATH = '/quota.v1.QuotaService/AllowStream';

/** Through nice-grpc's client, and so through the middleware it was made with. */
export function niceGrpcStream(client: QuotaRpcClient): OpenStream {
  return (events) => {
    const outgoing = new MessageQueue<AllowStreamRequest>();
    const cancel = new AbortController();
    void (async () => {
      let failure: unknown;
      try {
        for await (const answer of client.allowStream(outgoing, { signal: cancel.signal })) events.answer(answer);
      } catch (error) {
        failure = error;
      }
      events.ended(failure);
    })();
    return { send: (message) => outgoing.push(message), end: () => outgoing.end(), cancel: () => cancel.abort() };
  };
}

/**
 * On grpc-js directly, for a client without middleware: each batch is written
 * to the call and each answer handed over as it is read, without nice-grpc's
 * adapters (an async iterable pumped into the call, the call's answers turned
 * into another), which at one batch in flight are a good part of what a batch
 * costs the caller. A failure is the ClientError nice-grpc would throw.
 */
export function grpcJsStream(client: GrpcClient): OpenStream {
  return (events) => {
    const call = client.makeBidiStreamRequest(ALLOW_STREAM_PATH, serialize, AllowStreamResponse.decode, new Metadata());
    let status: StatusObject | undefined;
    call.on('data', events.answer);
    // grpc-js emits the status (after 'error' when it is not OK) as the answers
    // end, and 'end' once the last answer has been handed over: the end is told then.
    call.on('status', (received: StatusObject) => (status = received));
    call.on('error', () => {});
    call.on('end', () => events.ended(failureOf(status)));
    return { send: (message) => call.write(message), end: () => call.end(), cancel: () => call.cancel() };
  };
}

function serialize(message: AllowStreamRequest): Buffer {
  const bytes = AllowStreamRequest.encode(message).finish();
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function failureOf(status: StatusObject | undefined): ClientError | undefined {
  if (status === undefined) return new ClientError(ALLOW_STREAM_PATH, GrpcStatus.UNKNOWN as number as Status, 'stream ended without a status');
  if (status.code === GrpcStatus.OK) return undefined;
  return new ClientError(ALLOW_STREAM_PATH, status.code as number as Status, status.details);
}
