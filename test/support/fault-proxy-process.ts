import { fork } from 'node:child_process';
import type { Faults, FaultProxyOptions } from './fault-proxy.js';
import { asIfOnItsOwnHost } from './own-cpu.js';
import { own } from './owned-child.js';
import { TS_NODE_ARGS } from './ts-node-args.js';

/**
 * The fault proxy (fault-proxy.ts) in a process of its own, at a higher CPU
 * priority than the rest: it stands for the network, whose timing must not
 * depend on how busy the load driver or the machine is. Its own lateness is
 * still measured (maxLateMs) and reported beside the figures.
 */
export interface FaultProxyProcess {
  readonly port: number;
  setFaults(faults: Faults): Promise<void>;
  stall(): Promise<void>;
  resume(): Promise<void>;
  stats(): Promise<ProxyStats>;
  close(): Promise<void>;
}

/** A request to the proxy process, and its answer (by id). */
type Op = { op: 'faults'; faults: Faults } | { op: 'stall' } | { op: 'resume' } | { op: 'stats' };
export type ProxyCommand = Op & { id: number };
export interface ProxyStats {
  lost: { toTarget: number; toClient: number };
  maxLateMs: number;
}
export type ProxyReply = { id: number; stats?: ProxyStats } | { ready: number } | { error: string };

export async function startFaultProxyProcess(options: Omit<FaultProxyOptions, 'random'>): Promise<FaultProxyProcess> {
  const child = fork(new URL('./fault-proxy-main.ts', import.meta.url).pathname, [JSON.stringify(options)], {
    execArgv: [...TS_NODE_ARGS],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const owner = own(child);
  asIfOnItsOwnHost(child.pid!);
  const waiting = new Map<number, (reply: { id: number; stats?: ProxyStats }) => void>();
  let lastId = 0;
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`fault proxy exited (${code}) before listening`)));
    child.on('message', (reply: ProxyReply) => {
      if ('ready' in reply) resolve(reply.ready);
      else if ('error' in reply) reject(new Error(reply.error));
      else waiting.get(reply.id)?.(reply);
    });
  });
  const ask = (command: Op) =>
    new Promise<{ id: number; stats?: ProxyStats }>((resolve) => {
      const id = ++lastId;
      waiting.set(id, (reply) => {
        waiting.delete(id);
        resolve(reply);
      });
      child.send({ ...command, id });
    });
  return {
    port,
    setFaults: async (faults) => void (await ask({ op: 'faults', faults })),
    stall: async () => void (await ask({ op: 'stall' })),
    resume: async () => void (await ask({ op: 'resume' })),
    stats: async () => (await ask({ op: 'stats' })).stats!,
    close: () => owner.stop(2_000),
  };
}
