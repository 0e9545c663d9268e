// Child process for bench/hop-floor.ts: echoes bytes back, nothing else, so the
// bench measures what one loopback hop costs on this machine by itself.
//   echo-server.js tcp    a TCP socket that writes back what it reads
//   echo-server.js grpc   grpc-js (no nice-grpc) with a unary and a bidi-streaming echo
import { createServer as createTcpServer } from 'node:net';
import { Server, ServerCredentials } from '@grpc/grpc-js';
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
  if (kind !== 'grpc') throw new Error(`usage: echo-server.ts tcp|grpc, got ${String(kind)}`);
  const server = new Server();
  server.addService(ECHO_SERVICE, {
    unary: (call: { request: Buffer }, callback: (error: null, bytes: Buffer) => void) => callback(null, call.request),
    stream: (call: NodeJS.ReadWriteStream & { end(): void }) => {
      call.on('data', (bytes: Buffer) => call.write(bytes));
      call.on('end', () => call.end());
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  serveUntilParentLeaves(port, () => new Promise((resolve) => server.tryShutdown(() => resolve())));
}

main().catch(failStart);
