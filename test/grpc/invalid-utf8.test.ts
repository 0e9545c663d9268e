// Strings on the wire that are not valid UTF-8. Decoded leniently, `61 ff`,
// `61 fe` and `61 e2 82` all become "a\uFFFD" and would share that identity's
// quota; they are refused instead, naming the field, and write nothing. The
// text "a\uFFFD" itself is valid UTF-8 and keeps a quota of its own. Requests
// are encoded byte by byte (test/support/raw-requests.ts) and sent to a real
// server deciding in a real Redis.
import { Status } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AllowBatchResponse, AllowResponse, AllowStreamResponse, GetQuotaResponse } from '@quota-service/contract';
import { parseCallers } from '../../src/config/callers.js';
import { QuotaEngine } from '../../src/engine/engine.js';
import { startQuotaServer, type QuotaServer } from '../../src/quota-server.js';
import { createLogger } from '../../src/logger.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { shippedPolicies } from '../support/quota-service.js';
import {
  encodeAllowBatchRequest,
  encodeAllowRequest,
  encodeAllowStreamRequest,
  RawQuotaClient,
  type RawAllowRequest,
  type RawOutcome,
} from '../support/raw-requests.js';

const bytes = (...values: number[]) => new Uint8Array(values);
/** Invalid UTF-8 that a lenient decoder turns into "a\uFFFD": a stray byte, another, a truncated sequence. */
const INVALID_A = [bytes(0x61, 0xff), bytes(0x61, 0xfe), bytes(0x61, 0xe2, 0x82)];
/** More invalid forms: an overlong NUL, an encoded surrogate, a lone continuation byte. */
const INVALID_OTHER = [bytes(0xc0, 0x80), bytes(0xed, 0xa0, 0x80), bytes(0x80)];
const VALID_A = 'a\uFFFD';
const TOKEN = 'order-api-token-5d1c9e7a3b8f2e60';

let redis: RedisServer;
let server: QuotaServer;
let client: RawQuotaClient;
beforeAll(async () => {
  redis = await startRedisServer();
  const store = new RedisStore(redis.client());
  server = await startQuotaServer({ engine: new QuotaEngine(await shippedPolicies(), store), address: '127.0.0.1:0', logger: createLogger('silent') });
  await store.ready();
  server.setServing(true);
  client = new RawQuotaClient(`127.0.0.1:${server.port}`);
});
afterAll(async () => {
  client?.close();
  await server?.shutdown(0);
  await redis?.stop();
});

const orders = (user: string | Uint8Array, extra: Partial<RawAllowRequest> = {}): RawAllowRequest => ({
  policy: 'orders',
  identity: [['user', user]],
  ...extra,
});
const allow = (request: RawAllowRequest) => client.unary('Allow', encodeAllowRequest(request), AllowResponse.decode);
const getQuota = (request: RawAllowRequest) => client.unary('GetQuota', encodeAllowRequest(request), GetQuotaResponse.decode);
const refused = (details: string): RawOutcome<never> => ({ ok: false, code: Status.INVALID_ARGUMENT, details });
const keys = () => redis.client().keys('*');

describe('strings that are not valid UTF-8: INVALID_ARGUMENT naming the field, nothing written', () => {
  it('an identity value in any invalid form is refused, and the valid "a\\uFFFD" keeps its full quota', async () => {
    for (const user of [...INVALID_A, ...INVALID_OTHER]) {
      expect(await allow(orders(user, { cost: 10 }))).toEqual(refused('identity.user: not valid UTF-8'));
      expect(await getQuota(orders(user))).toEqual(refused('identity.user: not valid UTF-8'));
    }
    expect(await keys()).toEqual([]);
    // Nothing was spent for "a\uFFFD": all 10 are there, and a spend of 10 is allowed.
    const quota = await getQuota(orders(VALID_A));
    expect(quota.ok && quota.value.limits[0]?.remaining).toBe(10);
    const spent = await allow(orders(VALID_A, { cost: 10 }));
    expect(spent.ok && spent.value.allowed).toBe(true);
    expect(await keys()).toHaveLength(1);
    // The invalid forms are still refused, not denied for the quota "a\uFFFD" spent.
    for (const user of INVALID_A) expect(await allow(orders(user))).toEqual(refused('identity.user: not valid UTF-8'));
    expect(await keys()).toHaveLength(1);
    await redis.client().flushall();
  });

  it('the policy, an identity part name and the request id too, on Allow and GetQuota', async () => {
    const policy = bytes(0x6f, 0x72, 0xff);
    expect(await allow({ policy, identity: [['user', 'u1']] })).toEqual(refused('policy: not valid UTF-8'));
    expect(await getQuota({ policy, identity: [['user', 'u1']] })).toEqual(refused('policy: not valid UTF-8'));
    const partName = bytes(0x75, 0xff);
    expect(
      await allow({
        policy: 'orders',
        identity: [
          ['user', 'u1'],
          [partName, 'v'],
        ],
      }),
    ).toEqual(refused('identity: a part name is not valid UTF-8'));
    expect(
      await getQuota({
        policy: 'orders',
        identity: [
          ['user', 'u1'],
          [partName, 'v'],
        ],
      }),
    ).toEqual(refused('identity: a part name is not valid UTF-8'));
    // Two ids a lenient decoder makes one: the second would replay the first's decision.
    expect(await allow(orders('u1', { requestId: bytes(0x72, 0xff) }))).toEqual(refused('request_id: not valid UTF-8'));
    expect(await allow(orders('u1', { requestId: bytes(0x72, 0xfe) }))).toEqual(refused('request_id: not valid UTF-8'));
    expect(await keys()).toEqual([]);
    // Valid non-ASCII text everywhere is decided as usual.
    const decided = await allow(orders('ünïcödé', { requestId: 'récépissé-1' }));
    expect(decided.ok && decided.value.allowed).toBe(true);
    await redis.client().flushall();
  });

  it('AllowBatch: only the invalid items fail, each naming its field the way other item errors do', async () => {
    const answer = await client.unary(
      'AllowBatch',
      encodeAllowBatchRequest([
        orders('batch-ok'),
        orders(INVALID_A[0]!, { cost: 10 }),
        orders('batch-ok', { requestId: bytes(0x72, 0xff) }),
        { policy: bytes(0xff), identity: [['user', 'batch-ok']] },
        orders(VALID_A, { cost: 10 }),
      ]),
      AllowBatchResponse.decode,
    );
    expect(answer.ok).toBe(true);
    const results = answer.ok ? answer.value.results : [];
    expect(results.map((result) => result.error)).toEqual([
      undefined,
      { code: Status.INVALID_ARGUMENT, message: 'requests[1].identity.user: not valid UTF-8' },
      { code: Status.INVALID_ARGUMENT, message: 'requests[2].request_id: not valid UTF-8' },
      { code: Status.INVALID_ARGUMENT, message: 'requests[3].policy: not valid UTF-8' },
      undefined,
    ]);
    expect(results[0]?.response?.allowed).toBe(true);
    expect(results[4]?.response?.allowed).toBe(true);
    expect(results[4]?.response?.limits[0]?.remaining).toBe(0);
    // One key per valid identity: "batch-ok" and "a\uFFFD".
    expect(await keys()).toHaveLength(2);
    await redis.client().flushall();
  });

  it('AllowStream: the same per request, and the stream goes on', async () => {
    const { answers, code } = await client.stream(
      [
        encodeAllowStreamRequest(1, [orders(INVALID_A[1]!, { cost: 10 }), orders('stream-ok')]),
        encodeAllowStreamRequest(2, [
          {
            policy: 'orders',
            identity: [
              [bytes(0xfe), 'v'],
              ['user', 'stream-ok'],
            ],
          },
          orders(VALID_A, { cost: 10 }),
        ]),
      ],
      AllowStreamResponse.decode,
    );
    expect(code).toBe(Status.OK);
    const byId = new Map(answers.map((answer) => [answer.id, answer.results]));
    expect(byId.get(1)?.map((result) => result.error ?? result.response?.allowed)).toEqual([
      { code: Status.INVALID_ARGUMENT, message: 'requests[0].identity.user: not valid UTF-8' },
      true,
    ]);
    expect(byId.get(2)?.map((result) => result.error ?? result.response?.allowed)).toEqual([
      { code: Status.INVALID_ARGUMENT, message: 'requests[0].identity: a part name is not valid UTF-8' },
      true,
    ]);
    expect(await keys()).toHaveLength(2);
    await redis.client().flushall();
  });
});

describe('with caller authentication: an invalid policy name is INVALID_ARGUMENT, not PERMISSION_DENIED', () => {
  let authServer: QuotaServer;
  let authClient: RawQuotaClient;
  beforeAll(async () => {
    const store = new RedisStore(redis.client());
    authServer = await startQuotaServer({
      engine: new QuotaEngine(await shippedPolicies(), store),
      address: '127.0.0.1:0',
      logger: createLogger('silent'),
      callers: parseCallers(`callers:\n  order-api:\n    token: ${TOKEN}\n    policies: [orders]\n`),
    });
    authServer.setServing(true);
    authClient = new RawQuotaClient(`127.0.0.1:${authServer.port}`, TOKEN);
  });
  afterAll(async () => {
    authClient?.close();
    await authServer?.shutdown(0);
  });

  it("on Allow, GetQuota, AllowBatch and AllowStream; a policy outside the caller's set is still PERMISSION_DENIED", async () => {
    const invalid = { policy: bytes(0x6f, 0xff), identity: [['user', 'auth'] as [string, string]] };
    expect(await authClient.unary('Allow', encodeAllowRequest(invalid), AllowResponse.decode)).toEqual(refused('policy: not valid UTF-8'));
    expect(await authClient.unary('GetQuota', encodeAllowRequest(invalid), GetQuotaResponse.decode)).toEqual(refused('policy: not valid UTF-8'));
    const batch = await authClient.unary('AllowBatch', encodeAllowBatchRequest([invalid, orders('auth')]), AllowBatchResponse.decode);
    expect(batch.ok && batch.value.results.map((result) => result.error ?? result.response?.allowed)).toEqual([
      { code: Status.INVALID_ARGUMENT, message: 'requests[0].policy: not valid UTF-8' },
      true,
    ]);
    const stream = await authClient.stream([encodeAllowStreamRequest(7, [invalid, orders('auth')])], AllowStreamResponse.decode);
    expect(stream.answers[0]?.results.map((result) => result.error ?? result.response?.allowed)).toEqual([
      { code: Status.INVALID_ARGUMENT, message: 'requests[0].policy: not valid UTF-8' },
      true,
    ]);
    expect(await authClient.unary('Allow', encodeAllowRequest({ policy: 'user', identity: [['user', 'auth']] }), AllowResponse.decode)).toEqual({
      ok: false,
      code: Status.PERMISSION_DENIED,
      details: 'caller "order-api" may not use policy "user"',
    });
    expect(await keys()).toHaveLength(1);
  });
});
