import { Counter, Gauge, type Registry } from 'prom-client';
import { systemClock, type Clock } from '@quota-service/core';
import type { LeaseEvents } from '../engine/leases.js';

/** A policy's readings are swept of the stale ones when they reach this many, then twice as many as the sweep left: amortised, not per reading. */
const FIRST_SWEEP = 1_024;

/**
 * Concurrency leases as the store reports them (docs/operations.md,
 * "Metrics"), beside the service's other metrics and in their style.
 *
 * quota_leases_expired_total counts the leases the store dropped because
 * they expired without a release: each is dropped by one script call, on
 * whichever replica made it, so summed over replicas each counts once.
 *
 * quota_leases_held is this replica's latest reading of each identity's
 * lease set (the store's held count in the answer of an Allow, Release,
 * Renew or GetQuota through this replica), summed per policy; a reading
 * counts until a newer one replaces it or lease_ttl_ms has passed, by when
 * every lease it counted has expired unless renewed.
 */
export class LeaseMetrics implements LeaseEvents {
  /** Per policy: lease set key -> its leases held, and until when (this replica's clock) the reading counts. */
  private readonly readings = new Map<string, Map<string, { held: number; until: number }>>();
  /** Per policy: the number of readings at which they are swept next. */
  private readonly sweepAt = new Map<string, number>();
  private readonly expired: Counter<'policy'>;

  constructor(
    registry: Registry,
    private readonly clock: Clock = systemClock,
  ) {
    const registers = [registry];
    this.expired = new Counter({
      name: 'quota_leases_expired_total',
      help: 'Concurrency leases that expired without a Release (their holder crashed or stopped renewing), by policy, counted when a later lease call of the same identity drops them from the store; each counts on one replica.',
      labelNames: ['policy'] as const,
      registers,
    });
    const readings = this.readings;
    const now = () => this.clock.now();
    new Gauge({
      name: 'quota_leases_held',
      help: "Concurrency leases held, by policy, as this replica last read each identity's leases from the store (an Allow, Release, Renew or GetQuota through it) within lease_ttl_ms; with QUOTA_WORKERS above 1, the largest worker's reading.",
      labelNames: ['policy'] as const,
      registers,
      // Workers read the same leases from the store: summing would count a lease once per worker that saw it.
      aggregator: 'max',
      collect() {
        const at = now();
        for (const [policy, sets] of readings) this.set({ policy }, heldAt(sets, at));
      },
    });
  }

  observed(policy: string, set: string, held: number, expired: number, ttlMs: number): void {
    let sets = this.readings.get(policy);
    if (sets === undefined) {
      sets = new Map();
      this.readings.set(policy, sets);
      // Created at 0 with the policy's first reading, so a rate() has a start.
      this.expired.inc({ policy }, 0);
    }
    if (expired > 0) this.expired.inc({ policy }, expired);
    const now = this.clock.now();
    if (held <= 0) {
      sets.delete(set);
      return;
    }
    if (sets.size >= (this.sweepAt.get(policy) ?? FIRST_SWEEP)) {
      heldAt(sets, now);
      this.sweepAt.set(policy, Math.max(FIRST_SWEEP, 2 * sets.size));
    }
    sets.set(set, { held, until: now + ttlMs });
  }
}

/** The leases held in the readings still counting at `nowMs`; the others are dropped. */
function heldAt(sets: Map<string, { held: number; until: number }>, nowMs: number): number {
  let sum = 0;
  for (const [set, reading] of sets) {
    if (reading.until <= nowMs) sets.delete(set);
    else sum += reading.held;
  }
  return sum;
}
