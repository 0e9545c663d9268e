import type { Socket } from 'node:net';
// ioredis 6, not 5.11: with 5.11 a service whose Redis refuses its TLS client
// certificate crashed now and then on an unhandled socket 'error' (ECONNRESET)
// at shutdown, 2 of 100 tries under load, none of 100 with 6.0. 6.0's RESP decoder is slow on arrays (about 100 µs for the
// 600 numbers of a 100-decision reply), so a batch replies one binary string
// (decide.lua, "Batch"), which it decodes in under a microsecond.
import { Cluster, type Redis } from 'ioredis';
import {
  asError,
  type Clock,
  type DecideMode,
  type DecideOptions,
  type GroupDecision,
  type Limit,
  type LimitCall,
  type LimitOutcome,
  type Memo,
  parseDecideReply,
  parseSettleReply,
} from '@quota-service/core';
import { decideArguments, decideLua, DECIDE_SCRIPT_NAME, rememberArguments, type ScriptCall } from './script/decide-script.js';
import { checkEviction, type EvictionRisk } from './eviction-check.js';
import { keySlot } from './key-slot.js';
import { clusterClient, singleNodeClient, type RedisConnectionOptions } from './redis-clients.js';
import { BATCH_LIMITS, ScriptBatcher } from './script-batcher.js';
import { ClusterNodeBatches } from './cluster-node-batches.js';
import { storeError } from '../store-errors.js';
import { PartitionTraffic } from './partition-traffic.js';
import type { DecideStep, QuotaStore } from '../store.js';

export interface RedisStoreOptions extends RedisConnectionOptions {
  /**
   * Tests only: send this clock's time to the scripts instead of letting them
   * read Redis TIME. Production leaves it unset; the config cannot set it.
   */
  testClock?: Clock;
  /**
   * Coalesce one event-loop turn's script calls into one (default true; one
   * per master on a cluster). Off only to measure the difference
   * (bench/store-batch.ts) or to decide one by one in tests.
   */
  batch?: boolean;
}

type ScriptRunner = (...args: (string | number)[]) => Promise<unknown>;

/** One node (Redis) or a Redis Cluster: both run the same scripts, keys route by hash slot. */
export type RedisClient = Redis | Cluster;

/**
 * Decisions sent to one partition and not yet answered; more wait in this
 * process (PartitionTraffic). A thousand token bucket decisions take Redis a
 * few milliseconds, so what it was sent never keeps it silent for long.
 */
const MAX_OUTSTANDING_DECISIONS = 1000;

/** The one partition of a single node. */
const SINGLE_NODE = 'redis';

/**
 * Decisions inside Redis: one Lua script per decision, registered with ioredis
 * defineCommand, which sends EVAL the first time on each connection and EVALSHA
 * after that, and falls back to EVAL on NOSCRIPT (a restarted node, SCRIPT FLUSH,
 * a freshly promoted replica). On a cluster, ioredis routes each script call by
 * its key's slot and follows MOVED and ASK.
 *
 * The script calls issued within one event-loop turn go as one script call
 * (ScriptBatcher, driver batch mode): an AllowBatch of 100 requests costs
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

  constructor(
    private readonly redis: RedisClient,
    private readonly options: RedisStoreOptions = {},
  ) {
    this.description = redis instanceof Cluster ? `redis cluster seeds ${describeSeeds(redis)}` : `redis ${redis.options.host}:${redis.options.port}`;
    // No numberOfKeys: the key count varies with the limits, so each call passes it first.
    redis.defineCommand(DECIDE_SCRIPT_NAME, { lua: decideLua });
    // Node batches on a cluster (cluster-node-batches.ts): one script call per master per turn.
    const nodeBatches =
      redis instanceof Cluster && options.batch !== false
        ? new ClusterNodeBatches(
            redis,
            (node) => this.trafficOf(node),
            (call) => this.send(call, false, 1),
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

  async decide(limit: Limit, identityKey: string, cost: number): Promise<LimitOutcome> {
    const [outcome] = await this.decideAll([{ limit, identityKey, cost }], 'spend');
    return outcome as LimitOutcome;
  }

  async decideAll(calls: readonly LimitCall[], mode: DecideMode): Promise<LimitOutcome[]> {
    return (await this.decideGroup(calls, mode)).outcomes;
  }

  decideGroup(calls: readonly LimitCall[], mode: DecideMode, options: DecideOptions = {}): Promise<GroupDecision> {
    // A then, not an async function: one per decision (an async frame was more).
    try {
      return this.run(decideArguments(calls, mode, this.options.testClock?.now(), options)).then((reply) =>
        mode === 'settle' ? parseSettleReply(reply, calls.length) : parseDecideReply(reply, calls.length, options.memo),
      );
    } catch (error) {
      return Promise.reject(error);
    }
  }

  decideGroups(list: readonly (readonly LimitCall[])[], mode: DecideMode | readonly DecideStep[]): Promise<Array<GroupDecision | Error>> {
    const stepOf = (i: number): DecideStep => (typeof mode === 'string' ? { mode } : mode[i]!);
    if (this.batcher === undefined) {
      // Batching off: one call each.
      return Promise.all(list.map((calls, i) => this.decideGroup(calls, stepOf(i).mode, stepOf(i)).then(undefined, asError)));
    }
    const now = this.options.testClock?.now();
    let calls: ScriptCall[];
    try {
      calls = new Array<ScriptCall>(list.length);
      for (let i = 0; i < list.length; i++) {
        calls[i] = typeof mode === 'string' ? decideArguments(list[i]!, mode, now) : decideArguments(list[i]!, mode[i]!.mode, now, mode[i]!);
      }
    } catch (error) {
      return Promise.reject(error);
    }
    return this.batcher.runEach(calls).then((replies) => {
      const answers = new Array<GroupDecision | Error>(replies.length);
      for (let i = 0; i < replies.length; i++) {
        const reply = replies[i];
        if (reply instanceof Error) answers[i] = reply;
        else {
          try {
            answers[i] = parseDecideReply(reply, list[i]!.length);
          } catch (error) {
            answers[i] = asError(error);
          }
        }
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
    const name = binary ? `${DECIDE_SCRIPT_NAME}Buffer` : DECIDE_SCRIPT_NAME;
    const run = (this.redis as unknown as Record<string, ScriptRunner>)[name];
    if (run === undefined) return Promise.reject(new Error(`script ${name} is not registered`));
    return this.trafficOf(this.partitionOf(keys[0] ?? '', slot)).send(weight, () =>
      (run.call(this.redis, keys.length, ...keys, ...args) as Promise<unknown>).catch((error: unknown) => {
        throw storeError(error);
      }),
    );
  }

  silentForMs(partition: string): number {
    return this.traffic.get(this.redis instanceof Cluster ? partition : SINGLE_NODE)?.silentForMs() ?? 0;
  }

  /**
   * Closes the connection to the node with a TCP reset: the kernel drops the
   * commands it still holds unsent or unacknowledged, where a normal close
   * would go on retransmitting them, and Redis would run them once the
   * network healed. ioredis connects anew by itself. One node only: on a
   * cluster ioredis manages each node's connection itself (docs/operations.md).
   */
  abandonCalls(_partition: string): void {
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
   * On a cluster, the master owning the key's slot as the client last saw it: a
   * dead shard opens its own circuit breaker, and once a replica takes over, its
   * slots belong to a new partition that starts closed. One node: one partition.
   */
  slotOf(key: string): number | undefined {
    return this.redis instanceof Cluster ? keySlot(key) : undefined;
  }

  /**
   * Node batches reach keys of every slot their master serves (decide.lua,
   * "Node batch"), so a decision whose slots one master serves is one call
   * there, atomic as any script call, instead of a reservation per slot.
   */
  decidesInOneCall(calls: readonly LimitCall[]): boolean {
    if (!(this.redis instanceof Cluster) || this.batcher === undefined || calls.length < 2) return false;
    const slots = this.redis.slots;
    const master = slots[calls[0]!.slot ?? keySlot(calls[0]!.identityKey)]?.[0];
    if (master === undefined) return false;
    for (let i = 1; i < calls.length; i++) if (slots[calls[i]!.slot ?? keySlot(calls[i]!.identityKey)]?.[0] !== master) return false;
    return true;
  }

  partitionOf(key: string, slot?: number): string {
    if (!(this.redis instanceof Cluster)) return SINGLE_NODE;
    slot ??= keySlot(key);
    return this.redis.slots[slot]?.[0] ?? `slot ${slot}`;
  }

  /** Keys in the quota database (DBSIZE, O(1); summed over the masters of a cluster); for the state-keys metric. */
  async keyCount(): Promise<number> {
    if (!(this.redis instanceof Cluster)) return this.redis.dbsize();
    const sizes = await Promise.all(this.redis.nodes('master').map((node) => node.dbsize()));
    return sizes.reduce((sum, size) => sum + size, 0);
  }

  /**
   * Waits until Redis answers a PING (every master, on a cluster), then checks once
   * whether Redis could evict quota state (see evictionRisk); ioredis keeps
   * reconnecting meanwhile.
   */
  async ready(): Promise<void> {
    for (;;) {
      try {
        if (await this.answers()) {
          this.eviction = await checkEviction(this.nodes());
          return;
        }
      } catch {
        // Not yet: wait for the next connection attempt.
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** What the start-up check found about early eviction; undefined before ready() resolved. */
  evictionRisk(): EvictionRisk | undefined {
    return this.eviction;
  }

  private async answers(): Promise<boolean> {
    if (this.redis.status !== 'ready') return false;
    const nodes = [...this.nodes().values()];
    if (nodes.length === 0) return false;
    const pongs = await Promise.all(nodes.map((node) => node.ping()));
    return pongs.every((pong) => pong === 'PONG');
  }

  /** The nodes that hold state, by host:port: the one node, or every master of the cluster. */
  private nodes(): Map<string, Redis> {
    const nodes = this.redis instanceof Cluster ? this.redis.nodes('master') : [this.redis];
    return new Map(nodes.map((node) => [`${node.options.host}:${node.options.port}`, node]));
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

/** A TCP reset where the socket allows it (a TLS socket does not: it is closed as usual). */
function resetConnection(stream: Socket): void {
  try {
    stream.resetAndDestroy();
  } catch {
    stream.destroy();
  }
}

/** The seeds as given to the client (host:port only: credentials never reach a log line). */
function describeSeeds(cluster: Cluster): string {
  const seeds = (cluster as unknown as { startupNodes?: { host?: string; port?: number }[] }).startupNodes ?? [];
  return seeds.map((seed) => `${seed.host}:${seed.port}`).join(',');
}
