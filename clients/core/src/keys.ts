import { fixedWindowKey, WINDOWS, type Window } from './algorithms/fixed-window/model.js';

/**
 * Redis key layout. One place builds every key so that the layout can be
 * read, documented (docs/keys.md) and tested in one spot.
 *
 *   rl:v1:<limit>:<key_by>:{<encoded identity>}        token bucket, GCRA, leaky bucket, sliding windows
 *   rl:v1:<limit>:<key_by>:{<encoded identity>}:<window>   fixed window (`minute`, or a length `900000ms`)
 *   rl:v1:rid:<policy>:<key_by>:{<encoded identity>}:<identity parts>:<encoded request id>  remembered decision and reservation (request_id)
 *   rl:v1:<limit>:<key_by>:{<encoded identity>}        concurrency: a sorted set of leases, member <identity parts>:<encoded request id>
 *   rl:v1:rls:<domain>:rule:<path>:<algorithm>:{<descriptor>}   Envoy's rate limit service, one rule and descriptor value
 *   rl:v1:rls:<domain>:override:fixed_window:{<descriptor>}     the same, under a request's own limit
 *
 * The identity value sits inside a hash tag so that all keys of one identity
 * share a Redis Cluster slot while different identities spread over shards.
 * It is percent-encoded (encodeURIComponent), which is injective and never
 * emits `:`, `{`, `}` or control characters, so no identity can collide with
 * another or move its key to another slot.
 */
export const KEY_PREFIX = 'rl:v1';

/** Limit names and identity part names: they appear raw in keys, so keep them plain. */
export const KEY_SEGMENT_PATTERN = /^[a-z0-9][a-z0-9_.-]{0,63}$/;

/** Exactly the characters encodeURIComponent leaves as they are. */
const UNRESERVED = /^[A-Za-z0-9\-_.!~*'()]*$/;

export function encodeIdentityValue(value: string): string {
  // Most identities (ids, names) need no escaping: a regex test is cheaper
  // than encodeURIComponent building a copy, and the result is the same.
  return UNRESERVED.test(value) ? value : encodeURIComponent(value);
}

/** The key (or key prefix, for windowed algorithms) of one identity under one limit. */
export function identityKey(limitName: string, keyBy: string, identityValue: string): string {
  return `${KEY_PREFIX}:${limitName}:${keyBy}:{${encodeIdentityValue(identityValue)}}`;
}

/**
 * The segment of remembered decisions: `rid`, whose records carry the
 * reservation a settlement needs after the decision's fields. (Records
 * without them lived under `req`: the two never read each other's.)
 */
const REQUEST_SEGMENT = 'rid';

/**
 * Where a decision made with a request id is remembered: beside the keys of
 * the identity the request's first script call touches (same hash tag, so the
 * same slot and the same script call), per policy, whole identity
 * (identityParts) and request id: the same id sent for another identity is
 * another request.
 */
export function requestKey(policyName: string, keyBy: string, identityValue: string, identityParts: string, requestId: string): string {
  return `${KEY_PREFIX}:${REQUEST_SEGMENT}:${policyName}:${keyBy}:{${encodeIdentityValue(identityValue)}}:${identityParts}:${encodeURIComponent(requestId)}`;
}

/**
 * A cross-slot settlement's mark in the slot of one of its later slot groups
 * (src/engine/settle.ts): beside the keys of that group's first limit, as
 * requestKey is beside the first group's. Its presence means that group has
 * been adjusted, so a retried Settle adjusts it once.
 */
export function settlementMarkKey(policyName: string, keyBy: string, identityValue: string, identityParts: string, requestId: string): string {
  return `${KEY_PREFIX}:${REQUEST_SEGMENT}-settled:${policyName}:${keyBy}:{${encodeIdentityValue(identityValue)}}:${identityParts}:${encodeURIComponent(requestId)}`;
}

/**
 * A concurrency lease's member in its identity's lease set: the whole
 * identity (identityPartsSegment) and the request id, so another identity
 * sharing the limit's key_by value, with the same request id, names another
 * lease and can neither release nor renew this one.
 */
export function leaseMember(identityParts: string, requestId: string): string {
  return `${identityParts}:${encodeURIComponent(requestId)}`;
}

/**
 * Every identity part a policy keys by, with its value, as one key segment:
 * `name=value` pairs sorted by name and joined by `,`, values percent-encoded
 * (which escapes `,`, `=` and `:`, so two identities never share a segment).
 */
export function identityPartsSegment(parts: ReadonlyMap<string, string>): string {
  const names = [...parts.keys()].sort();
  let segment = '';
  for (const name of names) segment += `${segment === '' ? '' : ','}${name}=${encodeIdentityValue(parts.get(name)!)}`;
  return segment;
}

/**
 * Runtime overrides (the admin API). Their segment after `rl:v1` starts with
 * `_`, which no limit name and no `rid` can, so no override key can ever be a
 * state key:
 *
 *   rl:v1:_ovr:<limit>:<key_by>:{<encoded identity>}     exact override of one identity (same slot as its state)
 *   rl:v1:_ovr:{_registry}:wildcards                      prefix overrides and their generation
 *   rl:v1:_ovr:{_registry}:exact                          index of the exact overrides, for listing
 *   rl:v1:_ovr:gen                                        the generation, checked by each decision (one node)
 *   rl:v1:_ovr:gen:{<tag>}                                the same, once per cluster slot (slot-tags in the service)
 */
export const OVERRIDE_PREFIX = `${KEY_PREFIX}:_ovr`;

/** The exact override of one identity value under one limit: the hash tag of the identity's own keys. */
export function overrideKey(limitName: string, keyBy: string, identityValue: string): string {
  return `${OVERRIDE_PREFIX}:${limitName}:${keyBy}:{${encodeIdentityValue(identityValue)}}`;
}

/** The exact override key beside a state key built by identityKey (same limit, part and identity). */
export function overrideKeyOf(stateKey: string): string {
  return `${OVERRIDE_PREFIX}${stateKey.slice(KEY_PREFIX.length)}`;
}

export const OVERRIDE_WILDCARDS_KEY = `${OVERRIDE_PREFIX}:{_registry}:wildcards`;
export const OVERRIDE_INDEX_KEY = `${OVERRIDE_PREFIX}:{_registry}:exact`;
export const OVERRIDE_GENERATION_KEY = `${OVERRIDE_PREFIX}:gen`;

/** The generation key of one cluster slot; `tag` hashes to that slot. */
export function overrideGenerationKey(tag: string): string {
  return `${OVERRIDE_GENERATION_KEY}:{${tag}}`;
}

/**
 * Every key one identity's state under one limit can have, whatever the
 * parameters: the identity's key, and a fixed window's counter per named
 * window (`<key>:<window>`) and for the limit's own window when it is a
 * length (`<key>:<ms>ms`). What a reset of the identity removes.
 */
export function stateKeys(identityKeyOfLimit: string, window?: Window): string[] {
  const keys = [identityKeyOfLimit, ...Object.keys(WINDOWS).map((name) => `${identityKeyOfLimit}:${name}`)];
  if (typeof window === 'number') keys.push(fixedWindowKey(identityKeyOfLimit, window));
  return keys;
}

/**
 * Envoy's rate limit service: the prefix of one rule's state keys in one
 * domain (`scope` is `rule:<path>:<algorithm>` or `override:fixed_window`),
 * to which rlsStateKey adds a descriptor's hash tag.
 */
export function rlsKeyPrefix(domain: string, scope: string): string {
  return `${KEY_PREFIX}:rls:${encodeIdentityValue(domain)}:${scope}:`;
}

/**
 * A descriptor's entries as one hash tag's content: `key=value` pairs in
 * request order joined by `,`, each part percent-encoded as identity values
 * are, so `:`, `{`, `}`, `,` and `=` in a value can neither collide two
 * descriptors nor move the key to another slot.
 */
export function rlsDescriptorTag(entries: ReadonlyArray<{ readonly key: string; readonly value: string }>): string {
  let tag = '';
  for (const { key, value } of entries) tag += `${tag === '' ? '' : ','}${encodeIdentityValue(key)}=${encodeIdentityValue(value)}`;
  return tag;
}

/** The state key of one descriptor value under a rule's prefix (rlsKeyPrefix). */
export function rlsStateKey(prefix: string, tag: string): string {
  return `${prefix}{${tag}}`;
}
