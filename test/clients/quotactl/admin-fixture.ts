import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tokenSha256 } from '../../../src/config/callers.js';
import { type QuotactlResult, quotactl } from '../../support/quotactl.js';

/** A support desk's token: its caller has the admin role. */
export const ADMIN_TOKEN = 'support-desk-admin-token-7f3a91c2e5b84d06';
/** A caller that may use every policy but has no admin role. */
export const VIEWER_TOKEN = 'dashboard-viewer-token-1b8e4c7a90d3f256';
/** An admin of the policy `daily` only, whose limit `daily-team` uses too. */
export const DAILY_ADMIN_TOKEN = 'daily-desk-admin-token-3e6a9d2c5f8b1470';

/**
 * Policies whose numbers hold still during a test: a bucket refilling one
 * token per 1000 s stays spent, a day window changes only at midnight UTC.
 * `api` has plans: a `pro` customer's bucket holds 20.
 */
export const ADMIN_POLICIES = `
policies:
  api:
    description: A customer's API calls.
    limits:
      - name: api
        key_by: customer
        algorithm: token_bucket
        capacity: 5
        refill_per_second: 0.001
        plan_by: plan
        plans:
          pro:
            capacity: 20
  daily:
    description: A hundred a day per user.
    limits:
      - name: daily
        key_by: user
        algorithm: fixed_window
        limit: 100
        window: day
  daily-team:
    description: The same hundred a day, for a team's users.
    limits:
      - name: daily
        key_by: user
        algorithm: fixed_window
        limit: 100
        window: day
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

/**
 * The callers file: `support` has the admin role, `dashboard` does not (both
 * may use every policy); `daily-desk` is an admin of the policy `daily` alone.
 */
const CALLERS = `
callers:
  support:
    token_sha256: ${tokenSha256(ADMIN_TOKEN)}
    policies: ['*']
    roles: [admin]
  dashboard:
    token: ${VIEWER_TOKEN}
    policies: ['*']
  daily-desk:
    token: ${DAILY_ADMIN_TOKEN}
    policies: [daily]
    roles: [admin]
`;

/** The policy and callers files in a temp dir, and the service's environment for them. */
export function writeAdminFixture(): { dir: string; env: Record<string, string>; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'quotactl-admin-'));
  writeFileSync(join(dir, 'policies.yaml'), ADMIN_POLICIES);
  writeFileSync(join(dir, 'callers.yaml'), CALLERS);
  return {
    dir,
    env: { QUOTA_POLICIES: join(dir, 'policies.yaml'), QUOTA_AUTH_TOKENS: join(dir, 'callers.yaml') },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * quotactl against the service at `address()` as the caller of `token` (none:
 * no QUOTACTL_TOKEN), `admin` as the support desk; every run is kept in
 * `outputs`, for a test to check that none printed a token.
 */
export function quotactlAs(address: () => string) {
  const outputs: QuotactlResult[] = [];
  async function as(token: string | undefined, args: readonly string[], options: { tty?: boolean } = {}): Promise<QuotactlResult> {
    const env: Record<string, string> = { QUOTACTL_ADDR: address(), ...(token !== undefined && { QUOTACTL_TOKEN: token }) };
    const result = await quotactl(args, { env, ...options });
    outputs.push(result);
    return result;
  }
  const admin = (args: readonly string[], options?: { tty?: boolean }) => as(ADMIN_TOKEN, args, options);
  return { as, admin, outputs };
}

/** A limit as `quotactl --json peek` (and reset) reports it. */
export interface LimitJson {
  name: string;
  limit: number;
  remaining: number;
  applied: string;
  plan?: string;
}

/** An override as `quotactl --json overrides` reports it. */
export interface OverrideJson {
  limit: string;
  match: string;
  value: string;
  keyBy: string;
  algorithm: string;
  parameters: Record<string, number | string>;
  expiresAtMs: number;
  reason: string;
  setBy: string;
  setAtMs: number;
}
