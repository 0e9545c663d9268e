import { Writable } from 'node:stream';
import { Server as GrpcServer } from '@grpc/grpc-js';
import { QuotaServiceDefinition } from '@quota-service/contract';
import { createChannel, createClient } from 'nice-grpc';
import { describe, expect, it, vi } from 'vitest';
import { QuotaEngine } from '../../src/engine/engine.js';
import { RawUnaryCall } from '../../src/grpc/raw-unary.js';
import { createLogger } from '../../src/logger.js';
import { startQuotaServer } from '../../src/quota-server.js';
import { MemoryStore } from '../../src/store/memory.js';
import { shippedPolicies } from '../support/quota-service.js';

// The lean path takes unary calls off the HTTP/2 stream through a private grpc-js method
// (src/grpc/raw-streams.ts). A grpc-js without it must not break the service: it says so once
// and serves those calls through the middleware. (This file's grpc-js is its own: vitest loads
// the modules of each test file apart.)

describe('a grpc-js without the stream handler the lean path wraps', () => {
  it('logs a warning at start and serves Allow through the middleware', async () => {
    const prototype = GrpcServer.prototype as unknown as Record<string, unknown>;
    const streamHandler = prototype['_streamHandler'];
    delete prototype['_streamHandler'];
    const lines: string[] = [];
    const logger = createLogger('info', new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }));
    const server = await startQuotaServer({ engine: new QuotaEngine(await shippedPolicies(), new MemoryStore()), address: '127.0.0.1:0', logger });
    server.setServing(true);
    const channel = createChannel(`127.0.0.1:${server.port}`);
    const run = vi.spyOn(RawUnaryCall.prototype as unknown as { run(request: unknown): void }, 'run');
    try {
      const decision = await createClient(QuotaServiceDefinition, channel).allow({ policy: 'orders', identity: { user: 'fallback' } });
      expect(decision.allowed).toBe(true);
      expect(run).not.toHaveBeenCalled();
      expect(lines.filter((line) => line.includes('no stream hook'))).toHaveLength(1);
    } finally {
      run.mockRestore();
      channel.close();
      await server.shutdown(1_000);
      prototype['_streamHandler'] = streamHandler;
    }
  });
});
