// A holder of slices in a process of its own (test/slices/holder-processes.test.ts):
// a SliceHolder over a RedisStore (one node at argv[2] as a redis:// URL, or a
// cluster's seeds joined by commas), as a service instance or a client's process
// holds them. It prints "ready", waits for a line on stdin, then decides
// requests of tenant argv[4] on the limit argv[5] (JSON, the policy file's
// spelling) as fast as it can for argv[6] ms, from its slices when it can, else
// by the store, with 4 requests in flight. After every grant it writes the
// units it has granted so far, where from and what its slice holds still
// (`<units> slice|store <held>`, written
// before the grant counts as used), so a process killed with SIGKILL has
// reported all it granted. When it stops deciding it writes "stopped", then
// closes the holder (giving back what is unused) and writes "done <json>".
import { writeSync } from 'node:fs';
import { once } from 'node:events';
import { stringify } from 'yaml';
import { identityKey, parsePolicies, SliceHolder } from '@quota-service/core';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { decideOne } from '../../src/store/store.js';

const [where, holderId, tenant, limitJson, durationText, then] = process.argv.slice(2);
/** With argv[7] 'hold': once a grant from its slice leaves units in it, it writes "holding" and decides no more (waiting to be killed). */
const holdAfterSlice = then === 'hold';
let holding = false;
const limit = parsePolicies(stringify({ policies: { hot: { limits: [JSON.parse(limitJson!)] } } })).get('hot')!.limits[0]!;
const store = where!.startsWith('redis://') ? RedisStore.connect(where!) : RedisStore.connectCluster(where!.split(','));
await store.ready();
const holder = new SliceHolder({
  slice: (call, op, giveBack) => decideOne(store, { mode: 'slice', calls: [call], holder: holderId!, op, giveBack }).then((decision) => decision.slice!),
});
const key = identityKey(limit.name, limit.keyBy, tenant!);
let granted = 0;
let decisions = 0;
let storeCalls = 0;
let denied = 0;

writeSync(1, 'ready\n');
await once(process.stdin, 'data');
const end = Date.now() + Number(durationText);

async function loop(lane: number): Promise<void> {
  for (let i = 0; Date.now() < end && !holding; i++) {
    const cost = 1 + ((i + lane) % 3);
    const call = { limit, identityKey: key, cost };
    decisions++;
    const local = holder.decide([call]) !== undefined;
    let allowed = local;
    if (!allowed) {
      storeCalls++;
      allowed = (await decideOne(store, { mode: 'spend', calls: [call] })).outcomes[0]!.allowed;
    } else if (i % 16 === 0) {
      // Local decisions take no I/O: let the event loop run the holder's own calls.
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (allowed) {
      granted += cost;
      writeSync(1, `${granted} ${local ? 'slice' : 'store'} ${holder.unitsHeld(key)}\n`);
      if (holdAfterSlice && local && holder.unitsHeld(key) > 0 && !holding) {
        holding = true;
        writeSync(1, 'holding\n');
      }
    } else denied++;
  }
}
await Promise.all([0, 1, 2, 3].map(loop));
if (holding) {
  // Holds its slice until killed: the slice's own timer may still give it back at its ttl.
  setInterval(() => {}, 60_000);
} else {
  writeSync(1, 'stopped\n');
  await holder.close();
  writeSync(1, `done ${JSON.stringify({ granted, decisions, storeCalls, denied, ...holder.counters })}\n`);
  await store.close();
  process.exit(0);
}
