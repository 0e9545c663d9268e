import type { Redis } from 'ioredis';

/**
 * Could Redis drop quota state before it expires? An evicted
 * bucket comes back full and grants extra tokens, silently. Only `noeviction`
 * rules that out: allkeys-* may evict any key, and volatile-* picks among keys
 * with a TTL, which every quota key has.
 */
export type EvictionRisk =
  | { readonly status: 'safe'; readonly policies: Readonly<Record<string, string>> }
  | { readonly status: 'at_risk'; readonly policies: Readonly<Record<string, string>>; readonly message: string }
  /** CONFIG is disabled or refused (common on managed Redis): nobody knows, so say so. */
  | { readonly status: 'unknown'; readonly message: string };

const SAFE_POLICY = 'noeviction';

/** Reads maxmemory-policy on every node given (every master of a cluster); never throws. */
export async function checkEviction(nodes: ReadonlyMap<string, Redis>): Promise<EvictionRisk> {
  const policies: Record<string, string> = {};
  try {
    for (const [name, node] of nodes) {
      const reply = (await node.config('GET', 'maxmemory-policy')) as unknown;
      const policy = Array.isArray(reply) ? reply[1] : undefined;
      if (typeof policy !== 'string') throw new Error(`unexpected CONFIG GET reply: ${JSON.stringify(reply)}`);
      policies[name] = policy;
    }
  } catch (error) {
    return {
      status: 'unknown',
      message: `could not read maxmemory-policy (CONFIG disabled, e.g. on managed Redis?): ${(error as Error).message}; make sure it is ${SAFE_POLICY}`,
    };
  }
  if (nodes.size === 0) return { status: 'unknown', message: 'no Redis node to ask for maxmemory-policy' };
  const risky = Object.entries(policies).filter(([, policy]) => policy !== SAFE_POLICY);
  if (risky.length === 0) return { status: 'safe', policies };
  const named = [...new Set(risky.map(([, policy]) => policy))].join(', ');
  return {
    status: 'at_risk',
    policies,
    message:
      `maxmemory-policy ${named} on ${risky.map(([node]) => node).join(', ')} may evict quota state under memory pressure; ` +
      `an evicted bucket comes back full and grants extra requests. Use ${SAFE_POLICY} (or a Redis of its own for quota state)`,
  };
}
