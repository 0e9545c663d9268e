import { Counter, Gauge, type Registry } from 'prom-client';
import { systemClock, type Clock } from '@quota-service/core';
import type { LeaseEvents } from '../engine/leases.js';

/**
 * Concurrency leases as this replica saw them, beside the service's other
 * metrics (src/metrics/metrics.ts) and in their style: per policy, the
 * leases this replica granted and has not seen end, and those that expired
 * without a Release. The store holds the leases; this is a ledger of the
 * ones granted here (member -> when it expires, on this replica's clock,
 * from the store's answer), moved by the Allow that acquired a lease, and the
 * Renew and Release this replica served. A lease past its expiry here is
 * counted expired at the next scrape. Summed over replicas, the gauge is the
 * leases held, as long as a lease is renewed and released through the
 * replica that granted it (a client's gRPC channel usually keeps to one); a
 * Release through another replica leaves it counted here until it expires.
 */
export class LeaseMetrics implements LeaseEvents {
  /** Per policy: lease member -> expiry (unix ms, this replica's clock). */
  private readonly ledger = new Map<string, Map<string, number>>();
  private readonly expired: Counter<'policy'>;

  constructor(
    registry: Registry,
    private readonly clock: Clock = systemClock,
  ) {
    const registers = [registry];
    this.expired = new Counter({
      name: 'quota_leases_expired_total',
      help: 'Concurrency leases granted by this replica that expired without a Release (their holder crashed or stopped renewing), by policy. Counted at scrape time.',
      labelNames: ['policy'] as const,
      registers,
      // Scraped before the gauge: the leases past their expiry are counted first.
      collect: () => this.sweep(),
    });
    const ledger = this.ledger;
    const sweep = () => this.sweep();
    new Gauge({
      name: 'quota_leases_held',
      help: 'Concurrency leases granted by this replica and not yet released or expired, by policy; sum over replicas for the total.',
      labelNames: ['policy'] as const,
      registers,
      collect() {
        sweep();
        for (const [policy, leases] of ledger) this.set({ policy }, leases.size);
      },
    });
  }

  acquired(policy: string, lease: string, expiresInMs: number): void {
    let leases = this.ledger.get(policy);
    if (leases === undefined) {
      leases = new Map();
      this.ledger.set(policy, leases);
    }
    leases.set(lease, this.clock.now() + expiresInMs);
  }

  renewed(policy: string, lease: string, expiresInMs: number): void {
    const leases = this.ledger.get(policy);
    if (leases?.has(lease)) leases.set(lease, this.clock.now() + expiresInMs);
  }

  released(policy: string, lease: string): void {
    this.ledger.get(policy)?.delete(lease);
  }

  /** Leases past their expiry leave the ledger and count as expired without release. */
  private sweep(): void {
    const now = this.clock.now();
    for (const [policy, leases] of this.ledger) {
      let gone = 0;
      for (const [lease, at] of leases) {
        if (at <= now) {
          leases.delete(lease);
          gone++;
        }
      }
      // Created at 0 with the policy's first lease, so a rate() has a start.
      this.expired.inc({ policy }, gone);
    }
  }
}
