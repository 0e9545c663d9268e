/**
 * Redis key layout. One place builds every key so that the layout can be
 * read, documented (docs/keys.md) and tested in one spot.
 *
 *   rl:v1:<limit>:<key_by>:{<encoded identity>}        token bucket, GCRA, leaky bucket, sliding windows
 *   rl:v1:<limit>:<key_by>:{<encoded identity>}:minute:<yyyymmddHHMM>   fixed window
 *   rl:v1:req:<policy>:<key_by>:{<encoded identity>}:<identity parts>:<encoded request id>  remembered decision (idempotent Allow)
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
 * Where a decision made with a request id is remembered: beside the keys of
 * the identity the request's first script call touches (same hash tag, so the
 * same slot and the same script call), per policy, whole identity
 * (identityParts) and request id: the same id sent for another identity is
 * another request.
 */
export function requestKey(policyName: string, keyBy: string, identityValue: string, identityParts: string, requestId: string): string {
  return `${KEY_PREFIX}:req:${policyName}:${keyBy}:{${encodeIdentityValue(identityValue)}}:${identityParts}:${encodeURIComponent(requestId)}`;
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
