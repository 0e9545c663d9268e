// A listen address that cannot be bound stops the start like every other bad
// setting: one line on stderr naming the variable, the address and the cause,
// no stack, exit 1, and no port of the service left open.
import { createConnection, createServer, type Server } from 'node:net';
import { Server as GrpcServer, ServerCredentials } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QuotaEngine } from '../src/engine/engine.js';
import { StoreFailurePolicy } from '../src/engine/failure.js';
import { routeGrpcLogs } from '../src/grpc/grpc-js-logs.js';
import { startQuotaServer } from '../src/quota-server.js';
import { ListenError, listenReason } from '../src/listen-error.js';
import { createLogger } from '../src/logger.js';
import { MemoryStore } from '../src/store/memory.js';
import { closedPort } from './support/closed-port.js';
import { shippedPolicies } from './support/quota-service.js';
import { startServiceProcess } from './support/service-process.js';

const IN_USE = 'address in use (another process listens there; choose another port or stop that process)';

/** Whether something accepts connections on 127.0.0.1:port. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** The error a plain Node listen on host:port fails with. */
function listenFailure(host: string, port: number): Promise<Error> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', resolve);
    server.listen(port, host, () => server.close(() => reject(new Error(`${host}:${port} was bound`))));
  });
}

let taken: Server;
let takenPort: number;
/** grpc-js's own log lines, as the service routes them (levels: pino's numbers). */
const grpcLines: { level: number; msg: string }[] = [];
beforeAll(async () => {
  routeGrpcLogs(createLogger('debug', { write: (line: string) => grpcLines.push(JSON.parse(line)) }));
  taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  takenPort = (taken.address() as { port: number }).port;
});
afterAll(() => new Promise<void>((resolve) => taken.close(() => resolve())));

describe('a listen address in use, on a real service process', () => {
  it.each(['QUOTA_GRPC_ADDR', 'QUOTA_METRICS_ADDR', 'QUOTA_HEALTH_ADDR'])('%s: one line naming it, exit 1, no port left open', async (variable) => {
    // Every address on a port known in advance, so the test can see nothing stays open.
    const ports = { QUOTA_GRPC_ADDR: await closedPort(), QUOTA_METRICS_ADDR: await closedPort(), QUOTA_HEALTH_ADDR: await closedPort() };
    const env = Object.fromEntries(Object.entries(ports).map(([name, port]) => [name, `127.0.0.1:${name === variable ? takenPort : port}`]));
    const service = startServiceProcess(env);
    expect(await service.exit).toBe(1);
    const { stdout, stderr } = service.output();
    expect(stderr).toBe(`quota-service: ${variable}: cannot listen on 127.0.0.1:${takenPort}: ${IN_USE}\n`);
    expect(stdout).not.toContain('No address added');
    for (const [name, port] of Object.entries(ports)) if (name !== variable) expect(await listening(port)).toBe(false);
    expect(await listening(takenPort)).toBe(true);
  });
});

describe('startQuotaServer with a health address in use', () => {
  it('throws a ListenError naming the health setting and closes the main port it had bound', async () => {
    const mainPort = await closedPort();
    const failure = new StoreFailurePolicy({ timeoutMs: 1_000, breakerFailures: 5, halfOpenAfterMs: 1_000, logger: createLogger('silent') });
    const started = startQuotaServer({
      engine: new QuotaEngine(await shippedPolicies(), new MemoryStore(), { failure }),
      address: `127.0.0.1:${mainPort}`,
      healthAddress: `127.0.0.1:${takenPort}`,
      logger: createLogger('silent'),
      settingNames: { address: 'QUOTA_GRPC_ADDR', healthAddress: 'QUOTA_HEALTH_ADDR' },
    });
    const error = await started.then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(ListenError);
    expect((error as ListenError).message).toBe(`QUOTA_HEALTH_ADDR: cannot listen on 127.0.0.1:${takenPort}: ${IN_USE}`);
    expect(await listening(mainPort)).toBe(false);
    await failure.close();
  });
});

describe('listenReason: the cause in words, from real bind failures', () => {
  it('a port in use, from Node and from grpc-js', async () => {
    expect(listenReason(await listenFailure('127.0.0.1', takenPort))).toBe(IN_USE);
    const grpc = new GrpcServer();
    const error = await new Promise<Error | null>((resolve) => grpc.bindAsync(`127.0.0.1:${takenPort}`, ServerCredentials.createInsecure(), resolve));
    grpc.forceShutdown();
    expect(error?.message).toMatch(/^No address added/);
    expect(listenReason(error)).toBe(IN_USE);
    // Reported once by the service, naming its variable: grpc-js's own line about it is debug.
    expect(grpcLines).toContainEqual(expect.objectContaining({ level: 20, msg: 'No address added out of total 1 resolved' }));
  });

  it('an address of no local interface (TEST-NET-1)', async () => {
    expect(listenReason(await listenFailure('192.0.2.1', 0))).toMatch(/^no network interface of this machine has that address/);
  });

  it('a host name that does not resolve, through grpc-js', async () => {
    const grpc = new GrpcServer();
    const error = await new Promise<Error | null>((resolve) => grpc.bindAsync('no-such-host.invalid:0', ServerCredentials.createInsecure(), resolve));
    grpc.forceShutdown();
    expect(listenReason(error)).toBe('cannot resolve the host name');
  });

  it('a privileged port (errno EACCES, as Node reports it) and an unknown cause', () => {
    const eacces = Object.assign(new Error('listen EACCES: permission denied 0.0.0.0:80'), { code: 'EACCES' });
    expect(listenReason(eacces)).toBe('permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)');
    expect(listenReason(new Error('listen EMFILE: too many open files'))).toBe('cannot bind (EMFILE)');
  });
});
