/**
 * The embedded store's key space: values with a time-to-live, on the clock
 * the caller passes in. Expiry follows Redis: a key set with a TTL of t ms at
 * time n still exists at n + t and is gone after it.
 */
export class MemorySpace {
  private readonly entries = new Map<string, { value: unknown; expiresAt: number }>();

  get<T>(key: string, nowMs: number): T | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    if (nowMs > entry.expiresAt) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.value as T;
  }

  set(key: string, value: unknown, ttlMs: number, nowMs: number): void {
    this.entries.set(key, { value, expiresAt: nowMs + ttlMs });
  }

  /** Remaining time to live in ms (Redis PTTL), undefined for a missing key. */
  ttl(key: string, nowMs: number): number | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined || nowMs > entry.expiresAt) return undefined;
    return entry.expiresAt - nowMs;
  }

  /** Replaces the value of a live key and keeps its expiry, as INCRBY and HSET do. */
  update(key: string, value: unknown): void {
    const entry = this.entries.get(key);
    if (entry === undefined) throw new Error(`MemorySpace.update: no key ${key}`);
    entry.value = value;
  }

  /** Removes a key (DEL). */
  delete(key: string): void {
    this.entries.delete(key);
  }

  /** Live keys at `nowMs`; expired ones are dropped on the way. */
  keys(nowMs: number): string[] {
    this.sweep(nowMs);
    return [...this.entries.keys()];
  }

  sweep(nowMs: number): void {
    for (const [key, entry] of this.entries) {
      if (nowMs > entry.expiresAt) this.entries.delete(key);
    }
  }

  clear(): void {
    this.entries.clear();
  }
}
