// Child process for the benches' floors (bench/hop-floor.ts, bench/limiters-run.ts,
// bench/cpu-breakdown.ts): echoes bytes back, nothing else, so a bench measures
// what the hops cost on this machine by themselves.
//   echo-server.js tcp    a TCP socket that writes back what it reads
//   echo-server.js grpc   grpc-js (no nice-grpc) with a unary and a bidi-streaming echo
//   echo-server.js relay REDIS_URL   the same, but each stream message is echoed
//                         once one Redis command (HINCRBY of a per-user hash) has
//                         answered: two hops with nothing of the quota service
//                         between them, the floor of its path (bench/limiters-run.ts)
import { createServer as createTcpServer } from 'node:net';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { Redis } from 'ioredis';
import { ECHO_SERVICE } from './echo-service.js';
import { failStart, serveUntilParentLeaves } from './lifecycle.js';

async function main(): Promise<void> {
  const kind = process.argv[2];
  if (kind === 'tcp') {
    const server = createTcpServer((socket) => {
      socket.setNoDelay(true);
      socket.on('data', (bytes) => socket.write(bytes));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    serveUntilParentLeaves(address.port, () => new Promise((resolve) => server.close(() => resolve())));
    return;
  }
  if (kind !== 'grpc' && kind !== 'relay') throw new Error(`usage: echo-server.ts tcp|grpc|relay REDIS_URL, got ${String(kind)}`);
  const relay = kind === 'relay' ? relayThroughRedis(process.argv[3]) : undefined;
  const server = new Server();
  server.addService(ECHO_SERVICE, {
    unary: (call: { request: Buffer }, callback: (error: null, bytes: Buffer) => void) => callback(null, call.request),
    stream: (call: NodeJS.ReadWriteStream & { end(): void }) => {
      if (relay === undefined) call.on('data', (bytes: Buffer) => call.write(bytes));
      else call.on('data', (bytes: Buffer) => void relay(bytes).then((same) => call.write(same)));
      call.on('end', () => call.end());
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  serveUntilParentLeaves(port, () => new Promise((resolve) => server.tryShutdown(() => resolve())));
}

/** RELAY_USERS per-user hashes, one HINCRBY each message, as a fixed window counts a call; the reply is the message itself. */
const RELAY_USERS = 10_000;

function relayThroughRedis(url: string | undefined): (bytes: Buffer) => Promise<Buffer> {
  if (url === undefined) throw new Error('usage: echo-server.ts relay REDIS_URL');
  // As the quota service talks to Redis: one connection, no auto-pipelining.
  const redis = new Redis(url, { enableAutoPipelining: false });
  let user = 0;
  return async (bytes) => {
    user = (user + 1) % RELAY_USERS;
    await redis.hincrby(`relay:{user-${user}}`, 'c', 1);
    return bytes;
  };
}

main().catch(failStart);
