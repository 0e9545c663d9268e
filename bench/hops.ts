// One request in flight over one loopback hop, whatever is behind it: the
// callers of bench/hop-floor.ts, and the floor bench/limiters-run.ts sets the
// quota client's latency against; and the two-hop relay it runs beside the
// limiters.
import { connect, type Socket } from 'node:net';
import { type Client, credentials, makeGenericClientConstructor, type ClientDuplexStream } from '@grpc/grpc-js';
import type { AllowCaller } from './client.js';
import type { Call } from './load.js';
import { ECHO_SERVICE } from './servers/echo-service.js';

const PAYLOAD = Buffer.from('0123456789abcdef');

export interface Hop {
  readonly name: string;
  readonly call: Call;
  readonly serverPid: number | undefined;
  close(): void;
}

/** One request in flight at a time: each kind answers the next pending resolve in order. */
function replies(): { wait(): Promise<boolean>; answer(): void } {
  let pending: ((value: boolean) => void) | undefined;
  return {
    wait: () => new Promise<boolean>((resolve) => (pending = resolve)),
    answer: () => {
      const resolve = pending;
      pending = undefined;
      resolve?.(true);
    },
  };
}

/** A TCP round trip: `payload` written, answered by the first bytes back (an echo server's, or Redis's +PONG to PING). */
export async function tcpHop(port: number, pid: number | undefined, payload: Buffer = PAYLOAD, name = 'tcp'): Promise<Hop> {
  const socket: Socket = connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  await new Promise((resolve) => socket.once('connect', resolve));
  const reply = replies();
  socket.on('data', reply.answer);
  return { name, serverPid: pid, call: () => (socket.write(payload), reply.wait()), close: () => socket.destroy() };
}

/** A grpc-js unary call and a message on one open bidi stream, to an echo server child (echo-server.ts grpc). */
export function grpcHops(port: number, pid: number | undefined): Hop[] {
  const client = echoClient(port);
  const unary: Call = () =>
    new Promise((resolve, reject) =>
      client.makeUnaryRequest(
        ECHO_SERVICE.unary.path,
        (b: Buffer) => b,
        (b: Buffer) => b,
        PAYLOAD,
        (error) => (error ? reject(error) : resolve(true)),
      ),
    );
  const stream = streamCalls(client);
  return [
    { name: 'grpc unary', serverPid: pid, call: unary, close: () => client.close() },
    { name: 'grpc stream', serverPid: pid, call: stream.call, close: stream.close },
  ];
}

/** Calls on one open grpc-js bidi stream to echo-server.ts's relay (see streamCalls). */
export function relayCaller(port: number): AllowCaller {
  return streamCalls(echoClient(port));
}

function echoClient(port: number): Client {
  const Echo = makeGenericClientConstructor(ECHO_SERVICE, 'Echo');
  return new Echo(`127.0.0.1:${port}`, credentials.createInsecure());
}

/**
 * Calls on one open bidi stream of an echo-server.ts child, any number in
 * flight: the echo, and the relay once its Redis command has answered, answer
 * in order (a stream's messages and one Redis connection's replies both keep
 * theirs), so each answer settles the oldest call waiting.
 */
function streamCalls(client: Client): AllowCaller {
  const stream = client.makeBidiStreamRequest(
    ECHO_SERVICE.stream.path,
    (b: Buffer) => b,
    (b: Buffer) => b,
  ) as ClientDuplexStream<Buffer, Buffer>;
  const waiting: Array<{ resolve: (allowed: boolean) => void; reject: (error: Error) => void }> = [];
  stream.on('data', () => waiting.shift()?.resolve(true));
  stream.on('error', (error: Error) => waiting.splice(0).forEach((call) => call.reject(error)));
  return {
    call: () =>
      new Promise((resolve, reject) => {
        waiting.push({ resolve, reject });
        stream.write(PAYLOAD);
      }),
    close: () => (stream.end(), client.close()),
  };
}
