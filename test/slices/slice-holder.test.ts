import { describe, expect, it } from 'vitest';
import { identityKey, type Limit, type LimitCall, SliceHolder, type SliceSource } from '@quota-service/core';
import { MemoryStore } from '../../src/store/memory.js';
import { decideOne, type QuotaStore } from '../../src/store/store.js';
import { limitFrom, T0 } from '../support/store-fixtures.js';
import { decideAll } from '../support/store-calls.js';
import { VirtualTimers } from '../support/virtual-timers.js';

/** A holder's slice step on `store`, counting the calls it makes. */
function sourceOn(store: QuotaStore, holder: string, calls = { n: 0 }): SliceSource {
  return {
    slice: (call, op, giveBack) => {
      calls.n++;
      return decideOne(store, { mode: 'slice', calls: [call], holder, op, giveBack }).then((decision) => decision.slice!);
    },
  };
}
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

const bucket = limitFrom({
  name: 'budget',
  key_by: 'tenant',
  algorithm: 'token_bucket',
  capacity: 1000,
  refill_per_second: 100,
  slices: { share: 0.05, max_units: 50, ttl_ms: 250 },
});
const callOf = (limit: Limit, who: string, cost = 1): LimitCall => ({ limit, identityKey: identityKey(limit.name, limit.keyBy, who), cost });

function setup() {
  const timers = new VirtualTimers(T0);
  const store = new MemoryStore({ now: () => timers.now() });
  const calls = { n: 0 };
  const holder = new SliceHolder(sourceOn(store, 'h1', calls), { timers });
  const remaining = async (who = 'acme') => (await decideAll(store, [callOf(bucket, who, 0)], 'peek'))[0]!.remaining;
  return { timers, store, calls, holder, remaining };
}

describe('SliceHolder', () => {
  it('a cold identity (at most 10 decisions per ttl) never takes a slice', async () => {
    const { timers, calls, holder } = setup();
    for (let i = 0; i < 200; i++) {
      expect(holder.decide([callOf(bucket, 'cold')])).toBeUndefined();
      await settle();
      timers.advance(i % 10 === 9 ? 250 : 0);
    }
    expect(calls.n).toBe(0);
    expect(holder.held()).toBe(0);
  });

  it('a hot identity: the 11th decision within a ttl takes a slice, the next ones are local until it runs dry', async () => {
    const { calls, holder, remaining } = setup();
    for (let i = 0; i < 11; i++) expect(holder.decide([callOf(bucket, 'acme')])).toBeUndefined();
    await settle();
    expect(calls.n).toBe(1);
    expect(holder.counters).toMatchObject({ slicesTaken: 1, unitsTaken: 50 });
    expect(await remaining()).toBe(950); // spent from the bucket before any is granted
    for (let i = 0; i < 48; i++) expect(holder.decide([callOf(bucket, 'acme')])?.[0]).toMatchObject({ allowed: true, remaining: 49 - i });
    // 2 units left: a cost of 3 goes to the store (never denied by the slice).
    expect(holder.decide([callOf(bucket, 'acme', 3)])).toBeUndefined();
    expect(holder.counters.unitsGrantedLocally).toBe(48);
  });

  it('takes the next slice once half of one is granted, and grants the rest of the first before it', async () => {
    const { calls, holder, remaining } = setup();
    const acme = callOf(bucket, 'acme').identityKey;
    for (let i = 0; i < 11; i++) holder.decide([callOf(bucket, 'acme')]);
    await settle();
    for (let i = 0; i < 24; i++) holder.decide([callOf(bucket, 'acme')]);
    await settle();
    expect(calls.n).toBe(1); // 26 of 50 left: not yet
    expect(holder.decide([callOf(bucket, 'acme')])?.[0]).toMatchObject({ remaining: 25 });
    await settle();
    expect(calls.n).toBe(2); // half granted: the next slice (5% of 950), without waiting for this one to run dry
    expect(await remaining()).toBe(903);
    expect(holder.unitsHeld(acme)).toBe(72);
    for (let i = 0; i < 25; i++) expect(holder.decide([callOf(bucket, 'acme')])?.[0]).toMatchObject({ allowed: true, remaining: 71 - i });
    expect(holder.unitsHeld(acme)).toBe(47); // the first slice's rest went first
    expect(calls.n).toBe(2);
    // A cost the slice cannot pay goes to the store; the slice is done: its units go back with a new take.
    expect(holder.decide([callOf(bucket, 'acme', 60)])).toBeUndefined();
    await settle();
    expect(calls.n).toBe(3);
    expect(holder.counters).toMatchObject({ unitsGrantedLocally: 50, unitsReturned: 47, unitsLapsed: 0, slicesTaken: 3 });
    expect(await remaining()).toBe(903);
  });

  it("a slice's rest that is not granted by its end lapses: the store holds no record of it", async () => {
    const { timers, holder, remaining } = setup();
    const acme = callOf(bucket, 'acme').identityKey;
    for (let i = 0; i < 11; i++) holder.decide([callOf(bucket, 'acme')]);
    await settle();
    for (let i = 0; i < 25; i++) holder.decide([callOf(bucket, 'acme')]);
    await settle();
    expect(holder.unitsHeld(acme)).toBe(72);
    timers.advance(250); // both slices end: the second one's 47 go back (with a new take: still hot), the first one's rest (25) lapses
    await settle();
    expect(holder.counters).toMatchObject({ unitsReturned: 47, unitsLapsed: 25, slicesTaken: 3 });
    // 1000 - 50 - 47 taken, + 25 refilled, + 47 given back = 975; the 25 lapsed stay spent; then 5% of 975 taken.
    expect(await remaining()).toBe(975 - 48);
  });

  it('gives back the unused units at the ttl, and takes anew while the identity stays hot', async () => {
    const { timers, calls, holder, remaining } = setup();
    for (let i = 0; i < 11; i++) holder.decide([callOf(bucket, 'acme')]);
    await settle();
    for (let i = 0; i < 10; i++) holder.decide([callOf(bucket, 'acme')]);
    expect(holder.counters.unitsGrantedLocally).toBe(10);
    timers.advance(250); // the slice's ttl: 40 unused go back, and a new slice is taken (hot)
    await settle();
    expect(calls.n).toBe(2);
    expect(holder.counters).toMatchObject({ unitsReturned: 40, slicesTaken: 2 });
    // Quiet for two ttls: the next expiry gives back without a new take.
    timers.advance(250);
    await settle();
    expect(calls.n).toBe(3);
    expect(holder.held()).toBe(0);
    expect(holder.counters.unitsReturned).toBe(90);
    // The second slice (950 left) refilled 25 and got its 50 back: capped at the capacity.
    expect(await remaining()).toBe(1000);
  });

  it('close gives back every slice and decides nothing locally after', async () => {
    const { holder, remaining } = setup();
    for (let i = 0; i < 11; i++) holder.decide([callOf(bucket, 'acme')]);
    await settle();
    holder.decide([callOf(bucket, 'acme', 5)]);
    await holder.close();
    expect(holder.counters).toMatchObject({ unitsGrantedLocally: 5, unitsReturned: 45, unitsLapsed: 0 });
    expect(await remaining()).toBe(995);
    expect(holder.decide([callOf(bucket, 'acme')])).toBeUndefined();
  });

  it('a request with a limit without slices is never local', async () => {
    const { holder } = setup();
    const plain = limitFrom({ name: 'plain', key_by: 'user', algorithm: 'token_bucket', capacity: 10, refill_per_second: 1 });
    for (let i = 0; i < 30; i++) expect(holder.decide([callOf(bucket, 'acme'), callOf(plain, '42')])).toBeUndefined();
    await settle();
    expect(holder.held()).toBe(0);
  });

  it('cold identities: decisions and remaining exactly as without slices', async () => {
    const timers = new VirtualTimers(T0);
    const clock = { now: () => timers.now() };
    const withSlices = new MemoryStore(clock);
    const without = new MemoryStore(clock);
    const calls = { n: 0 };
    const holder = new SliceHolder(sourceOn(withSlices, 'h1', calls), { timers });
    const small = limitFrom({
      name: 'small',
      key_by: 'tenant',
      algorithm: 'fixed_window',
      limit: 7,
      window: 'second',
      slices: { share: 1, max_units: 50, ttl_ms: 250 },
    });
    for (let i = 0; i < 400; i++) {
      // Ten identities, each asked at most 10 times per ttl.
      const call = callOf(i % 3 === 0 ? small : bucket, `tenant-${i % 10}`, 1 + (i % 4));
      expect(holder.decide([call])).toBeUndefined();
      const [a, b] = await Promise.all([decideAll(withSlices, [call], 'spend'), decideAll(without, [call], 'spend')]);
      expect(a).toEqual(b);
      await settle();
      timers.advance(i % 10 === 9 ? 250 : 7);
    }
    expect(calls.n).toBe(0);
  });

  it('a take that fails is not tried again for a ttl: the decisions go to the store meanwhile', async () => {
    const timers = new VirtualTimers(T0);
    let calls = 0;
    const failing: SliceSource = {
      slice: () => {
        calls++;
        return Promise.reject(new Error('store unavailable'));
      },
    };
    const errors: unknown[] = [];
    const holder = new SliceHolder(failing, { timers, onError: (error) => errors.push(error) });
    for (let i = 0; i < 100; i++) {
      expect(holder.decide([callOf(bucket, 'acme')])).toBeUndefined();
      await settle();
      timers.advance(1);
    }
    // 100 ms of hot decisions: one take at the 11th, none again within the 250 ms ttl.
    expect(calls).toBe(1);
    expect(errors).toHaveLength(1);
    timers.advance(250);
    holder.decide([callOf(bucket, 'acme')]);
    await settle();
    expect(calls).toBe(2);
  });
});
