import type { PolicySet } from '@quota-service/core';
import { QuotaAdmin } from '../../src/api/admin/quota-admin.js';
import { MemoryStateReset, RedisStateReset } from '../../src/api/admin/state-reset.js';
import { QuotaEngine } from '../../src/engine/engine.js';
import { MemoryOverrides } from '../../src/overrides/memory-overrides.js';
import type { OverrideStore, OverrideView } from '../../src/overrides/override.js';
import { RedisOverrides } from '../../src/overrides/redis-overrides.js';
import { MemoryStore } from '../../src/store/memory.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import type { StoreFixture } from './store-fixtures.js';

/** An engine and the admin API's parts on one store fixture, wired as src/main.ts wires them, on the fixture's virtual clock. */
export interface AdminSetup {
  engine: QuotaEngine;
  admin: QuotaAdmin;
  overrides: OverrideStore & OverrideView;
}

export function adminSetup(fixture: StoreFixture, policies: PolicySet): AdminSetup {
  const { store, clock } = fixture;
  let overrides: OverrideStore & OverrideView;
  let reset: MemoryStateReset | RedisStateReset;
  if (store instanceof MemoryStore) {
    overrides = new MemoryOverrides(clock);
    reset = new MemoryStateReset(store.space);
  } else if (store instanceof RedisStore) {
    overrides = new RedisOverrides(store.client, { clock: clock });
    reset = new RedisStateReset(store.client);
  } else {
    throw new Error('adminSetup: a memory or Redis store');
  }
  const engine = new QuotaEngine(policies, store, { overrides });
  return { engine, admin: new QuotaAdmin(engine, overrides, reset), overrides };
}

/** Another replica on the same store: its own engine and its own view of the overrides (RedisOverrides on its own client). */
export function replicaOf(fixture: StoreFixture, policies: PolicySet, client: RedisStore): QuotaEngine {
  return new QuotaEngine(policies, client, { overrides: new RedisOverrides(client.client, { clock: fixture.clock }) });
}
