import { BinaryWriter } from '@bufbuild/protobuf/wire';
import { Status } from 'nice-grpc';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { SetOverrideResponse } from '@quota-service/contract';
import { ADMIN_TOKEN, VIEWER_TOKEN, writeAdminFixture } from '../../clients/quotactl/admin-fixture.js';
import { useServiceProcess } from '../../clients/quotactl/service.js';
import { RawQuotaClient } from '../../support/raw-requests.js';

/**
 * SetOverride's 64-bit integers (ttl_ms, a fixed window's limit) beyond
 * ±(2^53 - 1), which no JavaScript number holds exactly: sent as raw bytes
 * to a real service process with caller authentication, they are refused
 * with INVALID_ARGUMENT naming the field and the value, and the refusal is
 * audited like any other.
 */
const fixture = writeAdminFixture();
afterAll(() => fixture.remove());
const service = useServiceProcess(() => fixture.env);

const SET_OVERRIDE = '/quota.v1.QuotaAdminService/SetOverride';
const MAX_INT64 = '9223372036854775807';

/** A SetOverride of the `daily` limit (a fixed window) for user `value`, with the given 64-bit fields as sent. */
function setOverride(value: string, fields: { limit?: string; ttlMs?: string }): Uint8Array {
  const writer = new BinaryWriter();
  // key: { limit: "daily", match: OVERRIDE_MATCH_EXACT, value }
  writer.uint32(10).fork().uint32(10).string('daily').uint32(16).int32(1).uint32(26).string(value).join();
  // parameters: { fixed_window: { limit } }
  if (fields.limit !== undefined) writer.uint32(18).fork().uint32(90).fork().uint32(8).int64(fields.limit).join().join();
  if (fields.ttlMs !== undefined) writer.uint32(24).int64(fields.ttlMs);
  writer.uint32(34).string('int64 range test');
  return writer.finish();
}

let client: RawQuotaClient | undefined;
afterEach(() => client?.close());
const call = (token: string, request: Uint8Array) => {
  client = new RawQuotaClient(service.address(), token);
  return client.unary(SET_OVERRIDE, request, (bytes) => SetOverrideResponse.decode(bytes));
};

describe('SetOverride with 64-bit integers out of range', () => {
  it.each([
    { name: 'ttl_ms of 2^63 - 1', value: 'ttl-max', fields: { limit: '200', ttlMs: MAX_INT64 }, field: 'ttl_ms', sent: MAX_INT64 },
    { name: 'ttl_ms of 2^53', value: 'ttl-2p53', fields: { limit: '200', ttlMs: '9007199254740992' }, field: 'ttl_ms', sent: '9007199254740992' },
    { name: 'ttl_ms of -2^63', value: 'ttl-min', fields: { limit: '200', ttlMs: '-9223372036854775808' }, field: 'ttl_ms', sent: '-9223372036854775808' },
    {
      name: 'a fixed window limit of 2^63 - 1',
      value: 'limit-max',
      fields: { limit: MAX_INT64, ttlMs: '60000' },
      field: 'parameters.fixed_window.limit',
      sent: MAX_INT64,
    },
  ])('$name: INVALID_ARGUMENT naming $field, and an audit line', async ({ value, fields, field, sent }) => {
    const outcome = await call(ADMIN_TOKEN, setOverride(value, fields));
    const why = `${field}: ${sent} is out of range: integers here go from -9007199254740991 to 9007199254740991 (2^53 - 1)`;
    expect(outcome).toEqual({ ok: false, code: Status.INVALID_ARGUMENT, details: why });
    const line = JSON.parse(await service.process().logged(new RegExp(`^(?=.*"msg":"admin override\\.set refused")(?=.*"why":"${field}: ${sent} ).*`)));
    expect(line).toMatchObject({
      component: 'audit',
      caller: 'support',
      outcome: 'refused',
      code: 'INVALID_ARGUMENT',
      why,
      target: { limit: 'daily', match: 'exact' },
    });
  });

  it('the largest number that fits is decoded and checked as usual; the same fields in range set the override', async () => {
    const tooLong = await call(ADMIN_TOKEN, setOverride('ttl-fits', { limit: '200', ttlMs: '9007199254740991' }));
    expect(tooLong).toMatchObject({
      ok: false,
      code: Status.INVALID_ARGUMENT,
      details: expect.stringMatching(/^ttl_ms: must be a whole number of milliseconds/),
    });
    const set = await call(ADMIN_TOKEN, setOverride('in-range', { limit: '200', ttlMs: '60000' }));
    expect(set).toMatchObject({ ok: true, value: { current: { parameters: { fixedWindow: { limit: 200 } } } } });
  });

  it('a caller without the admin role is refused for that first, whatever the request holds', async () => {
    const outcome = await call(VIEWER_TOKEN, setOverride('viewer', { limit: MAX_INT64, ttlMs: MAX_INT64 }));
    expect(outcome).toMatchObject({ ok: false, code: Status.PERMISSION_DENIED });
  });
});
