import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { createNetworkNamespace, netnsSupport } from './netns.js';
import { startRedisServer } from './redis-server.js';

const support = netnsSupport();
const ip = (...args: string[]) => spawnSync('ip', args, { encoding: 'utf8' });

describe.skipIf(!support.ok)(`network namespaces for fault tests${support.ok ? '' : ` (skipped: ${support.reason})`}`, () => {
  it('two at once get their own names and /30s; a partition makes packets vanish (a timeout, no refusal), a heal brings the same connection back', async () => {
    const one = createNetworkNamespace();
    const two = createNetworkNamespace();
    try {
      expect(one.name).not.toBe(two.name);
      expect(one.prefix).not.toBe(two.prefix);
      const redis = await startRedisServer({ netns: one });
      try {
        expect(redis.url).toBe(`redis://${one.address}:${redis.port}`);
        const client = redis.client();
        client.options.commandTimeout = 300;
        expect(await client.ping()).toBe('PONG');

        one.partition();
        expect(one.partitioned).toBe(true);
        // The route stays on the link (marked linkdown): nothing leaves the machine.
        expect(ip('route', 'get', one.address).stdout).toMatch(new RegExp(`^${one.address.replaceAll('.', '\\.')} dev qf`));
        const started = performance.now();
        await expect(client.ping()).rejects.toThrow(/timed out/i);
        expect(performance.now() - started).toBeGreaterThanOrEqual(250);

        one.heal();
        // TCP retransmits the PING it holds, and the connection carries on.
        client.options.commandTimeout = 10_000;
        expect(await client.ping()).toBe('PONG');
      } finally {
        await redis.stop();
      }
    } finally {
      one.destroy();
      two.destroy();
    }
    expect(ip('netns', 'list').stdout).not.toContain(one.name);
    expect(ip('-4', 'addr', 'show').stdout).not.toContain(`${one.hostAddress}/30`);
    expect(ip('route', 'show', 'type', 'blackhole').stdout).not.toContain(one.prefix.replace('/30', ''));
  });
});
