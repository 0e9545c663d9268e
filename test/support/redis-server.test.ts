import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from 'node:net';
import { startRedisServer, type RedisServer } from './redis-server.js';

describe('test harness: redis-server', () => {
  let first: RedisServer;
  let second: RedisServer;
  beforeAll(async () => {
    [first, second] = await Promise.all([startRedisServer(), startRedisServer()]);
  });
  afterAll(async () => {
    await Promise.all([first?.stop(), second?.stop()]);
  });

  it('starts independent servers on free loopback ports', async () => {
    expect(first.port).not.toBe(second.port);
    await first.client().set('k', 'one');
    expect(await second.client().get('k')).toBeNull();
  });

  it('stops the process so its port refuses connections', async () => {
    const server = await startRedisServer();
    expect(await server.client().ping()).toBe('PONG');
    await server.stop();
    const refused = await new Promise<string>((resolve) => {
      const socket = connect(server.port, '127.0.0.1');
      socket.once('connect', () => socket.destroy() && resolve('connected'));
      socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
    });
    expect(refused).toBe('ECONNREFUSED');
  });
});
