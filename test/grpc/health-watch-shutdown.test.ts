import { createChannel, createClient } from 'nice-grpc';
import { HealthDefinition } from 'nice-grpc-server-health';
import { describe, expect, it } from 'vitest';
import { QuotaEngine } from '../../src/engine/engine.js';
import { startQuotaServer } from '../../src/quota-server.js';
import { createLogger } from '../../src/logger.js';
import { MemoryStore } from '../../src/store/memory.js';
import { shippedPolicies } from '../support/quota-service.js';

/**
 * An open Health/Watch does not hold the shutdown: it gets NOT_SERVING and
 * ends at once, on the main port and on the health-only port, and the
 * server stops long before its grace period.
 */
const SERVING = 1;
const NOT_SERVING = 2;
const GRACE_MS = 3_000;

describe('Health/Watch during shutdown', () => {
  it('watches on both ports get NOT_SERVING and end; the shutdown does not wait for its grace period', async () => {
    const server = await startQuotaServer({
      engine: new QuotaEngine(await shippedPolicies(), new MemoryStore()),
      address: '127.0.0.1:0',
      healthAddress: '127.0.0.1:0',
      logger: createLogger('silent'),
    });
    server.setServing(true);
    const channels = [createChannel(`127.0.0.1:${server.port}`), createChannel(`127.0.0.1:${server.healthPort}`)];
    try {
      const watches = channels.map((channel) => {
        const seen: number[] = [];
        let firstSeen: () => void = () => {};
        const first = new Promise<void>((resolve) => (firstSeen = resolve));
        const ended = (async () => {
          for await (const { status } of createClient(HealthDefinition, channel).watch({ service: '' })) {
            seen.push(status);
            firstSeen();
          }
          return 'ended';
        })().catch((error: unknown) => `failed: ${String(error)}`);
        return { seen, first, ended };
      });
      await Promise.all(watches.map((watch) => watch.first));

      const started = performance.now();
      await server.shutdown(GRACE_MS);
      const tookMs = performance.now() - started;

      for (const watch of watches) {
        expect(await watch.ended).toBe('ended');
        expect(watch.seen).toEqual([SERVING, NOT_SERVING]);
      }
      expect(tookMs).toBeLessThan(GRACE_MS / 2);
    } finally {
      for (const channel of channels) channel.close();
    }
  });
});
