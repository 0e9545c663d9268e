import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { jsonLines, quotactl } from '../../support/quotactl.js';
import { startServiceProcess } from '../../support/service-process.js';

// `quotactl validate` is offline, and must say what the service would say:
// each broken file is also given to a real service process, whose start-up
// refusal must carry the very same message.

const dir = mkdtempSync(join(tmpdir(), 'quotactl-validate-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

const BROKEN = {
  'bad YAML': 'policies:\n  orders: [unclosed\n',
  'bad fields': `
policies:
  orders:
    limits:
      - name: orders
        key_by: user
        algorithm: token_bucket
        capacity: -3
        refill_per_second: 2
      - name: per-minute
        key_by: user
        algorithm: fixed_window
        limit: 10
        window: fortnight
`,
  'a local share too small to grant one unit': `
policies:
  tiny:
    failure_mode: local
    local_share: 0.01
    limits:
      - name: tiny
        key_by: user
        algorithm: token_bucket
        capacity: 10
        refill_per_second: 1
`,
};

/** What the service prints when it refuses to start with the policy file `path`. */
async function serviceRefusal(path: string): Promise<string> {
  const service = startServiceProcess({ QUOTA_POLICIES: path });
  const code = await service.exit;
  expect(code).toBe(1);
  return service.output().stderr;
}

describe('quotactl validate', () => {
  it('a good file: exit 0, its policies named', async () => {
    const text = await quotactl(['validate', 'config/policies.yaml']);
    expect(text).toEqual({
      code: 0,
      stdout: 'valid config/policies.yaml: 7 policies (orders, orders.create, orders.in-flight.user, orders.in-flight, user, tenant, ip)\n',
      stderr: '',
    });
    const json = await quotactl(['--json', 'validate', 'config/policies.yaml']);
    expect(json.code).toBe(0);
    expect(jsonLines(json.stdout)).toEqual([
      { file: 'config/policies.yaml', valid: true, policies: ['orders', 'orders.create', 'orders.in-flight.user', 'orders.in-flight', 'user', 'tenant', 'ip'] },
    ]);
  });

  it.each(Object.entries(BROKEN))(
    '%s: exit 1 with the message the service gives at start-up',
    async (name, yaml) => {
      const path = file(`${name.replaceAll(' ', '-')}.yaml`, yaml);
      const [checked, refusal] = await Promise.all([quotactl(['validate', path]), serviceRefusal(path)]);
      expect(checked.code).toBe(1);
      expect(checked.stdout).toBe('');
      expect(checked.stderr).toMatch(new RegExp(`^${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: invalid`));
      expect(refusal).toBe(`quota-service: ${checked.stderr}`);

      const json = await quotactl(['--json', 'validate', path]);
      expect(json.code).toBe(1);
      expect(jsonLines(json.stdout)).toEqual([{ file: path, valid: false, error: checked.stderr.replace(/\n$/, '') }]);
    },
    60_000,
  );

  it('every problem of a file is named by policy and field', async () => {
    const { stderr } = await quotactl(['validate', file('fields.yaml', BROKEN['bad fields'])]);
    expect(stderr).toMatch(/policies\.orders\.limits\[0\]\.capacity: /);
    expect(stderr).toMatch(/policies\.orders\.limits\[1\]\.window: /);
  });

  it('needs no service and ignores connection settings', async () => {
    const { code } = await quotactl(['validate', 'config/policies.yaml'], { env: { QUOTACTL_ADDR: '127.0.0.1:1', QUOTACTL_CA: '/nonexistent/ca.crt' } });
    expect(code).toBe(0);
  });
});
