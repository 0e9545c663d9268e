/**
 * A semaphore: at most `capacity` permits held at once, waiters served in
 * arrival order. AllowStream holds one permit per batch it has read and not
 * yet written back, per stream and per connection.
 */
export class Semaphore {
  private held = 0;
  private readonly waiters: Array<() => void> = [];

  constructor(readonly capacity: number) {}

  get inUse(): number {
    return this.held;
  }

  /** Whether nothing is held and nobody waits: the owner may forget it. */
  get idle(): boolean {
    return this.held === 0 && this.waiters.length === 0;
  }

  /** Takes a permit if one is free and nobody waits for one; false (holding nothing) otherwise. */
  tryTake(): boolean {
    if (this.held >= this.capacity || this.waiters.length > 0) return false;
    this.held++;
    return true;
  }

  /**
   * Takes a permit: at once when one is free, else when one is given back.
   * Resolves false, holding nothing, if `signal` aborts first.
   */
  take(signal?: AbortSignal): Promise<boolean> {
    if (signal?.aborted) return Promise.resolve(false);
    if (this.tryTake()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const onAbort = () => {
        const at = this.waiters.indexOf(waiter);
        if (at !== -1) this.waiters.splice(at, 1);
        resolve(false);
      };
      // The permit passes straight from the giver to the waiter: held stays counted.
      const waiter = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve(true);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  give(count = 1): void {
    for (let i = 0; i < count; i++) {
      const next = this.waiters.shift();
      if (next === undefined) this.held--;
      else next();
    }
  }
}

/** A semaphore per connection (by the peer address, unique per connection), forgotten when idle. */
export class SemaphorePerConnection {
  private readonly byPeer = new Map<string, Semaphore>();

  constructor(private readonly capacity: number) {}

  of(peer: string): Semaphore {
    let semaphore = this.byPeer.get(peer);
    if (semaphore === undefined) {
      semaphore = new Semaphore(this.capacity);
      this.byPeer.set(peer, semaphore);
    }
    return semaphore;
  }

  /** Forgets the peer's semaphore once nothing is held or awaited on it. */
  release(peer: string): void {
    if (this.byPeer.get(peer)?.idle) this.byPeer.delete(peer);
  }

  /** Connections with batches held (for tests and metrics). */
  get size(): number {
    return this.byPeer.size;
  }
}
