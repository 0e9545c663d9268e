import { describe, expect, it } from 'vitest';
import type { AllowRequest } from '@quota-service/contract';
import { BASELINE_RISE, FORGET_AFTER_MS, StaleRequests } from '../../../src/api/quota/stale-requests.js';

/**
 * The staleness rule on virtual time: the service's clock (`service`) and a
 * sender's clock, offset from it by whatever the test says, both moved by hand.
 */
function setup(allowanceMs = 0) {
  // Unix time in ms, about now.
  let service = 1_700_000_000_000;
  const stale = new StaleRequests({ allowanceMs, now: () => service });
  return {
    stale,
    advance: (ms: number) => (service += ms),
    get now() {
      return service;
    },
  };
}

const request = (sentAtUnixMs: number, deadlineMs: number): AllowRequest => ({
  policy: 'orders',
  identity: { user: '42' },
  cost: 0,
  requestId: '',
  deadlineMs,
  sentAtUnixMs,
});

const PEER = 'ipv4:10.0.0.7:41000';

describe('a request that arrives after its caller gave up', () => {
  it.each([
    ['an hour behind', -3_600_000],
    ['in step', 0],
    ['a day ahead', 86_400_000],
  ])("is told apart whatever the sender's clock says (%s)", (_name, offset) => {
    const t = setup();
    // The sender's clock reads the service's plus `offset`; each delivery takes 2 ms.
    const sentNow = () => t.now + offset;
    const deliver = (sentAt: number, deadlineMs: number, afterMs = 2) => {
      t.advance(afterMs);
      return t.stale.check(request(sentAt, deadlineMs), PEER, undefined, 'Allow');
    };
    expect(deliver(sentNow(), 250)).toBe(0);
    expect(deliver(sentNow(), 250)).toBe(0);
    // Held for 5 s (a partition), deadline 250 ms: refused, 4998 ms later than the quickest
    // (less the 5 ms the baseline rose meanwhile).
    const held = sentNow();
    expect(deliver(held, 250, 5_000)).toBeCloseTo(5_000 - 2 - 5_000 * BASELINE_RISE, 3);
    // Sent after the heal: decided.
    expect(deliver(sentNow(), 250)).toBe(0);
    expect(t.stale.refused).toEqual({ Allow: 1, AllowBatch: 0, AllowStream: 0 });
  });

  it('is decided up to half its deadline (plus the allowance) past the quickest delivery, refused after: its answer needs the way back', () => {
    for (const allowanceMs of [0, 100]) {
      const t = setup(allowanceMs);
      t.stale.check(request(t.now, 250), PEER, undefined, 'Allow');
      const sentAt = t.now;
      // In transit for `ms`: that much later than the quickest (0 ms), less what the baseline rose meanwhile.
      const limit = 125 + allowanceMs;
      const inTransitFor = (lateMs: number) => lateMs / (1 - BASELINE_RISE);
      t.advance(inTransitFor(limit - 0.01));
      expect(t.stale.check(request(sentAt, 250), PEER, undefined, 'Allow'), `allowance ${allowanceMs}: just under the limit`).toBe(0);
      t.advance(inTransitFor(0.02));
      expect(t.stale.check(request(sentAt, 250), PEER, undefined, 'Allow'), `allowance ${allowanceMs}: just past it`).toBeCloseTo(limit + 0.01, 3);
    }
  });

  it('the quickest request sets the baseline: a slow first one does not excuse later late ones', () => {
    const t = setup();
    const slowFirst = t.now;
    t.advance(400);
    expect(t.stale.check(request(slowFirst, 1_000), PEER, undefined, 'Allow')).toBe(0);
    // Quicker: 1 ms. Now a request 300 ms in transit is about 299 ms late, past its 250 ms.
    const quick = t.now;
    t.advance(1);
    expect(t.stale.check(request(quick, 250), PEER, undefined, 'Allow')).toBe(0);
    const held = t.now;
    t.advance(300);
    expect(t.stale.check(request(held, 250), PEER, undefined, 'Allow')).toBeCloseTo(300 - 1 - 300 * BASELINE_RISE, 3);
  });

  it('a sender whose clock runs slow (100 ppm) for ten hours is never refused: the baseline follows', () => {
    const t = setup();
    let sender = 5_000;
    let refused = 0;
    for (let i = 0; i < 3_600; i++) {
      // Ten seconds pass for the service, 100 ppm less for the sender; deliveries take 1 to 3 ms.
      t.advance(10_000);
      sender += 10_000 * (1 - 1e-4);
      const delivery = 1 + (i % 3);
      t.advance(delivery);
      sender += delivery;
      if (t.stale.check(request(sender - delivery, 20), PEER, undefined, 'Allow') > 0) refused++;
    }
    // 3.6 s of drift by now, far past a 20 ms deadline, yet nothing refused.
    expect(refused).toBe(0);
  });

  it('without a deadline or a send time (an older client), a request is never refused', () => {
    const t = setup();
    t.stale.check(request(t.now, 250), PEER, undefined, 'Allow');
    const held = t.now;
    t.advance(60_000);
    expect(t.stale.check(request(held, 0), PEER, undefined, 'Allow')).toBe(0);
    expect(t.stale.check(request(0, 250), PEER, undefined, 'Allow')).toBe(0);
    for (const sentAt of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -5]) {
      expect(t.stale.check(request(sentAt, 250), PEER, undefined, 'Allow'), String(sentAt)).toBe(0);
    }
    // None of them moved the baseline: a request held a minute is still refused.
    expect(t.stale.check(request(held, 250), PEER, undefined, 'Allow')).toBeGreaterThan(59_000);
  });

  it('an old client remembers nothing: no connection is kept for requests without a send time', () => {
    const t = setup();
    expect(t.stale.checkEach([request(0, 0), request(0, 0)], PEER, undefined, 'AllowStream')).toBeUndefined();
    expect(t.stale.connections).toBe(0);
  });
});

describe('baselines are kept apart', () => {
  it('per connection: a far-ahead clock on one connection moves nothing on another', () => {
    const t = setup();
    t.stale.check(request(t.now, 250), 'ipv4:10.0.0.1:1', undefined, 'Allow');
    t.stale.check(request(t.now + 3_600_000, 250), 'ipv4:10.0.0.2:1', undefined, 'Allow');
    t.advance(5);
    expect(t.stale.check(request(t.now - 3, 250), 'ipv4:10.0.0.1:1', undefined, 'Allow')).toBe(0);
    expect(t.stale.connections).toBe(2);
  });

  it('per caller on one connection (callers behind one proxy): one cannot make another look late', () => {
    const t = setup();
    t.stale.check(request(t.now, 250), PEER, 'order-api', 'Allow');
    // Another caller claims a send time an hour ahead: a baseline an hour lower, for itself only.
    t.stale.check(request(t.now + 3_600_000, 250), PEER, 'mallory', 'Allow');
    t.advance(3);
    expect(t.stale.check(request(t.now - 2, 250), PEER, 'order-api', 'Allow')).toBe(0);
    expect(t.stale.check(request(t.now - 2, 250), PEER, 'mallory', 'Allow')).toBeGreaterThan(3_000_000);
  });

  it('a connection silent for FORGET_AFTER_MS is forgotten when a new one appears', () => {
    const t = setup();
    t.stale.check(request(t.now, 250), 'ipv4:10.0.0.1:1', undefined, 'Allow');
    t.advance(FORGET_AFTER_MS - 1);
    t.stale.check(request(t.now, 250), 'ipv4:10.0.0.2:1', undefined, 'Allow');
    expect(t.stale.connections).toBe(2);
    t.advance(FORGET_AFTER_MS);
    t.stale.check(request(t.now, 250), 'ipv4:10.0.0.3:1', undefined, 'Allow');
    expect(t.stale.connections).toBe(1);
  });
});

describe('a batch', () => {
  it('marks only its late requests, each by how late; counts them under its rpc', () => {
    const t = setup();
    expect(t.stale.checkEach([request(t.now, 250)], PEER, undefined, 'AllowStream')).toBeUndefined();
    const held = t.now;
    t.advance(2_000);
    // A batch of one sender shares its send time; deadlines differ per caller (and an old-style item has none).
    const late = t.stale.checkEach([request(held, 250), request(held, 5_000), request(0, 0), request(held, 1_990)], PEER, undefined, 'AllowStream');
    expect(late?.map((ms) => Math.round(ms))).toEqual([1_998, 0, 0, 1_998]);
    expect(t.stale.refused).toEqual({ Allow: 0, AllowBatch: 0, AllowStream: 2 });
  });
});
