import http2 from 'node:http2';
import type { Call } from './load.js';

/**
 * Unary gRPC calls on one bare HTTP/2 connection, every request serialized
 * and framed before the run: about the least a client can do per call (no
 * per-call interceptors, metadata objects or answer decoding), as a proxy
 * written in C++ does. A latency measured from this Node process is then
 * the service's, not this process's own garbage collection (grpc-js leaves
 * tens of kilobytes of garbage per call). A call succeeds when its status
 * (trailers, or a trailers-only answer) is grpc-status 0; the answer is not
 * decoded. A failed call rejects with `grpc-status <code>`. `extraHeaders` go on
 * every call (e.g. `grpc-timeout`, as a proxy sends its deadline).
 */
export function rawUnaryCaller(
  port: number,
  path: string,
  requests: readonly Uint8Array[],
  extraHeaders: Readonly<Record<string, string>> = {},
): { call: Call; close(): void } {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => {});
  const headers = { ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...extraHeaders };
  const frames = requests.map((message) => {
    const frame = Buffer.alloc(5 + message.length);
    frame.writeUInt32BE(message.length, 1);
    frame.set(message, 5);
    return frame;
  });
  let next = 0;
  return {
    call() {
      const frame = frames[next]!;
      next = (next + 1) % frames.length;
      return new Promise<boolean>((resolve, reject) => {
        const stream = session.request(headers);
        let status: string | undefined;
        stream.on('response', (answer) => {
          if (answer['grpc-status'] !== undefined) status = String(answer['grpc-status']);
        });
        stream.on('trailers', (trailers) => {
          status = String(trailers['grpc-status']);
        });
        stream.on('data', () => {});
        stream.on('end', () => (status === '0' ? resolve(true) : reject(new Error(`grpc-status ${status ?? 'missing'}`))));
        stream.on('error', reject);
        stream.end(frame);
      });
    },
    close: () => session.close(),
  };
}
