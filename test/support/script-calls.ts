import type { Redis } from 'ioredis';

/**
 * Script calls (FCALL + EVALSHA + EVAL) one Redis node ran since its last CONFIG
 * RESETSTAT, from INFO commandstats: what the server saw, not what the client
 * meant to send.
 */
export async function scriptCalls(redis: Redis): Promise<number> {
  const info = await redis.info('commandstats');
  let calls = 0;
  for (const match of info.matchAll(/^cmdstat_(?:fcall|evalsha|eval):calls=(\d+)/gm)) calls += Number(match[1]);
  return calls;
}

/** Calls of one command (lower case, as INFO names it: 'get') one Redis node ran since its last CONFIG RESETSTAT, its scripts' calls included. */
export async function commandCalls(redis: Redis, command: string): Promise<number> {
  const match = new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(await redis.info('commandstats'));
  return match === null ? 0 : Number(match[1]);
}
