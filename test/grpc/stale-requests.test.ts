import { ClientError, Status } from 'nice-grpc';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AllowRequest, QuotaServiceClient } from '@quota-service/contract';
import { startTestService, type TestService } from '../support/quota-service.js';
import { openAllowStream } from '../support/allow-stream-probe.js';
import type { StoreFixture } from '../support/store-fixtures.js';
import { bothStores, useRedisServer } from '../support/use-redis.js';

/**
 * Requests that arrive after their caller gave up, through every door of
 * QuotaService that decides: a send time (sent_at_unix_ms) older than the
 * connection's quickest delivery by more than its deadline_ms is what a link
 * that held the request for that long delivers. (test/faults/late-delivery.test.ts
 * holds a real link.) The service's default allowance: none.
 */
const redis = useRedisServer();
/** The clock the quota client stamps requests with; this process's, as the service's here. */
const clientNow = () => performance.timeOrigin + performance.now();
const order = (user: string, extra: Partial<AllowRequest> = {}): AllowRequest => ({
  policy: 'orders',
  identity: { user },
  cost: 0,
  requestId: '',
  deadlineMs: 0,
  sentAtUnixMs: 0,
  ...extra,
});
/** Sent now, its caller waiting 250 ms. */
const fresh = (user: string) => order(user, { deadlineMs: 250, sentAtUnixMs: clientNow() });
/** Sent 5 s ago by a caller that waited 250 ms: held by a link that was down. */
const held = (user: string) => order(user, { deadlineMs: 250, sentAtUnixMs: clientNow() - 5_000 });
const LATE =
  /^(requests\[\d+\]: )?arrived \d+ ms later than the quickest request of its connection, too late for its answer to reach its caller in time \(deadline_ms 250\): not decided, nothing spent$/;

describe.each(bothStores(redis))('requests whose caller gave up, on the %s store', (_name, makeFixture) => {
  let fixture: StoreFixture;
  let service: TestService;
  let client: QuotaServiceClient;
  beforeAll(async () => {
    fixture = makeFixture();
    service = await startTestService(fixture.store);
    client = service.client;
    // The connection's quickest delivery so far: what later requests are measured against.
    await client.allow(fresh('warm'));
  });
  afterAll(async () => {
    await service?.stop();
  });
  afterEach(async () => {
    await fixture.reset();
  });

  const tokens = async (user: string) => (await fixture.tokenBucket(`rl:v1:orders:user:{${user}}`))?.tokens ?? 10;

  it('AllowStream: a late item fails alone with DEADLINE_EXCEEDED and spends nothing; the stream goes on', async () => {
    const stream = openAllowStream(client);
    stream.send(1, [fresh('s')]);
    expect((await stream.answer(1)).results[0]?.response?.allowed).toBe(true);
    // A late item beside a fresh one and one from a client that sends no times (decided whenever it comes).
    stream.send(2, [held('s'), fresh('s'), order('s'), held('s')]);
    const { results } = await stream.answer(2);
    expect(results.map((r) => r.error?.code ?? r.response?.limits[0]?.remaining)).toEqual([Status.DEADLINE_EXCEEDED, 8, 7, Status.DEADLINE_EXCEEDED]);
    expect(results[0]!.error!.message).toMatch(LATE);
    expect(results[0]!.error!.message).toMatch(/^requests\[0\]: /);
    expect(results[3]!.error!.message).toMatch(/^requests\[3\]: /);
    stream.send(3, [fresh('s')]);
    expect((await stream.answer(3)).results[0]?.response?.limits[0]?.remaining).toBe(6);
    stream.end();
    expect(await stream.ended).toBe('OK');
    expect(await tokens('s')).toBe(6);
  });

  it('AllowBatch: a late item fails alone with DEADLINE_EXCEEDED and spends nothing', async () => {
    const { results } = await client.allowBatch({ requests: [fresh('b'), held('b'), order('b')] });
    expect(results.map((r) => r.error?.code ?? r.response?.limits[0]?.remaining)).toEqual([9, Status.DEADLINE_EXCEEDED, 8]);
    expect(results[1]!.error!.message).toMatch(LATE);
    expect(await tokens('b')).toBe(8);
  });

  it('Allow: a late request fails with DEADLINE_EXCEEDED and spends nothing', async () => {
    const error = await client.allow(held('a')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ClientError);
    expect([(error as ClientError).code, (error as ClientError).details]).toEqual([Status.DEADLINE_EXCEEDED, expect.stringMatching(LATE)]);
    expect(await fixture.keys()).toEqual([]);
    expect((await client.allow(fresh('a'))).limits[0]?.remaining).toBe(9);
  });

  it('a request late by less than half its deadline is decided; by more, refused: its answer needs the way back', async () => {
    const tooLateToAnswer = order('w', { deadlineMs: 5_000, sentAtUnixMs: clientNow() - 4_000 });
    await expect(client.allow(tooLateToAnswer)).rejects.toMatchObject({ code: Status.DEADLINE_EXCEEDED });
    const lateButWaiting = order('w', { deadlineMs: 5_000, sentAtUnixMs: clientNow() - 2_000 });
    expect((await client.allow(lateButWaiting)).limits[0]?.remaining).toBe(9);
    const { results } = await client.allowBatch({ requests: [lateButWaiting] });
    expect(results[0]?.response?.limits[0]?.remaining).toBe(8);
  });
});
