import http2 from 'node:http2';

/**
 * A gRPC streaming call on a bare HTTP/2 connection: framed messages go out as
 * given, and nothing is read until read() is called, so the connection's
 * flow-control windows fill the way a peer that never reads its answers
 * leaves them. For tests of what the server buffers for such a peer.
 */
export interface RawGrpcConnection {
  /** Opens a call of `path` (e.g. "/quota.v1.QuotaService/AllowStream"). */
  open(path: string): RawGrpcCall;
  close(): void;
}

export interface RawGrpcCall {
  /** Sends one message (its serialized bytes) in gRPC framing. */
  send(message: Uint8Array): void;
  end(): void;
  /** Starts reading: `onMessage` gets each answer's bytes; resolves when the call ends. */
  read(onMessage: (message: Buffer) => void): Promise<void>;
  cancel(): void;
}

export function connectRawGrpc(address: string): RawGrpcConnection {
  const session = http2.connect(`http://${address}`);
  session.on('error', () => {});
  return {
    open(path) {
      const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers' });
      stream.on('error', () => {});
      // Paused: Node acknowledges received data (WINDOW_UPDATE) only as it is read.
      stream.pause();
      return {
        send(message) {
          const frame = Buffer.alloc(5 + message.length);
          frame.writeUInt32BE(message.length, 1);
          frame.set(message, 5);
          stream.write(frame);
        },
        end: () => stream.end(),
        cancel: () => stream.close(http2.constants.NGHTTP2_CANCEL),
        read(onMessage) {
          let pending = Buffer.alloc(0);
          stream.on('data', (chunk: Buffer) => {
            pending = Buffer.concat([pending, chunk]);
            while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
              const length = pending.readUInt32BE(1);
              onMessage(pending.subarray(5, 5 + length));
              pending = pending.subarray(5 + length);
            }
          });
          stream.resume();
          return new Promise((resolve) => stream.on('close', resolve));
        },
      };
    },
    close: () => session.close(),
  };
}
