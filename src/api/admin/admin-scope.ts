import { PermissionDeniedError, type PolicySet, quoteCapped } from '@quota-service/core';
import type { OverrideRecord } from '../../overrides/override.js';
import { type AdminCaller, valueDigest } from './audit.js';

/**
 * How an admin's `policies` bound the overrides it may touch. An override
 * names a limit, and a limit (one name, one state) may be used by several
 * policies: an override changes the decisions of every one of them. So a
 * caller may set, get or delete the overrides of a limit only when every
 * policy that uses it is on its list, as it may reset only a policy on its
 * list. A limit that no policy on its list uses is refused the same way as
 * one no policy has, so that the answer does not tell which limits exist.
 * A caller of every policy (`['*']`, or no caller authentication) is not
 * bounded.
 */
export type LimitReach = 'all' | 'some' | 'none';

/** How many of the policies that use `limit` the caller may act on: all of them, some, or none (also when no policy uses it). */
export function limitReach(policies: PolicySet, caller: AdminCaller, limit: string): LimitReach {
  const allowed = caller.policies;
  if (allowed === undefined) return 'all';
  let inside = 0;
  let outside = 0;
  for (const policy of policies.values()) {
    if (!policy.limits.some((l) => l.name === limit)) continue;
    if (allowed.has(policy.name)) inside++;
    else outside++;
  }
  return inside === 0 ? 'none' : outside === 0 ? 'all' : 'some';
}

/** PERMISSION_DENIED unless the caller may act on every policy that uses `limit`. */
export function checkMayOverride(policies: PolicySet, caller: AdminCaller, limit: string): void {
  const reach = limitReach(policies, caller, limit);
  if (reach === 'all') return;
  throw new PermissionDeniedError(
    reach === 'none'
      ? `caller "${caller.name}" may not use limit ${quoteCapped(limit)}: no policy on its list uses it`
      : `caller "${caller.name}" may not override limit ${quoteCapped(limit)}: a policy outside its list uses it too`,
  );
}

/** PERMISSION_DENIED when no policy on the caller's list uses `limit` (ListOverrides of one limit). */
export function checkMaySee(policies: PolicySet, caller: AdminCaller, limit: string): void {
  if (limitReach(policies, caller, limit) === 'none') checkMayOverride(policies, caller, limit);
}

/** An override as ListOverrides shows it to one caller: `value` empty and `valueSha256` set when it may not see the value. */
export interface ListedOverride extends OverrideRecord {
  readonly valueSha256: string;
}

/**
 * The overrides a caller may see, in their order: those of limits some
 * policy on its list uses. The value is in clear where it may manage the
 * override, else replaced by its digest (as the audit log writes it): such a
 * value may be an API key or personal data of a policy it may not use.
 */
export function visibleOverrides(policies: PolicySet, caller: AdminCaller, records: readonly OverrideRecord[]): ListedOverride[] {
  const reach = new Map<string, LimitReach>();
  const out: ListedOverride[] = [];
  for (const record of records) {
    let of = reach.get(record.limit);
    if (of === undefined) {
      of = limitReach(policies, caller, record.limit);
      reach.set(record.limit, of);
    }
    if (of === 'all') out.push({ ...record, valueSha256: '' });
    else if (of === 'some') out.push({ ...record, value: '', valueSha256: valueDigest(record.value) });
  }
  return out;
}
