// channelOptions reach the channel: with round_robin over two real service
// instances behind one target, calls spread over both; with grpc-js's default
// (pick_first) they all go to one. Decisions are counted by each instance's engine.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQuotaClient, type QuotaClient } from '@quota-service/client';
import { MemoryStore } from '../../src/store/memory.js';
import { startTestService, type TestService } from '../support/quota-service.js';

const ROUND_ROBIN = { 'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }) };

describe('quota client channel options', () => {
  const decided = [0, 0];
  const services: TestService[] = [];
  const clients: QuotaClient[] = [];
  // One target naming both instances: what a DNS name of a headless Service resolves to.
  const target = () => `ipv4:${services.map((s) => `127.0.0.1:${s.server.port}`).join(',')}`;

  beforeAll(async () => {
    for (const i of [0, 1]) {
      services.push(await startTestService(new MemoryStore(), undefined, { onDecision: () => decided[i]!++ }));
    }
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await Promise.all(services.map((s) => s.stop()));
  });

  const callsPerInstance = async (channelOptions?: Record<string, string>) => {
    decided.fill(0);
    const client = createQuotaClient({ address: target(), deadlineMs: 5_000, batch: false, ...(channelOptions ? { channelOptions } : {}) });
    clients.push(client);
    // One call at a time: each picks its connection on its own.
    for (let i = 0; i < 40; i++) {
      expect(await client.allow({ policy: 'user', identity: { user: `u${i}` } })).toMatchObject({ source: 'store' });
    }
    return [...decided];
  };

  it('round_robin from channelOptions spreads calls over every instance', async () => {
    const [a, b] = await callsPerInstance(ROUND_ROBIN);
    expect(a! + b!).toBe(40);
    // Round robin alternates once both connections are ready; allow for the first calls before that.
    expect(Math.min(a!, b!)).toBeGreaterThanOrEqual(10);
  });

  it('without it (grpc-js pick_first) every call goes to one instance', async () => {
    const counts = await callsPerInstance();
    expect(counts.sort()).toEqual([0, 40]);
  });
});
