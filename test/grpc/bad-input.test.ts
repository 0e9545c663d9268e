import { ClientError, Status } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AllowRequest } from '@quota-service/contract';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { startTestService, type TestService } from '../support/quota-service.js';

let redis: RedisServer;
let service: TestService;
beforeAll(async () => {
  redis = await startRedisServer();
  service = await startTestService(new RedisStore(redis.client()));
});
afterAll(async () => {
  await service?.stop();
  await redis?.stop();
});

const ok: Partial<AllowRequest> = { policy: 'orders', identity: { user: '42' } };
const { INVALID_ARGUMENT, NOT_FOUND } = Status;

// [case, request, status, message the caller sees: it names the field]
const cases: [string, Partial<AllowRequest>, Status, RegExp][] = [
  ['empty policy', { ...ok, policy: '' }, INVALID_ARGUMENT, /^policy: must not be empty$/],
  ['unknown policy', { ...ok, policy: 'nope' }, NOT_FOUND, /^policy: no policy named "nope"$/],
  ['missing identity part', { ...ok, identity: { tenant: 'acme' } }, INVALID_ARGUMENT, /^identity\.user: required by limit "orders" of policy "orders"$/],
  ['empty id', { ...ok, identity: { user: '' } }, INVALID_ARGUMENT, /^identity\.user: must not be empty$/],
  ['id over 256 bytes', { ...ok, identity: { user: 'x'.repeat(257) } }, INVALID_ARGUMENT, /^identity\.user: must be at most 256 bytes, got 257$/],
  ['id over 256 bytes in UTF-8', { ...ok, identity: { user: 'é'.repeat(129) } }, INVALID_ARGUMENT, /^identity\.user: must be at most 256 bytes, got 258$/],
  ['id with a newline', { ...ok, identity: { user: 'a\nb' } }, INVALID_ARGUMENT, /^identity\.user: must not contain control characters$/],
  ['id with NUL', { ...ok, identity: { user: 'a\u0000' } }, INVALID_ARGUMENT, /^identity\.user: must not contain control characters$/],
  ['id with DEL', { ...ok, identity: { user: '\u007f' } }, INVALID_ARGUMENT, /^identity\.user: must not contain control characters$/],
  ['negative cost', { ...ok, cost: -1 }, INVALID_ARGUMENT, /^cost: must not be negative, got -1$/],
  ['NaN cost', { ...ok, cost: Number.NaN }, INVALID_ARGUMENT, /^cost: must be a finite number, got NaN$/],
  ['infinite cost', { ...ok, cost: Number.POSITIVE_INFINITY }, INVALID_ARGUMENT, /^cost: must be a finite number, got Infinity$/],
  ['-infinite cost', { ...ok, cost: Number.NEGATIVE_INFINITY }, INVALID_ARGUMENT, /^cost: must be a finite number/],
  ['cost below the smallest unit', { ...ok, cost: 5e-324 }, INVALID_ARGUMENT, /^cost: must be 0 \(one unit\) or at least 0\.000001, got 5e-324$/],
  ['cost just below the smallest unit', { ...ok, cost: 0.0000009 }, INVALID_ARGUMENT, /^cost: must be 0 \(one unit\) or at least 0\.000001, got 9e-7$/],
  [
    'cost above capacity',
    { ...ok, cost: 10.5 },
    INVALID_ARGUMENT,
    /^cost: 10\.5 exceeds the bucket's capacity of 10, so it could never be granted \(limit "orders" of policy "orders"\)$/,
  ],
  ['cost above a window limit', { policy: 'user', identity: { user: '42' }, cost: 121 }, INVALID_ARGUMENT, /^cost: 121 exceeds the window's limit of 120/],
  [
    'fractional cost on a window',
    { policy: 'user', identity: { user: '42' }, cost: 1.5 },
    INVALID_ARGUMENT,
    /^cost: must be a whole number for a fixed window, got 1\.5/,
  ],
  ['request_id with control characters', { ...ok, requestId: 'r\t1' }, INVALID_ARGUMENT, /^request_id: must not contain control characters$/],
  ['policy name of 1 MiB', { ...ok, policy: 'p'.repeat(2 ** 20) }, INVALID_ARGUMENT, /^policy: must be at most 64 characters, got 1048576$/],
  ['policy name of 65 characters', { ...ok, policy: 'p'.repeat(65) }, INVALID_ARGUMENT, /^policy: must be at most 64 characters, got 65$/],
  [
    'unused identity part of 1 MiB',
    { ...ok, identity: { user: '42', note: 'x'.repeat(2 ** 20) } },
    INVALID_ARGUMENT,
    /^identity\.note: must be at most 256 bytes, got 1048576$/,
  ],
  [
    'unused identity part with NUL',
    { ...ok, identity: { user: '42', note: 'a\u0000' } },
    INVALID_ARGUMENT,
    /^identity\.note: must not contain control characters$/,
  ],
  [
    'identity part name of 1 MiB',
    { ...ok, identity: { user: '42', ['k'.repeat(2 ** 20)]: 'v' } },
    INVALID_ARGUMENT,
    /^identity: a part name must be 1-64 lowercase letters, digits, "_", "\." or "-", starting with a letter or digit \(got 1048576 characters\)$/,
  ],
  [
    'identity part name with NUL',
    { ...ok, identity: { user: '42', 'u\u0000': 'v' } },
    INVALID_ARGUMENT,
    /^identity: a part name must be 1-64 lowercase letters/,
  ],
  ['request_id over 256 bytes', { ...ok, requestId: 'r'.repeat(300) }, INVALID_ARGUMENT, /^request_id: must be at most 256 bytes, got 300$/],
];

describe('bad input: a clear status naming the field, and no key written', () => {
  it.each(cases)('%s', async (_name, request, status, message) => {
    const error = await service.client.allow(request).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ClientError);
    expect((error as ClientError).code).toBe(status);
    expect((error as ClientError).details).toMatch(message);
    expect(await redis.client().dbsize()).toBe(0);
  });

  it('keeps serving valid requests afterwards, and the edges of the valid range pass', async () => {
    expect((await service.client.allow({ ...ok, identity: { user: 'x'.repeat(256) } })).allowed).toBe(true);
    expect((await service.client.allow({ ...ok, identity: { user: 'é'.repeat(128) } })).allowed).toBe(true);
    expect((await service.client.allow({ ...ok, cost: 10 })).allowed).toBe(true);
    expect((await service.client.allow({ ...ok, cost: 0, identity: { user: 'zero' } })).limits[0]?.remaining).toBe(9);
    expect(await redis.client().dbsize()).toBe(4);
  });
});
