import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Policies whose numbers hold still during a test: a day window changes only
 * at midnight UTC, and a bucket refilling one token per 1000 s stays spent.
 * `orders` is the shipped one (refills 2/s).
 */
export const FIXTURE_POLICIES = `
policies:
  orders:
    description: Order creation.
    failure_mode: local
    local_share: 0.5
    limits:
      - name: orders
        key_by: user
        algorithm: token_bucket
        capacity: 10
        refill_per_second: 2
  daily:
    description: A hundred a day per user.
    limits:
      - name: daily
        key_by: user
        algorithm: fixed_window
        limit: 100
        window: day
  scarce:
    description: Five, then one per 1000 s.
    failure_mode: fail_closed
    limits:
      - name: scarce
        key_by: user
        algorithm: token_bucket
        capacity: 5
        refill_per_second: 0.001
  team:
    description: A user's and a tenant's daily limits.
    limits:
      - name: team-user
        key_by: user
        algorithm: fixed_window
        limit: 50
        window: day
      - name: team-tenant
        key_by: tenant
        algorithm: sliding_window_counter
        limit: 500
        window: hour
`;

/** The fixture policies written to a temp file; `remove` deletes it. */
export function writeFixturePolicies(): { path: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'quotactl-policies-'));
  const path = join(dir, 'policies.yaml');
  writeFileSync(path, FIXTURE_POLICIES);
  return { path, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
