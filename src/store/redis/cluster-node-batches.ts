import type { Cluster, Redis } from 'ioredis';
import { NODE_BATCH_SCRIPT_NAME, nodeBatchLua, type ScriptCall } from './script/decide-script.js';
import { type DecideFunctions, NODE_BATCH_ENTRY } from './decide-functions.js';
import { keySlot } from './key-slot.js';
import type { PartitionTraffic } from './partition-traffic.js';
import { whenConnected } from './redis-clients.js';
import { BatchNotRun, type BatchRoutes } from './script-batcher.js';
import { storeError } from './store-errors.js';

/**
 * A node's refusals of a whole node batch before its script ran: the node is
 * no master now (READONLY), or no longer serves what it was sent. Its calls
 * go again, each by its own slot.
 */
const NOT_RUN_REPLY = /^(READONLY|MASTERDOWN|CLUSTERDOWN|MOVED|ASK|TRYAGAIN|CROSSSLOT)\b/;

/**
 * Node batches on a Redis Cluster (decide.lua, "Node batch"): where each
 * call goes (the master of its slot, as last seen), each master's own
 * connection, which learns the batch script as ioredis adds it, and the
 * batch sent there with its keys in ARGV.
 */
export class ClusterNodeBatches {
  /** The cluster's node connections by host:port (ioredis's own, as it adds and drops them). */
  private readonly nodeClients = new Map<string, Redis>();

  constructor(
    private readonly cluster: Cluster,
    /** The traffic (silence and abandoned calls) of one master, by host:port. */
    private readonly trafficOf: (node: string) => PartitionTraffic,
    /** Sends a call alone by ioredis's own routing, which follows MOVED and ASK. */
    private readonly sendAlone: (call: ScriptCall) => Promise<unknown>,
    /** FCALL of the library's node batch function once loaded, the batch script (EVALSHA) until then. */
    private readonly functions: DecideFunctions,
  ) {
    const add = (node: Redis) => {
      node.defineCommand(NODE_BATCH_SCRIPT_NAME, { lua: nodeBatchLua });
      this.nodeClients.set(`${node.options.host}:${node.options.port}`, node);
    };
    for (const node of cluster.nodes()) add(node);
    cluster.on('+node', add);
    cluster.on('-node', (node: Redis) => {
      const key = `${node.options.host}:${node.options.port}`;
      if (this.nodeClients.get(key) === node) this.nodeClients.delete(key);
    });
  }

  /** How the script batcher routes calls on this cluster. */
  routes(): BatchRoutes {
    return {
      nodeOf: (call) => this.cluster.slots[call.slot ?? keySlot(call.keys[0] ?? '')]?.[0],
      resend: this.sendAlone,
    };
  }

  /**
   * A node batch on one master's own connection, keys in ARGV. A refusal
   * before the script ran, or no connection to the node (it left the
   * cluster), reads the slot map again and then rejects with BatchNotRun:
   * its calls go again, each alone, to the masters that serve them now.
   * (Sent again before the map is read, a call could go to the old node
   * just as ioredis drops its connection there, and fail as one that may
   * have run.)
   */
  send({ args }: ScriptCall, weight: number, node: string): Promise<unknown> {
    const client = this.nodeClients.get(node);
    if (client === undefined) return this.refreshSlots().then(() => Promise.reject(new BatchNotRun(`no connection to ${node}`)));
    // Keys in ARGV; a node that lost the library gets it again, and the batch goes once more.
    return this.trafficOf(node).send(weight, () => this.functions.send(client, NODE_BATCH_ENTRY, [], args, true, () => [client], this.nodeBatchError));
  }

  private readonly nodeBatchError = (error: unknown): Promise<never> => {
    if (error instanceof Error && error.name === 'ReplyError' && NOT_RUN_REPLY.test(error.message)) {
      return this.refreshSlots().then(() => Promise.reject(new BatchNotRun(error.message)));
    }
    return Promise.reject(storeError(error));
  };

  /**
   * Reads the cluster's slot map again (ioredis runs one refresh at a time),
   * then waits for the connections to its masters (whenConnected); never rejects.
   */
  private refreshSlots(): Promise<void> {
    return new Promise<void>((resolve) => this.cluster.refreshSlotsCache(() => resolve()))
      .then(() => Promise.all(this.cluster.nodes('master').map(whenConnected)))
      .then(() => undefined);
  }
}
