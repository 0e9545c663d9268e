import http2 from 'node:http2';

/** What came back for one request sent as HTTP/2 frames: the response headers (without the date), the data as sent, the trailers. */
export interface WireExchange {
  headers: Record<string, unknown>;
  data: Buffer;
  trailers: Record<string, unknown>;
}

/** Sends one request as given (headers over the usual gRPC ones, the body as bytes, then its end) and reads the whole answer. */
export function exchange(port: number, path: string, body: Buffer, headers: Record<string, string> = {}): Promise<WireExchange> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => {});
  const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...headers });
  const answer: Omit<WireExchange, 'data'> = { headers: {}, trailers: {} };
  const data: Buffer[] = [];
  stream.on('response', ({ date: _date, ...rest }) => (answer.headers = rest));
  stream.on('data', (chunk: Buffer) => data.push(chunk));
  stream.on('trailers', (t) => (answer.trailers = { ...t }));
  stream.on('error', () => {});
  stream.end(body);
  return new Promise((resolve) =>
    stream.on('close', () => {
      session.close();
      resolve({ ...answer, data: Buffer.concat(data) });
    }),
  );
}

/** A message in a gRPC frame, with the given compressed flag. */
export function framed(message: Uint8Array, flag = 0): Buffer {
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt8(flag, 0);
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  return frame;
}

/** A frame prefix that declares a message over grpc-js's 4 MiB limit. */
export function oversized(): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(5 * 1024 * 1024, 1);
  return prefix;
}

/** The status of an answer: in its trailers, or in its headers when it is a status alone (or its HTTP status). */
export function statusOf(answer: WireExchange): string {
  return String(answer.trailers['grpc-status'] ?? answer.headers['grpc-status'] ?? answer.headers[':status']);
}

/** The frames of an answer's data: each one's flag, whether its length is what it declares, and its message. */
export function framesOf(data: Buffer): Array<{ flag: number; message: Buffer }> {
  const frames: Array<{ flag: number; message: Buffer }> = [];
  let at = 0;
  while (data.length - at >= 5) {
    const length = data.readUInt32BE(at + 1);
    frames.push({ flag: data[at]!, message: data.subarray(at + 5, at + 5 + length) });
    at += 5 + length;
  }
  if (at !== data.length) throw new Error(`${data.length - at} bytes after the last whole frame`);
  return frames;
}
