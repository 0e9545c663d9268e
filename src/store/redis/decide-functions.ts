import { asError } from '@quota-service/core';
import { type Cluster, Command, type Redis } from 'ioredis';
import { DECIDE_SCRIPT_NAME, decideLibrary, NODE_BATCH_SCRIPT_NAME } from './script/decide-script.js';

/** A node's answer to an FCALL of a library it does not hold: nothing ran. */
const NOT_LOADED = /^ERR Function not found/;

/** A node's answer to FUNCTION LOAD of a library it holds already. */
const ALREADY_LOADED = /^ERR Library '[^']*' already exists/;

/** Whether `error` is a node's "Function not found": the call did not run there, and may go again. */
function isFunctionNotLoaded(error: unknown): boolean {
  return error instanceof Error && NOT_LOADED.test(error.message);
}

/** Redis answered with an error (the command refused, not the connection lost). */
function isReplyError(error: unknown): boolean {
  return error instanceof Error && error.name === 'ReplyError';
}

type ScriptRunner = (...args: (string | number)[]) => Promise<unknown>;

/** What a decide call names: the script ioredis registered (defineCommand, EVALSHA) and the library's function (FCALL). */
export interface DecideEntry {
  readonly script: string;
  readonly fn: string;
}
export const DECIDE_ENTRY: DecideEntry = { script: DECIDE_SCRIPT_NAME, fn: decideLibrary.decide };
export const NODE_BATCH_ENTRY: DecideEntry = { script: NODE_BATCH_SCRIPT_NAME, fn: decideLibrary.nodeBatch };

/** How the decide script reaches Redis, for the startup log. */
export interface DecideCommand {
  command: 'FCALL' | 'EVALSHA';
  /** FCALL: the library; EVALSHA: why not FCALL. */
  detail: string;
}

/**
 * The decide script as a Redis Function library (decide-script.ts,
 * decideLibrary): loaded on every master when the store gets ready, and
 * called with FCALL from then on. Until then, and where it cannot load (Redis
 * before 7.0, a user without the FUNCTION command, `QUOTA_REDIS_FUNCTIONS=false`),
 * the store sends EVALSHA, which decides the same. A node that lost the
 * library (restarted without persistence, FUNCTION FLUSH, a master new to the
 * cluster) answers "Function not found" before running anything: the library
 * is loaded there again and the call goes once more; if it cannot be loaded
 * again, the store goes back to EVALSHA.
 */
export class DecideFunctions {
  private loaded = false;
  private why = 'not loaded yet';
  /** One load at a time per node, however many calls found it missing. */
  private readonly loading = new Map<Redis, Promise<void>>();

  constructor(private readonly wanted: boolean) {
    if (!wanted) this.why = 'QUOTA_REDIS_FUNCTIONS is false';
  }

  /** Whether calls go as FCALL now. */
  get inUse(): boolean {
    return this.loaded;
  }

  get command(): DecideCommand {
    return this.loaded ? { command: 'FCALL', detail: `library ${decideLibrary.name}` } : { command: 'EVALSHA', detail: this.why };
  }

  /**
   * Loads the library on every node that holds state; FCALL from then on if
   * each one took it. A node that refuses it (an error reply) leaves the
   * store on EVALSHA; a connection lost meanwhile rejects, and ready() tries again.
   */
  async loadOn(nodes: readonly Redis[]): Promise<void> {
    if (!this.wanted) return;
    try {
      await Promise.all(nodes.map((node) => this.load(node)));
      this.loaded = true;
    } catch (error) {
      if (!isReplyError(error)) throw error;
      this.giveUp(error);
    }
  }

  /**
   * After a "Function not found": loads the library on `nodes` again; a node
   * that refuses it sends the store back to EVALSHA. Resolves either way: the
   * caller sends the call again by whichever command is in use then (and a
   * connection lost meanwhile fails that call as it would have).
   */
  reload(nodes: readonly Redis[]): Promise<void> {
    return Promise.all(nodes.map((node) => this.load(node))).then(
      () => undefined,
      (error: unknown) => {
        if (isReplyError(error)) this.giveUp(error);
      },
    );
  }

  /**
   * One decide call on `client` (a node, or a cluster that routes it by its
   * keys' slot): FCALL of the library while it is in use, else the script
   * ioredis registered as `entry.script`. A "Function not found" loads the
   * library on `nodes()` again and sends the call once more. Every error
   * goes through `failed`, which rejects with what the caller should see.
   * `binary`: bulk strings come back as Buffers.
   */
  send(
    client: Redis | Cluster,
    entry: DecideEntry,
    keys: readonly string[],
    args: readonly string[],
    binary: boolean,
    nodes: () => readonly Redis[],
    failed: (error: unknown) => Promise<never>,
  ): Promise<unknown> {
    return this.sendOnce(client, entry, keys, args, binary).catch((error: unknown) =>
      isFunctionNotLoaded(error) ? this.reload(nodes()).then(() => this.sendOnce(client, entry, keys, args, binary).catch(failed)) : failed(error),
    );
  }

  private sendOnce(client: Redis | Cluster, entry: DecideEntry, keys: readonly string[], args: readonly string[], binary: boolean): Promise<unknown> {
    if (this.loaded) {
      // The command made here rather than by client.call(): that one gathers
      // its arguments into a rest array, shifts the name off and copies them
      // once more with Array.prototype.flat(), which for a decide call's
      // dozens of arguments was several % of the service's CPU samples at one
      // call in flight.
      // Given after the constructor, the arguments are sent as they are: all
      // text (no number or Buffer to convert), and the store's clients set no
      // key prefix.
      const command = new Command('fcall', [], { replyEncoding: binary ? null : 'utf8' });
      command.args = [entry.fn, String(keys.length), ...keys, ...args];
      client.sendCommand(command);
      return command.promise;
    }
    const name = binary ? `${entry.script}Buffer` : entry.script;
    const run = (client as unknown as Record<string, ScriptRunner>)[name];
    if (run === undefined) return Promise.reject(new Error(`script ${name} is not registered`));
    return run.call(client, keys.length, ...keys, ...args);
  }

  /**
   * FUNCTION LOAD without REPLACE: a library of this name holds this very
   * code (the name is its digest), so one already there is kept as it is,
   * not written again (to the AOF and the replicas) by every service start.
   */
  private load(node: Redis): Promise<void> {
    let pending = this.loading.get(node);
    if (pending === undefined) {
      pending = node
        .function('LOAD', decideLibrary.code)
        .then(
          () => undefined,
          (error: unknown) => {
            if (!(isReplyError(error) && ALREADY_LOADED.test((error as Error).message))) throw error;
          },
        )
        .finally(() => this.loading.delete(node));
      this.loading.set(node, pending);
    }
    return pending;
  }

  private giveUp(error: unknown): void {
    this.loaded = false;
    this.why = `FUNCTION LOAD failed: ${asError(error).message}`;
  }
}
