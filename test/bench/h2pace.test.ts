// The rate limit service bench's open-loop pacer (bench/tools/h2pace.c, run by bench/h2pace.ts)
// against a real HTTP/2 server in this process: each call leaves at its own time, not in bursts,
// and each is counted by the gRPC status it ended with.
import { once } from 'node:events';
import { createServer, type Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grpcFrame } from '../../bench/h2load.js';
import { buildH2pace, h2paceOpenLoop } from '../../bench/h2pace.js';
import { percentile } from '../../bench/stats.js';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The server's view: when each call arrived (ms, this process's clock), in order. */
const arrivals: number[] = [];
let server: Http2Server;

beforeAll(async () => {
  server = createServer();
  server.on('stream', (stream) => {
    const index = arrivals.push(performance.now()) - 1;
    stream.resume();
    stream.on('end', () => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      // Every third call past its deadline (DEADLINE_EXCEEDED), the others OK.
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': index % 3 === 2 ? '4' : '0' }));
      stream.end(grpcFrame(new Uint8Array(0)));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

describe('h2pace', () => {
  it('sends each call at its own time and counts them by their gRPC status', async () => {
    const binary = await buildH2pace(REPO_ROOT);
    if (binary === undefined) throw new Error('h2pace did not build: make h2pace installs what it needs (a C compiler, libnghttp2-dev)');
    const rate = 200;
    const { port } = server.address() as AddressInfo;
    const result = await h2paceOpenLoop(binary, port, '/test.Service/Call', grpcFrame(new Uint8Array(3)), rate, 1, ['grpc-timeout: 20m']);
    expect(result.sent).toBe(rate);
    expect(arrivals).toHaveLength(rate);
    expect(result.timedOut).toBe(Math.floor(rate / 3));
    expect(result.errors).toBe(0);
    expect(result.p50).toBeGreaterThan(0);
    // 5 ms apart: h2load's rate mode would send two calls at once every 10 ms.
    const gaps = arrivals
      .slice(1)
      .map((at, i) => at - arrivals[i]!)
      .sort((a, b) => a - b);
    expect(percentile(gaps, 50)).toBeGreaterThan(3.5);
    expect(percentile(gaps, 50)).toBeLessThan(6.5);
    expect(gaps.filter((gap) => gap < 1).length).toBeLessThan(gaps.length / 5);
  });
});
