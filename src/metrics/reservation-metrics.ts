import { Counter, Gauge, type Registry } from 'prom-client';
import { systemClock, type Clock } from '@quota-service/core';
import type { SettlementEvent } from '../engine/settle.js';

/**
 * Reservations and their settlements (docs/operations.md, "Metrics"), beside
 * the service's other metrics and in their style.
 *
 * quota_reservations_outstanding sums over replicas to the reservations
 * neither settled nor expired, although a reservation and its settlement
 * may go through different replicas: each replica adds +1 for a reservation
 * it made until the reservation's record expires (now + request_id_ttl_ms)
 * and -1 for a settlement it made until that same record expires (the
 * record's spend time + request_id_ttl_ms, on the store's clock). A
 * reservation's +1 and its settlement's -1 therefore cancel for as long as
 * both count, and both stop when the record expires, settled or not. Kept
 * as counts per policy and second of expiry, so its memory is bounded by
 * request_id_ttl_ms in seconds, not by the reservations.
 */
export class ReservationMetrics {
  private readonly reservations: Counter<'policy'>;
  private readonly settlements: Counter<'policy' | 'result'>;
  private readonly settledUnits: Counter<'policy' | 'direction'>;
  /** Per policy: second (unix, rounded up) a record expires at -> +reservations - settlements expiring then. */
  private readonly pending = new Map<string, Map<number, number>>();

  constructor(
    registry: Registry,
    private readonly clock: Clock = systemClock,
  ) {
    const registers = [registry];
    this.reservations = new Counter({
      name: 'quota_reservations_total',
      help: 'Reservations: allowed Allow calls with a request_id (not replays) on a policy with a limit that counts units (anything but concurrency), by policy; every one of them can be settled.',
      labelNames: ['policy'] as const,
      registers,
    });
    this.settlements = new Counter({
      name: 'quota_settlements_total',
      help: "Settle calls the reservation's record answered, by policy and result (settled: this call settled it; already_settled: an earlier call had).",
      labelNames: ['policy', 'result'] as const,
      registers,
    });
    this.settledUnits = new Counter({
      name: 'quota_settled_units_total',
      help: 'Units settlements moved, by policy and direction (refunded: estimate above the actual cost; charged: below it).',
      labelNames: ['policy', 'direction'] as const,
      registers,
    });
    const pending = this.pending;
    const now = () => this.clock.now();
    new Gauge({
      name: 'quota_reservations_outstanding',
      help: "Reservations neither settled nor expired, by policy: sum over replicas (one replica's value counts what it reserved minus what it settled, and may be negative).",
      labelNames: ['policy'] as const,
      registers,
      collect() {
        const at = now();
        for (const [policy, buckets] of pending) this.set({ policy }, outstanding(buckets, at));
      },
    });
  }

  /** A new reservation whose record lives `ttlMs` (the policy's request_id_ttl_ms). */
  reserved(policy: string, ttlMs: number): void {
    this.reservations.inc({ policy });
    this.add(policy, this.clock.now() + ttlMs, 1);
  }

  /** A Settle its reservation's record answered; `reservation`: its policy counts reservations (reserved above). */
  settled(policy: string, event: SettlementEvent, reservation: boolean): void {
    this.settlements.inc({ policy, result: event.alreadySettled ? 'already_settled' : 'settled' });
    if (event.alreadySettled || !reservation) return;
    this.add(policy, event.recordExpiresAtMs, -1);
    if (event.delta !== 0) this.settledUnits.inc({ policy, direction: event.delta < 0 ? 'refunded' : 'charged' }, Math.abs(event.delta));
  }

  private add(policy: string, expiresAtMs: number, count: number): void {
    const now = this.clock.now();
    if (expiresAtMs < now) return;
    let buckets = this.pending.get(policy);
    if (buckets === undefined) {
      buckets = new Map();
      this.pending.set(policy, buckets);
    }
    const second = Math.ceil(expiresAtMs / 1000);
    const before = buckets.get(second);
    if (before === undefined) {
      // A new second: drop the ones past (unscraped, they would pile up).
      outstanding(buckets, now);
      buckets.set(second, count);
    } else buckets.set(second, before + count);
  }
}

/** The counts of the seconds not yet over at `nowMs` (a record lives through its expiry's ms, as on Redis); the ones over are dropped. */
function outstanding(buckets: Map<number, number>, nowMs: number): number {
  let sum = 0;
  for (const [second, count] of buckets) {
    if (second * 1000 < nowMs) buckets.delete(second);
    else sum += count;
  }
  return sum;
}
