import { readdirSync, readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import type { Sample } from './verdict.js';

/** Resident set size of a process, from /proc (Linux). */
export function rssBytes(pid: number): number {
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) * 1024;
}

/** Open file descriptors of a process: sockets, files, watchers, pipes. */
export const openFds = (pid: number): number => readdirSync(`/proc/${pid}/fd`).length;

/**
 * Keys in db 0, those among them without an expiry (INFO keyspace: keys=N,expires=M),
 * and Redis's estimate of the share already expired but not yet deleted.
 */
export async function keyCounts(redis: Redis): Promise<{ keys: number; withoutTtl: number; stale: number }> {
  const line = /^db0:keys=(\d+),expires=(\d+)/m.exec(await redis.info('keyspace'));
  const stale = Number(/^expired_stale_perc:([\d.]+)/m.exec(await redis.info('stats'))?.[1] ?? 0) / 100;
  const keys = Number(line?.[1] ?? 0);
  return { keys, withoutTtl: keys - Number(line?.[2] ?? 0), stale };
}

/** The longest remaining TTL of any key, ms (SCAN with PTTL: the whole keyspace, in pipelines). */
export async function longestTtlMs(redis: Redis): Promise<number> {
  let longest = 0;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'COUNT', 5_000);
    cursor = next;
    const pipeline = redis.pipeline();
    for (const key of keys) pipeline.pttl(key);
    for (const [, ttl] of (await pipeline.exec()) ?? []) longest = Math.max(longest, Number(ttl));
  } while (cursor !== '0');
  return longest;
}

export interface SampleSource {
  phase: Sample['phase'];
  decisions(): number;
  sent(): number;
  errors(): number;
  /** Decisions/s over the last interval, p99 and the like: the progress line's end. */
  extra(): string;
}

/**
 * Samples the service and Redis every `intervalMs` and prints one progress
 * line each time; the samples are the verdict's input.
 */
export class Sampler {
  readonly samples: Sample[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly started = Date.now();
  private last = { atMs: 0, decisions: 0 };

  constructor(
    private readonly pid: number,
    private readonly redis: Redis,
    private readonly out: NodeJS.WritableStream,
  ) {}

  start(source: SampleSource, intervalMs: number): void {
    this.stop();
    this.timer = setInterval(() => void this.sample(source).catch((error: unknown) => this.out.write(`sample failed: ${String(error)}\n`)), intervalMs);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  async sample(source: SampleSource): Promise<Sample> {
    const atMs = Date.now() - this.started;
    const { keys, withoutTtl, stale } = await keyCounts(this.redis);
    const sample: Sample = {
      atMs,
      phase: source.phase,
      decisions: source.decisions(),
      sent: source.sent(),
      stale,
      rssBytes: rssBytes(this.pid),
      fds: openFds(this.pid),
      keys,
      keysWithoutTtl: withoutTtl,
    };
    this.samples.push(sample);
    const rate = ((sample.decisions - this.last.decisions) / (atMs - this.last.atMs)) * 1_000;
    this.last = { atMs, decisions: sample.decisions };
    this.out.write(
      `${(atMs / 1_000).toFixed(0).padStart(5)} s  ${source.phase.padEnd(7)} decisions ${sample.decisions.toLocaleString('en-US').padStart(11)} ` +
        `(${Math.round(rate).toLocaleString('en-US').padStart(7)}/s)  errors ${source.errors()}  RSS ${(sample.rssBytes / 2 ** 20).toFixed(0)} MiB  ` +
        `fds ${sample.fds}  keys ${keys.toLocaleString('en-US')}${withoutTtl > 0 ? ` (${withoutTtl} without TTL)` : ''}  ${source.extra()}\n`,
    );
    return sample;
  }
}
