import { Cluster, type Redis } from 'ioredis';
import {
  algorithms,
  asError,
  type Clock,
  type GroupDecision,
  type Limit,
  type LimitCall,
  type LimitDefinition,
  type Memo,
  rlsKeyPrefix,
  rlsStateKey,
} from '@quota-service/core';
import { decideArguments, decideLua, DECIDE_SCRIPT_NAME, rememberArguments, type ScriptCall } from './script/decide-script.js';
import { DECIDE_ENTRY, DecideFunctions } from './decide-functions.js';
import { checkEviction, type EvictionRisk } from './eviction-check.js';
import { keySlot } from './key-slot.js';
import { clusterClient, singleNodeClient, type RedisConnectionOptions } from './redis-clients.js';
import { BATCH_LIMITS, ScriptBatcher } from './script-batcher.js';
import { ClusterNodeBatches } from './cluster-node-batches.js';
import { decideAcrossSlots } from './cross-slot/decide-across-slots.js';
import type { ScriptStep, ScriptSteps } from './cross-slot/saga.js';
import { oneSlot, slotGroups, slotOf } from './hash-slots.js';
import { answerOf, scriptStepOf } from './script-steps.js';
import { storeError } from './store-errors.js';
import { PartitionTraffic } from './partition-traffic.js';
import { describeSeeds, everyNodeAnswers, keyCount, resetConnection, stateNodes } from './redis-nodes.js';
import { type DecideStep, decideOne, type QuotaStore, type ScriptedStep, type StoreParts } from '../store.js';
import { decideWithSlices } from '../slice-steps.js';
import { SliceCalls } from './slice-calls.js';

export interface RedisStoreOptions extends RedisConnectionOptions {
  /**
   * The time the scripts decide at, sent with every call; unset (as the
   * service runs it), each script reads Redis TIME. The configuration cannot
   * set it: virtual time is for tests.
   */
  clock?: Clock;
  /**
   * Coalesce the script calls that wait together into one (default true; one
   * per master on a cluster; script-batcher.ts). Off: one script call per step, the baseline
   * the batching is measured against (bench/store-batch.ts).
   */
  batch?: boolean;
  /**
   * Load the decide script as a Redis Function library when the store gets
   * ready and call it with FCALL (default true; decide-functions.ts). Off,
   * or where Redis refuses the library: EVALSHA, which decides the same.
   */
  functions?: boolean;
}

/** A script call's error as the caller should see it. */
const failedCall = (error: unknown): Promise<never> => Promise.reject(storeError(error));

/** One node (Redis) or a Redis Cluster: both run the same scripts, keys route by hash slot. */
export type RedisClient = Redis | Cluster;

/**
 * Decisions sent to one partition and not yet answered; more wait in this
 * process (PartitionTraffic). A thousand token bucket decisions take Redis a
 * few milliseconds, so what it was sent never keeps it silent for long.
 */
const MAX_OUTSTANDING_DECISIONS = 1000;

/** A check of one hit on a key no rule uses: it reads, writes nothing, and takes the decision path end to end. */
const WARM_UP_LIMIT: Limit = Object.freeze({
  name: 'warm-up',
  keyBy: 'warm-up',
  algorithm: algorithms.fixed_window,
  params: { limit: 1, window: 'second' },
  definition: { name: 'warm-up', algorithm: 'fixed_window' } as unknown as LimitDefinition,
}) as Limit;
const WARM_UP_CHECK: LimitCall = { limit: WARM_UP_LIMIT, identityKey: rlsStateKey(rlsKeyPrefix('', 'warm-up'), 'warm-up'), cost: 1, checkOnly: true };

/** The one partition of a single node. */
const SINGLE_NODE = 'redis';

/**
 * Decisions inside Redis: one Lua script per decision, registered with ioredis
 * defineCommand, which sends EVAL the first time on each connection and EVALSHA
 * after that, and falls back to EVAL on NOSCRIPT (a restarted node, SCRIPT FLUSH,
 * a freshly promoted replica). On a cluster, ioredis routes each script call by
 * its key's slot and follows MOVED and ASK.
 *
 * The script calls that wait together go as one script call (ScriptBatcher:
 * rounds paced by a SendPacer; driver batch mode): an AllowBatch of 100 requests costs
 * Redis one EVALSHA instead of 100. On a cluster, one per master: a node
 * batch, sent on that master's own connection, reaches keys of every slot the
 * master serves, and a call whose slot it no longer serves comes back unrun
 * and goes again alone by its slot (docs/decide-script.md, "Batch mode").
 */
export class RedisStore implements QuotaStore {
  readonly description: string;
  private eviction: EvictionRisk | undefined;
  private readonly batcher: ScriptBatcher | undefined;
  /** One per partition: the node, or each master of a cluster. */
  private readonly traffic = new Map<string, PartitionTraffic>();
  /** Slice steps: a script of their own, outside the batches. */
  private readonly slices: SliceCalls;
  /** FCALL of the decide library once loaded, EVALSHA until then or without it. */
  private readonly functions: DecideFunctions;

  constructor(
    private readonly redis: RedisClient,
    private readonly options: RedisStoreOptions = {},
  ) {
    this.description = redis instanceof Cluster ? `redis cluster seeds ${describeSeeds(redis)}` : `redis ${redis.options.host}:${redis.options.port}`;
    // No numberOfKeys: the key count varies with the limits, so each call passes it first.
    redis.defineCommand(DECIDE_SCRIPT_NAME, { lua: decideLua });
    this.functions = new DecideFunctions(options.functions !== false);
    this.slices = new SliceCalls(redis, options.clock);
    // Node batches on a cluster (cluster-node-batches.ts): one script call per master per turn.
    const nodeBatches =
      redis instanceof Cluster && options.batch !== false
        ? new ClusterNodeBatches(
            redis,
            (node) => this.trafficOf(node),
            (call) => this.send(call, false, 1),
            this.functions,
          )
        : undefined;
    const send = (call: ScriptCall, binary: boolean, weight: number, node?: string) =>
      node !== undefined && binary && nodeBatches !== undefined ? nodeBatches.send(call, weight, node) : this.send(call, binary, weight);
    if (options.batch === false) this.batcher = undefined;
    else this.batcher = new ScriptBatcher(send, storeError, BATCH_LIMITS, nodeBatches?.routes());
  }

  /** The client (one node or a cluster), for the admin API's own commands (src/overrides, src/admin). */
  get client(): RedisClient {
    return this.redis;
  }

  /** A store on one Redis node (redis-clients.ts: a client that fails fast instead of queueing). */
  static connect(url: string, options: RedisStoreOptions = {}): RedisStore {
    return new RedisStore(singleNodeClient(url, options), options);
  }

  /** A store on a Redis Cluster from seed nodes (redis-clients.ts, docs/redis-cluster.md). */
  static connectCluster(seeds: readonly string[], options: RedisStoreOptions = {}): RedisStore {
    return new RedisStore(clusterClient(seeds, options), options);
  }

  /**
   * Each step as one script call when its keys share a slot (always on one
   * node), else by the cross-slot saga (cross-slot/). The steps of one call
   * reach Redis in the same turn: the batcher sends them as one script call
   * (one per master on a cluster), the saga's first phase included.
   */
  decide(steps: readonly DecideStep[]): Promise<Array<GroupDecision | Error>> {
    return (
      decideWithSlices(
        steps,
        (rest) => this.decideScripted(rest),
        (step) => this.slices.run(step),
      ) ?? this.decideScripted(steps as readonly ScriptedStep[])
    );
  }

  private decideScripted(steps: readonly ScriptedStep[]): Promise<Array<GroupDecision | Error>> {
    try {
      if (!(this.redis instanceof Cluster)) return this.runScripts(steps.map(scriptStepOf));
      const direct: ScriptStep[] = [];
      const apart: ScriptedStep[] = [];
      /** Per step, its place among the direct steps (>= 0) or among those apart (< 0: ~place). */
      const places = new Array<number>(steps.length);
      for (let i = 0; i < steps.length; i++) {
        const step = steps[i]!;
        if (oneSlot(step.calls)) places[i] = direct.push(scriptStepOf(step)) - 1;
        else places[i] = ~(apart.push(step) - 1);
      }
      if (apart.length === 0) return this.runScripts(direct);
      const fromDirect = direct.length === 0 ? undefined : this.runScripts(direct);
      const fromApart = decideAcrossSlots(this.scripts, apart, slotGroups);
      return Promise.all([fromDirect, fromApart]).then(([one, several]) => {
        const answers = new Array<GroupDecision | Error>(steps.length);
        for (let i = 0; i < steps.length; i++) answers[i] = places[i]! >= 0 ? one![places[i]!]! : several[~places[i]!]!;
        return answers;
      });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** What the cross-slot saga needs of this store. */
  private readonly scripts: ScriptSteps = {
    run: (steps) => this.runScripts(steps),
    remember: (memo, value) => this.remember(memo, value),
    inOneCall: (calls) => this.inOneCall(calls),
    spend: (calls) => decideOne(this, { mode: 'spend', calls }),
  };

  /**
   * Script steps whose keys share a slot (or, with `acrossSlots`, one
   * master's slots), each one script call, answered in order. A settle
   * step's record is told as soon as it answers.
   */
  protected runScripts(steps: readonly ScriptStep[]): Promise<Array<GroupDecision | Error>> {
    const now = this.options.clock?.now();
    if (steps.length === 1) {
      // The usual Allow: one call, without the batch's arrays.
      const step = steps[0]!;
      return this.run(decideArguments(step.calls, step.mode, now, step.options)).then(
        (reply) => [answerOf(step, reply)],
        (error: unknown) => [asError(error)],
      );
    }
    const calls = new Array<ScriptCall>(steps.length);
    for (let i = 0; i < steps.length; i++) calls[i] = decideArguments(steps[i]!.calls, steps[i]!.mode, now, steps[i]!.options);
    if (this.batcher === undefined) return Promise.all(calls.map((call, i) => this.send(call, false).then((reply) => answerOf(steps[i]!, reply), asError)));
    return this.batcher.runEach(calls).then((replies) => {
      const answers = new Array<GroupDecision | Error>(replies.length);
      for (let i = 0; i < replies.length; i++) {
        const reply = replies[i];
        answers[i] = reply instanceof Error ? reply : answerOf(steps[i]!, reply);
      }
      return answers;
    });
  }

  async remember(memo: Memo, value: string): Promise<void> {
    await this.run(rememberArguments(memo, value));
  }

  private run(call: ScriptCall): Promise<unknown> {
    return this.batcher === undefined ? this.send(call, false) : this.batcher.run(call);
  }

  /**
   * One script call; its error as the caller should see it (storeError).
   * `binary`: bulk strings come back as Buffers (ioredis's <name>Buffer variant).
   */
  private send({ keys, args, slot }: ScriptCall, binary: boolean, weight = 1): Promise<unknown> {
    const partition = this.redis instanceof Cluster ? this.partitionOfSlot(slot ?? keySlot(keys[0] ?? '')) : SINGLE_NODE;
    return this.trafficOf(partition).send(weight, () => this.functions.send(this.redis, DECIDE_ENTRY, keys, args, binary, this.masters, failedCall));
  }

  /** Where the decide library goes again after a "Function not found": every node that holds state. */
  private readonly masters = (): Redis[] => [...stateNodes(this.redis).values()];

  /** Each master of a cluster (or the one node) with its own breaker, budget and connection (QuotaStore.parts). */
  readonly parts: StoreParts = {
    partitionOf: (calls) => this.partitionOfCalls(calls),
    silentForMs: (partition) => this.traffic.get(this.redis instanceof Cluster ? partition : SINGLE_NODE)?.silentForMs() ?? 0,
    abandonCalls: (partition) => this.abandonCalls(partition),
    evictionRisk: () => this.eviction,
    decideCommand: () => this.functions.command,
  };

  /**
   * Closes the connection to the node with a TCP reset: the kernel drops the
   * commands it still holds unsent or unacknowledged, where a normal close
   * would go on retransmitting them, and Redis would run them once the
   * network healed. ioredis connects anew by itself. One node only: on a
   * cluster ioredis manages each node's connection itself (docs/operations.md).
   */
  private abandonCalls(_partition: string): void {
    if (this.redis instanceof Cluster || this.redis.status !== 'ready') return;
    resetConnection(this.redis.stream);
  }

  private trafficOf(partition: string): PartitionTraffic {
    let traffic = this.traffic.get(partition);
    if (traffic === undefined) {
      traffic = new PartitionTraffic(MAX_OUTSTANDING_DECISIONS);
      this.traffic.set(partition, traffic);
    }
    return traffic;
  }

  /**
   * The master owning the slot the step's first reservation goes to (its
   * lowest slot), as the client last saw it: a dead shard opens its own
   * circuit breaker, and once a replica takes over, its slots belong to a new
   * partition that starts closed. One node: one partition.
   */
  private partitionOfCalls(calls: readonly LimitCall[]): string {
    if (!(this.redis instanceof Cluster)) return SINGLE_NODE;
    let slot = Number.POSITIVE_INFINITY;
    for (let i = 0; i < calls.length; i++) slot = Math.min(slot, slotOf(calls[i]!));
    if (slot === Number.POSITIVE_INFINITY) slot = 0;
    return this.partitionOfSlot(slot);
  }

  private partitionOfSlot(slot: number): string {
    return (this.redis as Cluster).slots[slot]?.[0] ?? `slot ${slot}`;
  }

  /**
   * Node batches reach keys of every slot their master serves (decide.lua,
   * "Node batch"), so a decision whose slots one master serves is one call
   * there, atomic as any script call, instead of a reservation per slot.
   */
  private inOneCall(calls: readonly LimitCall[]): boolean {
    if (!(this.redis instanceof Cluster) || this.batcher === undefined || calls.length < 2) return false;
    const slots = this.redis.slots;
    const master = slots[slotOf(calls[0]!)]?.[0];
    if (master === undefined) return false;
    for (let i = 1; i < calls.length; i++) if (slots[slotOf(calls[i]!)]?.[0] !== master) return false;
    return true;
  }

  /** Keys in the quota database (DBSIZE, O(1); summed over the masters of a cluster); for the state-keys metric. */
  keyCount(): Promise<number> {
    return keyCount(this.redis);
  }

  /**
   * Waits until Redis answers a PING (every master, on a cluster), then checks once
   * whether Redis could evict quota state (see evictionRisk) and warms the
   * decision path: the decide script loaded on every master (as a function
   * library, decide-functions.ts, or else SCRIPT LOAD),
   * and one check (nothing written) through the batcher and the script, so
   * that the first decision after health says SERVING pays no script
   * compilation, no NOSCRIPT round trip and no first-call code loading.
   * ioredis keeps reconnecting meanwhile.
   */
  async ready(): Promise<void> {
    for (;;) {
      try {
        if (await everyNodeAnswers(this.redis)) {
          this.eviction = await checkEviction(stateNodes(this.redis));
          await this.warmUp();
          return;
        }
      } catch {
        // Not yet: wait for the next connection attempt.
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  private async warmUp(): Promise<void> {
    const nodes = [...stateNodes(this.redis).values()];
    await this.functions.loadOn(nodes);
    if (!this.functions.inUse) await Promise.all(nodes.map((node) => node.script('LOAD', decideLua)));
    const [answer] = await this.decide([{ mode: 'spend', calls: [WARM_UP_CHECK] }]);
    if (answer instanceof Error) throw answer;
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
