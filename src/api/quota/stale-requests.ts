import type { AllowRequest } from '@quota-service/contract';

/**
 * How fast the baseline of a sender's clock may rise, in ms per ms: 1 ms a
 * second, far more than two clocks' rates differ (a crystal off by 100 ppm
 * drifts 0.1 ms a second), far less than a partition delays what it holds. A
 * baseline that could never rise would refuse every request of a client whose
 * clock runs a little slow, once the drift passed its deadline.
 */
export const BASELINE_RISE = 0.001;
/** A connection (or a caller on it) that sent nothing this long is forgotten. Longer than TCP holds a dead connection's bytes (about 15 minutes on Linux). */
export const FORGET_AFTER_MS = 20 * 60_000;
/** Forgotten connections are swept at most this often, when a new one appears. */
const SWEEP_EVERY_MS = 60_000;

/** The rpcs whose requests carry deadline_ms and sent_at_unix_ms: the label of quota_stale_requests_total. */
export type StaleRpc = 'Allow' | 'AllowBatch' | 'AllowStream';

export interface StaleRequestsOptions {
  /** QUOTA_CLOCK_SKEW_ALLOWANCE_MS: how much later than its deadline a request may arrive and still be decided. */
  readonly allowanceMs: number;
  /** The service's clock in ms, one that does not jump; default performance.timeOrigin + performance.now(). Tests pass a virtual one. */
  readonly now?: () => number;
}

/**
 * Refuses requests that arrive after their caller gave up (AllowRequest's
 * deadline_ms and sent_at_unix_ms; docs/operations.md, "Requests whose caller
 * gave up"). A client cut off from the service answers its callers with its
 * failure policy, but what it had already written to the dead connection is
 * delivered when the link heals: decided then, it would spend quota for
 * callers long gone, quota the model would have granted to others.
 *
 * The sender's clock and the service's differ by an unknown offset, so a send
 * time is never compared with the service's clock. Per connection (and per
 * authenticated caller on it), the service keeps the smallest receive − send
 * it has seen: the offset plus the quickest delivery. A request's receive −
 * send above that baseline is how much longer than the quickest it took, never
 * more than it really took. When that exceeds half its deadline_ms plus the
 * allowance, its answer would come back after its caller stopped waiting
 * (lateness): the request fails with DEADLINE_EXCEEDED and spends nothing. The allowance covers senders whose
 * clocks differ yet share a connection (callers behind one HTTP/2 proxy).
 *
 * Bytes held by a dead connection come late on that same connection, whose
 * earlier requests set its baseline; a new connection holds no old bytes. The
 * baseline rises by BASELINE_RISE, so a sender's clock that drifts is
 * followed. Per message this is one or two map lookups, per request some
 * arithmetic; nothing is allocated but for a connection's first request and
 * for a batch with a refused request.
 */
export class StaleRequests {
  /** Requests refused so far, by rpc: quota_stale_requests_total, read at scrape time. */
  readonly refused: Record<StaleRpc, number> = { Allow: 0, AllowBatch: 0, AllowStream: 0 };
  readonly allowanceMs: number;
  private readonly now: () => number;
  private readonly peers = new Map<string, PeerClocks>();
  private sweptAt: number;

  constructor(options: StaleRequestsOptions) {
    if (!(options.allowanceMs >= 0)) throw new RangeError(`allowanceMs must be >= 0, got ${options.allowanceMs}`);
    this.allowanceMs = options.allowanceMs;
    this.now = options.now ?? monotonicUnixMs;
    this.sweptAt = this.now();
  }

  /**
   * One request (Allow) received now on connection `peer` from `caller` (its
   * name; undefined without authentication): 0 when it may be decided,
   * otherwise how many ms later than the connection's quickest request it
   * arrived (more than its deadline_ms plus the allowance), counted as refused.
   */
  check(request: AllowRequest, peer: string, caller: string | undefined, rpc: StaleRpc): number {
    if (!hasSendTime(request)) return 0;
    const receivedAt = this.now();
    const late = this.lateness(request, this.clock(peer, caller, receivedAt), receivedAt);
    if (late > 0) this.refused[rpc]++;
    return late;
  }

  /**
   * The requests of a batch (AllowBatch, one AllowStream message) received now:
   * undefined when every one may be decided (the usual case, and always for
   * requests without a send time), else per request 0 or how late it arrived (check).
   */
  checkEach(requests: readonly AllowRequest[], peer: string, caller: string | undefined, rpc: StaleRpc): number[] | undefined {
    let clock: SendClock | undefined;
    let receivedAt = 0;
    let lates: number[] | undefined;
    for (let index = 0; index < requests.length; index++) {
      const request = requests[index]!;
      if (!hasSendTime(request)) continue;
      if (clock === undefined) {
        receivedAt = this.now();
        clock = this.clock(peer, caller, receivedAt);
      }
      const late = this.lateness(request, clock, receivedAt);
      if (late === 0) continue;
      lates ??= new Array<number>(requests.length).fill(0);
      lates[index] = late;
      this.refused[rpc]++;
    }
    return lates;
  }

  /** Connections (peers) remembered now: for tests. */
  get connections(): number {
    return this.peers.size;
  }

  /**
   * How late a request is, or 0 when it may be decided: refused once its delay
   * above the quickest is more than half its deadline (plus the allowance).
   * Past the whole deadline its caller has gone; past half, what is left of it
   * is shorter than the way the request came, and the answer has that way to
   * go back, on a link that just delayed the request that much (the bytes of
   * a healed partition, retransmitted ahead of it). Decided then, it would
   * most likely spend for a caller that has given up by the time the answer
   * comes.
   */
  private lateness(request: AllowRequest, clock: SendClock, receivedAt: number): number {
    const delay = clock.delay(request.sentAtUnixMs, receivedAt);
    const deadlineMs = request.deadlineMs;
    return deadlineMs > 0 && delay > deadlineMs / 2 + this.allowanceMs ? delay : 0;
  }

  private clock(peer: string, caller: string | undefined, receivedAt: number): SendClock {
    let clocks = this.peers.get(peer);
    if (clocks === undefined) {
      if (receivedAt - this.sweptAt >= SWEEP_EVERY_MS) this.sweep(receivedAt);
      clocks = new PeerClocks();
      this.peers.set(peer, clocks);
    }
    clocks.seenAt = receivedAt;
    return clocks.of(caller, receivedAt);
  }

  private sweep(now: number): void {
    this.sweptAt = now;
    for (const [peer, clocks] of this.peers) {
      if (now - clocks.seenAt >= FORGET_AFTER_MS) this.peers.delete(peer);
      else clocks.sweep(now);
    }
  }
}

/** The service's clock: Unix time when the process started, advanced by the monotonic clock (it never jumps). */
function monotonicUnixMs(): number {
  return performance.timeOrigin + performance.now();
}

/** A send time the service can use: a positive, finite number (0 or unset: an older client's request, never refused). */
function hasSendTime(request: AllowRequest): boolean {
  const sentAt = request.sentAtUnixMs;
  return sentAt > 0 && sentAt < Number.POSITIVE_INFINITY;
}

/**
 * The senders' clocks seen on one connection: one for requests without
 * authentication, one per authenticated caller, so a caller cannot move the
 * baseline another caller's requests are measured by.
 */
class PeerClocks {
  seenAt = 0;
  private anonymous: SendClock | undefined;
  private callers: Map<string, SendClock> | undefined;

  of(caller: string | undefined, now: number): SendClock {
    let clock: SendClock | undefined;
    if (caller === undefined) clock = this.anonymous ??= new SendClock();
    else {
      this.callers ??= new Map();
      clock = this.callers.get(caller);
      if (clock === undefined) {
        clock = new SendClock();
        this.callers.set(caller, clock);
      }
    }
    clock.seenAt = now;
    return clock;
  }

  sweep(now: number): void {
    if (this.callers === undefined) return;
    for (const [caller, clock] of this.callers) if (now - clock.seenAt >= FORGET_AFTER_MS) this.callers.delete(caller);
  }
}

/** What the service knows of one sender's clock: the baseline of receive − send. */
class SendClock {
  seenAt = 0;
  /** The smallest receive − send seen, ms: the clocks' offset plus the quickest delivery. */
  private base = Number.POSITIVE_INFINITY;
  /** When `base` was seen, on the service's clock. */
  private baseAt = 0;

  /**
   * How much longer than the quickest request this one took to arrive, ms
   * (0 for the quickest so far, which becomes the new baseline). The baseline
   * rises by BASELINE_RISE from when it was seen.
   */
  delay(sentAt: number, receivedAt: number): number {
    const transit = receivedAt - sentAt;
    const base = this.base + (receivedAt - this.baseAt) * BASELINE_RISE;
    if (transit < base) {
      this.base = transit;
      this.baseAt = receivedAt;
      return 0;
    }
    return transit - base;
  }
}
