import { describe, expect, it } from 'vitest';
import { parseRlsConfig, parseRlsFile, RlsConfigError } from '../../../src/api/envoy/rls-config.js';
import { matchRule } from '../../../src/api/envoy/rls-match.js';
import { projected } from '../../../src/api/envoy/rls-rules.js';
import { README_EXAMPLES } from './rls-configs.js';

/** The configuration loader and the matcher: pure, no store, no server. */
const domain = (text: string) => parseRlsFile(text, 'test.yaml');
const entries = (...pairs: [string, string][]) => pairs.map(([key, value]) => ({ key, value }));

describe('loading envoyproxy/ratelimit files', () => {
  it('loads every README example as it is, one domain per file', () => {
    const config = parseRlsConfig(new Map(Object.entries(README_EXAMPLES)));
    expect([...config.domains.keys()].sort()).toEqual([
      'edge_proxy_per_ip',
      'example4',
      'example6',
      'example7',
      'example8',
      'example9',
      'internal',
      'messaging',
      'mongo_cps',
    ]);
  });

  it('units in any case, week to year as fixed windows of 7, 30 and 365 days', () => {
    const d = domain(
      'domain: u\ndescriptors:\n  - key: a\n    rate_limit: { unit: WEEK, requests_per_unit: 3 }\n  - key: b\n    rate_limit: { unit: Month, requests_per_unit: 3 }\n',
    );
    expect(matchRule(d.root, entries(['a', 'x']))?.limit?.params).toEqual({ limit: 3, window: 604_800_000 });
    expect(matchRule(d.root, entries(['b', 'x']))?.limit?.params).toEqual({ limit: 3, window: 2_592_000_000 });
  });

  it('a failure mode per domain, error by default; local needs its share', () => {
    expect(domain('domain: a\n').policy.failure).toEqual({ mode: 'error', localShare: 1 });
    expect(domain('domain: a\nfailure_mode: local\nlocal_share: 0.5\n').policy.failure).toEqual({ mode: 'local', localShare: 0.5 });
    expect(() => domain('domain: a\nfailure_mode: local\n')).toThrow(/local_share: required with failure_mode local/);
  });

  it.each([
    [
      'an unknown unit',
      'domain: edge\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n        value: c\n        rate_limit: { unit: fortnight, requests_per_unit: 1 }\n',
      'test.yaml: domain "edge": descriptor "a.b_c" (descriptors[0].descriptors[0]) rate_limit.unit: must be one of second, minute, hour, day, week, month, year',
    ],
    [
      'an unknown key',
      'domain: edge\ndescriptors:\n  - key: a\n    rate_limt: { unit: second }\n',
      'test.yaml: domain "edge": descriptor "a" (descriptors[0])',
    ],
    [
      'unlimited with a unit',
      'domain: edge\ndescriptors:\n  - key: a\n    rate_limit: { unlimited: true, unit: second }\n',
      'rate_limit.unit: must not be given with unlimited: true',
    ],
    ['an empty key', 'domain: edge\ndescriptors:\n  - key: ""\n', 'descriptors[0]) key: must not be empty'],
    ['no domain', 'descriptors: []\n', 'test.yaml: no domain: domain:'],
    [
      'the same key and value twice',
      'domain: edge\ndescriptors:\n  - key: a\n    value: b\n  - key: a\n    value: b\n',
      'descriptor "a_b" (descriptors[1]): the same key and value twice at one level',
    ],
    [
      'replaces naming itself',
      'domain: edge\ndescriptors:\n  - key: a\n    rate_limit: { name: n, unit: second, requests_per_unit: 1, replaces: [{ name: n }] }\n',
      "replaces names the rule's own name",
    ],
    [
      'rate_limit and limit both',
      'domain: edge\ndescriptors:\n  - key: a\n    rate_limit: { unit: second, requests_per_unit: 1 }\n    limit: { algorithm: gcra, capacity: 1, refill_per_second: 1 }\n',
      'give rate_limit or limit, not both',
    ],
    [
      'spend_when_over without a limit',
      'domain: edge\ndescriptors:\n  - key: a\n    spend_when_over: true\n',
      'spend_when_over: only meaningful on a descriptor with rate_limit or limit',
    ],
    [
      'spend_when_over on a shadow rule',
      'domain: edge\ndescriptors:\n  - key: a\n    shadow_mode: true\n    spend_when_over: true\n    rate_limit: { unit: second, requests_per_unit: 1 }\n',
      'spend_when_over: a shadow rule never spends over its limit',
    ],
    [
      'a window that is no length',
      'domain: edge\ndescriptors:\n  - key: a\n    limit: { algorithm: fixed_window, limit: 1, window: 5 parsecs }\n',
      'limit.window: must be a unit',
    ],
  ])('%s: refused, naming the file, the domain and the descriptor', (_what, text, message) => {
    expect(() => domain(text)).toThrow(RlsConfigError);
    expect(() => domain(text)).toThrow(message);
  });

  it('a domain in two files is refused, naming both', () => {
    expect(() =>
      parseRlsConfig(
        new Map([
          ['a.yaml', 'domain: x\n'],
          ['b.yaml', 'domain: x\n'],
        ]),
      ),
    ).toThrow('b.yaml: domain "x" is also configured in a.yaml');
  });
});

describe('matching, as envoyproxy/ratelimit matches', () => {
  const d = domain(`domain: m
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 10 }
  - key: remote_address
    value: 50.0.0.5
    rate_limit: { unit: second, requests_per_unit: 0 }
  - key: path
    value: /api/*/items
    rate_limit: { unit: minute, requests_per_unit: 7 }
  - key: path
    value: /api/*
    rate_limit: { unit: minute, requests_per_unit: 8 }
  - key: a
    value: b
    descriptors:
      - key: c
        rate_limit: { unit: hour, requests_per_unit: 1 }
`);
  it('exact value before wildcard before key alone', () => {
    expect(matchRule(d.root, entries(['remote_address', '50.0.0.5']))?.blocks).toBe(true);
    expect(matchRule(d.root, entries(['remote_address', '50.0.0.6']))?.report.requestsPerUnit).toBe(10);
  });
  it('wildcards anywhere in the value, the first in file order wins', () => {
    expect(matchRule(d.root, entries(['path', '/api/v1/items']))?.report.requestsPerUnit).toBe(7);
    expect(matchRule(d.root, entries(['path', '/api/v1/other']))?.report.requestsPerUnit).toBe(8);
    expect(matchRule(d.root, entries(['path', '/other']))).toBeUndefined();
  });
  it('a rule applies at the last entry only', () => {
    expect(matchRule(d.root, entries(['a', 'b'], ['c', 'x']))?.path).toBe('a_b.c');
    expect(matchRule(d.root, entries(['a', 'b']))).toBeUndefined();
    expect(matchRule(d.root, entries(['a', 'b'], ['c', 'x'], ['e', 'f']))).toBeUndefined();
    expect(matchRule(d.root, entries(['remote_address', '1.2.3.4'], ['c', 'x']))).toBeUndefined();
  });
});

describe('current_limit for our algorithms (Envoy knows N per unit)', () => {
  it.each([
    [{ algorithm: 'fixed_window', limit: 100, window: 60_000 }, 100, 2],
    [{ algorithm: 'fixed_window', limit: 100, window: 90_000 }, 4000, 3],
    [{ algorithm: 'sliding_window_log', limit: 3, window: 86_400_000 * 7 }, 3, 7],
    [{ algorithm: 'token_bucket', capacity: 10, refill_per_second: 2 }, 2, 1],
    [{ algorithm: 'token_bucket', capacity: 10, refill_per_second: 0.5 }, 30, 2],
    [{ algorithm: 'gcra', capacity: 10, refill_per_second: 0.0001 }, 8, 4],
    [{ algorithm: 'leaky_bucket', capacity: 10, leak_per_second: 1.5 }, 1, 1],
  ])('%j: %i per unit %i', (definition, requestsPerUnit, unit) => {
    expect(projected({ replaces: [], ...definition } as never)).toEqual({ requestsPerUnit, unit });
  });
});
