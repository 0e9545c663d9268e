import { Writable } from 'node:stream';
import { Client, credentials, Metadata as GrpcMetadata, status } from '@grpc/grpc-js';
import { type AllowRequest, AllowStreamRequest, QuotaServiceDefinition } from '@quota-service/contract';
import { createChannel, createClient, Metadata } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parseCallers } from '../../src/config/callers.js';
import { QuotaEngine } from '../../src/engine/engine.js';
import { createLogger } from '../../src/logger.js';
import { startQuotaServer, type QuotaServer } from '../../src/quota-server.js';
import { MemoryStore } from '../../src/store/memory.js';
import { type AllowStreamProbe, openAllowStream } from '../support/allow-stream-probe.js';
import { SERVING_PATHS, shippedPolicies } from '../support/quota-service.js';

// AllowStream is served on the lean path (src/grpc/lean-stream.ts) by default, and through
// nice-grpc's middleware with `lean: false`. Each case here runs on both, and both must end the
// same way, with the same answers and the same debug lines.

const TOKEN = 'lean-stream-token-3e8b1f6a9c2d4075';
const CALLERS = `
callers:
  api:
    token: ${TOKEN}
    policies: [orders]
`;

interface Served {
  server: QuotaServer;
  port: number;
  client: ReturnType<typeof createClient<typeof QuotaServiceDefinition>>;
  channel: ReturnType<typeof createChannel>;
  lines: string[];
}

async function serve(lean: boolean): Promise<Served> {
  const lines: string[] = [];
  const logger = createLogger('debug', new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }));
  const server = await startQuotaServer({
    engine: new QuotaEngine(await shippedPolicies(), new MemoryStore()),
    address: '127.0.0.1:0',
    logger,
    callers: parseCallers(CALLERS),
    lean,
  });
  server.setServing(true);
  const channel = createChannel(`127.0.0.1:${server.port}`);
  return { server, port: server.port, channel, client: createClient(QuotaServiceDefinition, channel), lines };
}

const order = (user: string, policy = 'orders'): AllowRequest => ({ policy, identity: { user }, cost: 1, requestId: '', deadlineMs: 0, sentAtUnixMs: 0 });
const withToken = { metadata: Metadata({ authorization: `Bearer ${TOKEN}` }) };

interface Ended {
  ended: string;
  answers: unknown[];
}

/** How a probe's stream ended, and its answers without what moves with the clock (a bucket's refill). */
async function endOf(probe: AllowStreamProbe): Promise<Ended> {
  const ended = await probe.ended;
  const answers = probe.answers.map((answer) => ({
    id: answer.id,
    results: answer.results.map(
      (result) => result.error ?? { allowed: result.response?.allowed, remaining: result.response?.limits.map((l) => Math.floor(l.remaining)) },
    ),
  }));
  return { ended, answers };
}

/**
 * A stream with a deadline (grpc-timeout), sent by grpc-js's own client: a
 * batch, then nothing, so the deadline ends it. The code it ended with.
 */
function withDeadline(port: number, ms: number): Promise<Ended> {
  const client = new Client(`127.0.0.1:${port}`, credentials.createInsecure());
  const metadata = new GrpcMetadata();
  metadata.set('authorization', `Bearer ${TOKEN}`);
  const call = client.makeBidiStreamRequest(
    '/quota.v1.QuotaService/AllowStream',
    (b: Buffer) => b,
    (b: Buffer) => b,
    metadata,
    { deadline: Date.now() + ms },
  );
  const answers: unknown[] = [];
  call.on('data', (bytes: Buffer) => answers.push(bytes.length > 0));
  call.on('error', () => {});
  call.write(Buffer.from(AllowStreamRequest.encode({ id: 1, requests: [order('d')] }).finish()));
  return new Promise((resolve) =>
    call.on('status', (s) => {
      client.close();
      // The details are the client's own (it keeps the deadline too): the code is what is compared.
      resolve({ ended: status[s.code], answers });
    }),
  );
}

function callLines(served: Served): unknown[] {
  return served.lines
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.method === '/quota.v1.QuotaService/AllowStream')
    .map(({ time: _time, pid: _pid, hostname: _hostname, ms: _ms, ...rest }) => rest);
}

const CASES: Array<[name: string, lines: number, run: (served: Served) => Promise<Ended>]> = [
  [
    'two batches with a token, then the caller ends: answered, OK',
    2,
    async ({ client }) => {
      const probe = openAllowStream(client, withToken);
      probe.send(1, [order('a'), order('a', 'user')]);
      await probe.answer(1);
      probe.send(2, [order('a')]);
      await probe.answer(2);
      probe.end();
      return endOf(probe);
    },
  ],
  [
    'no token: UNAUTHENTICATED, nothing answered',
    2,
    ({ client }) => {
      const probe = openAllowStream(client);
      probe.send(1, [order('b')]);
      return endOf(probe);
    },
  ],
  [
    'a batch over the bound after one answered: INVALID_ARGUMENT',
    2,
    async ({ client }) => {
      const probe = openAllowStream(client, withToken);
      probe.send(1, [order('c')]);
      await probe.answer(1);
      probe.send(
        2,
        Array.from({ length: 1001 }, (_, i) => order(`c${i}`)),
      );
      return endOf(probe);
    },
  ],
  ['the caller’s deadline passes with the stream open: DEADLINE_EXCEEDED, after the answer', 1, ({ port }) => withDeadline(port, 300)],
];

describe('AllowStream on the lean path answers as through the middleware', () => {
  const served = new Map<boolean, Served>();
  beforeAll(async () => {
    for (const [, lean] of SERVING_PATHS) served.set(lean, await serve(lean));
  });
  afterAll(async () => {
    for (const { channel, server } of served.values()) {
      channel.close();
      await server.shutdown(1_000);
    }
  });

  it.each(CASES)('%s', async (_name, lines, run) => {
    const outcomes = [];
    for (const [, lean] of SERVING_PATHS) {
      const one = served.get(lean)!;
      one.lines.length = 0;
      const ended = await run(one);
      // The last line is written as the handler ends, which may be just after the caller saw the status.
      await vi.waitFor(() => expect(callLines(one).length).toBeGreaterThanOrEqual(lines));
      outcomes.push({ ...ended, lines: callLines(one) });
    }
    expect(outcomes[0]).toEqual(outcomes[1]);
    expect(outcomes[0]!.lines).toHaveLength(lines);
  });
});
