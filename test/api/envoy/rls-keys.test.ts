import { parsePolicies } from '@quota-service/core';
import { expect, it } from 'vitest';
import { QuotaEngine } from '../../../src/engine/engine.js';
import { parseRlsConfig } from '../../../src/api/envoy/rls-config.js';
import { decideRls } from '../../../src/api/envoy/rls-decide.js';
import { memoryFixture } from '../../support/store-fixtures.js';

/**
 * The state keys of Envoy's rate limit service, exactly (docs/keys.md): a
 * change to them is a change of the state layout, which needs a new version
 * segment. Pinned here so that moving where they are built cannot change them.
 */
const config = parseRlsConfig(
  new Map([
    [
      'k.yaml',
      `domain: my/domain
descriptors:
  - key: ip
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: path
    value: /a:b
    descriptors:
      - key: user
        limit: { algorithm: token_bucket, capacity: 5, refill_per_second: 1 }
  - key: week
    rate_limit: { unit: week, requests_per_unit: 5 }
`,
    ],
  ]),
);

it('rule, nested rule, week and override keys', async () => {
  const f = memoryFixture();
  const engine = new QuotaEngine(parsePolicies('policies: {}\n'), f.store);
  const one = (entries: [string, string][], limit?: { requests_per_unit: number; unit: number }) =>
    decideRls(
      engine,
      config,
      { domain: 'my/domain', descriptors: [{ entries: entries.map(([key, value]) => ({ key, value })), limit }], hits_addend: 1 },
      5_000,
    );
  await one([['ip', '10.0.0.1']]);
  await one([
    ['path', '/a:b'],
    ['user', 'a{b}'],
  ]);
  await one([['week', 'w']]);
  await one([['ip', '10.0.0.2']], { requests_per_unit: 3, unit: 3 });
  expect(await f.keys()).toEqual(
    [
      'rl:v1:rls:my%2Fdomain:rule:ip:fixed_window:{ip=10.0.0.1}:minute',
      'rl:v1:rls:my%2Fdomain:rule:path=%2Fa%3Ab/user:token_bucket:{path=%2Fa%3Ab,user=a%7Bb%7D}',
      'rl:v1:rls:my%2Fdomain:rule:week:fixed_window:{week=w}:604800000ms',
      'rl:v1:rls:my%2Fdomain:override:fixed_window:{ip=10.0.0.2}:hour',
    ].sort(),
  );
  await engine.failure.close();
});
