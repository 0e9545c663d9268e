import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { type Metadata as GrpcMetadata, status as GrpcStatus } from '@grpc/grpc-js';
import type { CallStatus, StreamListener, StreamSource } from './lean-call.js';
import { NOT_SERIALIZED, RawCall, type RawCallLimits, type RawMethod, tooLarge } from './raw-call.js';

/**
 * A streaming call on the lean path (AllowStream), read and answered on its
 * HTTP/2 stream (raw-streams.ts hands it over), for lean-stream.ts to run the
 * handler on. It reads as grpc-js's server call reads: one message per
 * startRead, the stream paused while a decoded message waits (so the
 * handler's pace is what HTTP/2 flow control sees; a message the handler
 * takes at once does not pause it), a frame declared over the
 * server's limit refused, a message that does not decode answered INTERNAL,
 * a half frame at the end dropped, the deadline's DEADLINE_EXCEEDED, and the
 * reader told the call is over when the caller goes or the status is sent.
 * What grpc-js does per message besides (its decoder's copies, a queue entry
 * and a promise per message, its intercepting-call layers) is not done.
 */
export class RawStreamCall extends RawCall implements StreamSource {
  private listener: StreamListener | undefined;
  /** Decoded messages the reader has not asked for yet. */
  private readonly messages: unknown[] = [];
  /** The start of a frame whose end has not arrived, and the length that frame needs. */
  private partial: Buffer[] = [];
  private partialSize = 0;
  private frameSize = 5;
  private readPending = false;
  private halfClosed = false;
  private halfCloseDelivered = false;
  private ending = false;
  private cancelled = false;
  private readonly timer: NodeJS.Timeout | undefined;

  constructor(
    stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    deadline: number,
    method: RawMethod,
    private readonly limits: RawCallLimits,
  ) {
    super(stream, headers, deadline, method);
    stream.once('close', () => this.cancel());
    stream.on('data', (chunk: Buffer) => this.read(chunk));
    stream.pause();
    stream.once('end', () => {
      this.halfClosed = true;
      this.deliver();
    });
    this.timer = this.deadlineTimer(() => this.sendStatus({ code: GrpcStatus.DEADLINE_EXCEEDED, details: 'Deadline exceeded' }, null));
  }

  start(listener: StreamListener): void {
    if (this.isCancelled()) return;
    this.listener = listener;
    listener.onReceiveMetadata(this.metadata());
  }

  startRead(): void {
    if (this.isCancelled()) return;
    this.readPending = true;
    if (this.messages.length === 0 && !this.halfClosed) this.stream.resume();
    else this.deliver();
  }

  sendMetadata(metadata: GrpcMetadata): void {
    if (this.isCancelled()) return;
    this.sendHeaders(metadata);
  }

  sendMessage(message: unknown, written: () => void): void {
    if (this.isCancelled()) return;
    const frame = this.frameOf(message);
    if (frame === undefined) {
      this.sendStatus(NOT_SERIALIZED, null);
      return;
    }
    this.sendHeaders(null);
    this.stream.write(frame, (error) => {
      if (error) this.sendStatus({ code: GrpcStatus.INTERNAL, details: 'Internal server error' }, null);
      else written();
    });
  }

  sendStatus(status: CallStatus, trailers: GrpcMetadata | null): void {
    if (this.isCancelled() || this.ending) return;
    this.ending = true;
    this.sendStatusFrames(status, trailers);
    this.cancel();
  }

  /** Frames out of the stream's data, each decoded as soon as it is whole. */
  private read(data: Buffer): void {
    if (this.isCancelled()) return;
    let chunk = data;
    if (this.partialSize > 0) {
      this.partial.push(data);
      this.partialSize += data.length;
      if (this.partialSize < this.frameSize) return;
      chunk = Buffer.concat(this.partial, this.partialSize);
      this.partial = [];
      this.partialSize = 0;
    }
    let at = 0;
    while (chunk.length - at >= 5) {
      const length = chunk.readUInt32BE(at + 1);
      const refused = tooLarge(length, this.limits.maxReceiveBytes);
      if (refused !== undefined) {
        this.sendStatus(refused, null);
        return;
      }
      if (chunk.length - at < 5 + length) break;
      // The compressed flag needs no look: a compressed stream never gets here, and grpc-js reads the flag alone as uncompressed.
      const message = chunk.subarray(at + 5, at + 5 + length);
      at += 5 + length;
      try {
        this.messages.push(this.method.deserialize(message));
      } catch {
        this.sendStatus({ code: GrpcStatus.INTERNAL, details: 'Error deserializing request' }, null);
        return;
      }
    }
    if (at < chunk.length) {
      this.partial.push(at === 0 ? chunk : chunk.subarray(at));
      this.partialSize = chunk.length - at;
      this.frameSize = this.partialSize >= 5 ? 5 + chunk.readUInt32BE(at + 1) : 5;
    }
    this.deliver();
    // Paused only while decoded messages wait for the reader: one taken at
    // once leaves the stream flowing, and the reader's next startRead does
    // not have to resume it (a tick, and a native read start, per message).
    // A call the reader ended meanwhile stays flowing: what still comes is dropped.
    if (this.messages.length > 0 && !this.cancelled) this.stream.pause();
  }

  /** The next message, or the half-close after the last, when the reader asked for one. */
  private deliver(): void {
    if (this.listener === undefined || !this.readPending || this.cancelled) return;
    if (this.messages.length > 0) {
      this.readPending = false;
      this.listener.onReceiveMessage(this.messages.shift());
    } else if (this.halfClosed && !this.halfCloseDelivered) {
      this.readPending = false;
      this.halfCloseDelivered = true;
      this.listener.onReceiveHalfClose();
    }
  }

  /** As grpc-js checks it: a stream closed or destroyed before its 'close' event counts as cancelled. */
  private isCancelled(): boolean {
    if (!this.cancelled && this.gone()) this.cancel();
    return this.cancelled;
  }

  /** The call is over: the reader hears it on the next tick, the deadline stops, and what the caller still sends is dropped. */
  private cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    process.nextTick(() => this.listener?.onCancel());
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.stream.resume();
  }
}
